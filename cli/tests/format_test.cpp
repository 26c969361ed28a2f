// Unit tests of the CLI's output format: strict UTF-8, base64, JSON lines, --events.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "cli/base64.h"
#include "cli/event_names.h"
#include "cli/json_line.h"
#include "cli/utf8.h"

using namespace keywatch::cli;
using namespace std::string_literals;

TEST(Utf8, AcceptsWellFormedText) {
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("session:alice"));
    EXPECT_TRUE(is_valid_utf8("a\0b"s));             // NUL is U+0000
    EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9"));       // U+00E9
    EXPECT_TRUE(is_valid_utf8("\xE2\x82\xAC"));      // U+20AC
    EXPECT_TRUE(is_valid_utf8("\xED\x9F\xBF"));      // U+D7FF, below surrogates
    EXPECT_TRUE(is_valid_utf8("\xEE\x80\x80"));      // U+E000, above surrogates
    EXPECT_TRUE(is_valid_utf8("\xF0\x9F\x94\x91"));  // U+1F511
    EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF, the last
    EXPECT_TRUE(is_valid_utf8("\xC2\x80"));          // U+0080, the first 2-byte
}

TEST(Utf8, RefusesMalformedText) {
    EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
    EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated 2-byte
    EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated 3-byte
    EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x94"));      // truncated 4-byte
    EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
    EXPECT_FALSE(is_valid_utf8("\xC1\xBF"));          // overlong
    EXPECT_FALSE(is_valid_utf8("\xE0\x80\xAF"));      // overlong 3-byte
    EXPECT_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF"));  // overlong 4-byte
    EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // U+D800 surrogate
    EXPECT_FALSE(is_valid_utf8("\xED\xBF\xBF"));      // U+DFFF surrogate
    EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // U+110000
    EXPECT_FALSE(is_valid_utf8("\xF5\x80\x80\x80"));  // lead byte past F4
    EXPECT_FALSE(is_valid_utf8("\xFF"));
    EXPECT_FALSE(is_valid_utf8("\xC3\x28"));  // bad continuation
    EXPECT_FALSE(is_valid_utf8("\xE2\x28\xA1"));
    EXPECT_FALSE(is_valid_utf8("bin:\xCA\xFE"));
    EXPECT_FALSE(is_valid_utf8("ok\xC3\xA9then\x80"));  // bad byte after good text
}

TEST(Base64, MatchesRfc4648Vectors) {
    EXPECT_EQ(base64_encode(""), "");
    EXPECT_EQ(base64_encode("f"), "Zg==");
    EXPECT_EQ(base64_encode("fo"), "Zm8=");
    EXPECT_EQ(base64_encode("foo"), "Zm9v");
    EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
    EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
    EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, EncodesEveryByteValue) {
    EXPECT_EQ(base64_encode("\xFB\xFF"), "+/8=");  // the two non-alphanumeric digits
    EXPECT_EQ(base64_encode("\0\0\0"s), "AAAA");
    EXPECT_EQ(base64_encode("bin:\xCA\xFE"), "YmluOsr+");
}

EventRecord sample(std::string_view key) {
    EventRecord r;
    r.event = "expired";
    r.key = key;
    r.db = 3;
    r.ts_ms = 1700000000123;
    r.source = "notification";
    r.id = "n:3:expired:6b";
    r.node = "127.0.0.1:6379";
    return r;
}

TEST(JsonLine, Utf8KeyIsAJsonStringOnOneLine) {
    const std::string line = json_line(sample("line\nbreak \"quoted\" caf\xC3\xA9"));
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);  // newlines in keys are escaped
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["event"], "expired");
    EXPECT_EQ(j["key"], "line\nbreak \"quoted\" caf\xC3\xA9");
    EXPECT_FALSE(j.contains("key_b64"));
    EXPECT_EQ(j["db"], 3);
    EXPECT_EQ(j["ts_ms"], 1700000000123);
    EXPECT_EQ(j["source"], "notification");
    EXPECT_EQ(j["id"], "n:3:expired:6b");
    EXPECT_EQ(j["node"], "127.0.0.1:6379");
    EXPECT_FALSE(j.contains("deadline_ms"));
    EXPECT_FALSE(j.contains("attempt"));
    EXPECT_FALSE(j.contains("value"));
}

TEST(JsonLine, FieldsComeInDocumentedOrder) {
    EXPECT_EQ(json_line(sample("k")),
              "{\"event\":\"expired\",\"key\":\"k\",\"db\":3,\"ts_ms\":1700000000123,"
              "\"source\":\"notification\",\"id\":\"n:3:expired:6b\","
              "\"node\":\"127.0.0.1:6379\"}\n");
}

TEST(JsonLine, KeyWithNulRoundTrips) {
    const std::string key = "a\0b"s;
    const auto j = nlohmann::json::parse(json_line(sample(key)));
    EXPECT_EQ(j["key"].get<std::string>(), key);
}

TEST(JsonLine, NonUtf8KeyIsBase64Instead) {
    const auto j = nlohmann::json::parse(json_line(sample("bin:\xCA\xFE")));
    EXPECT_FALSE(j.contains("key"));
    EXPECT_EQ(j["key_b64"], "YmluOsr+");
}

TEST(JsonLine, OptionalFieldsAppearWhenKnown) {
    EventRecord r = sample("k");
    r.deadline_ms = 1700000000000;
    r.attempt = 2;
    r.has_value = true;
    r.value = "\xFF";
    const auto j = nlohmann::json::parse(json_line(r));
    EXPECT_EQ(j["deadline_ms"], 1700000000000);
    EXPECT_EQ(j["attempt"], 2);
    EXPECT_EQ(j["value_b64"], "/w==");
}

TEST(EventList, AcceptsKnownNamesTrimmedAndDeduplicated) {
    std::string canonical, err;
    ASSERT_TRUE(parse_event_list(" expired, del,expired ,rename_from", &canonical, &err)) << err;
    EXPECT_EQ(canonical, "expired,del,rename_from");
    ASSERT_TRUE(parse_event_list("*", &canonical, &err));
    EXPECT_EQ(canonical, "*");
    ASSERT_TRUE(parse_event_list("xgroup-createconsumer,hset", &canonical, &err));
}

TEST(EventList, UnknownNameIsNamedWithASuggestion) {
    std::string canonical, err;
    EXPECT_FALSE(parse_event_list("expired,expird", &canonical, &err));
    EXPECT_NE(err.find("'expird'"), std::string::npos) << err;
    EXPECT_NE(err.find("did you mean 'expired'"), std::string::npos) << err;
    EXPECT_FALSE(parse_event_list("nonsense-event-name", &canonical, &err));
    EXPECT_EQ(err.find("did you mean"), std::string::npos) << err;
}

TEST(EventList, EmptyEntriesAreRefused) {
    std::string canonical, err;
    EXPECT_FALSE(parse_event_list("", &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,,del", &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,", &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,*", &canonical, &err));
}
