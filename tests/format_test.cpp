// Unit tests of the event's one JSON format (core/format/): strict UTF-8, base64, the line
// and its fields, and the one mapping from an Event.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/base/event.h"
#include "core/format/json_line.h"
#include "core/format/text.h"

using namespace keywatch;
using namespace std::string_literals;

namespace {

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

TEST(EventJson, Utf8KeyIsAJsonStringOnOneLine) {
    const std::string line = event_json(sample("line\nbreak \"quoted\" caf\xC3\xA9"));
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.find('\n'), std::string::npos);  // newlines in keys are escaped
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
    EXPECT_EQ(j["attempt"], 1);
    EXPECT_FALSE(j.contains("value"));
    EXPECT_FALSE(j.contains("queue"));
}

TEST(EventJson, FieldsComeInDocumentedOrder) {
    EXPECT_EQ(event_json(sample("k")),
              "{\"event\":\"expired\",\"key\":\"k\",\"db\":3,\"ts_ms\":1700000000123,"
              "\"attempt\":1,\"source\":\"notification\",\"id\":\"n:3:expired:6b\","
              "\"node\":\"127.0.0.1:6379\"}");
}

TEST(EventJson, TrackedItemFieldsComeInDocumentedOrder) {
    EventRecord r = sample("k");
    r.has_value = true;
    r.value = "v";
    r.deadline_ms = 1700000000000;
    r.attempt = 2;
    r.source = "sweep";
    r.queue = "keys";
    r.id = "q:keys:1700000000000:6b";
    EXPECT_EQ(event_json(r),
              "{\"event\":\"expired\",\"key\":\"k\",\"value\":\"v\",\"db\":3,"
              "\"ts_ms\":1700000000123,\"deadline_ms\":1700000000000,\"attempt\":2,"
              "\"source\":\"sweep\",\"queue\":\"keys\",\"id\":\"q:keys:1700000000000:6b\","
              "\"node\":\"127.0.0.1:6379\"}");
}

TEST(EventJson, KeyWithNulRoundTrips) {
    const std::string key = "a\0b"s;
    const auto j = nlohmann::json::parse(event_json(sample(key)));
    EXPECT_EQ(j["key"].get<std::string>(), key);
}

TEST(EventJson, NonUtf8KeyIsBase64Instead) {
    const auto j = nlohmann::json::parse(event_json(sample("bin:\xCA\xFE")));
    EXPECT_FALSE(j.contains("key"));
    EXPECT_EQ(j["key_b64"], "YmluOsr+");
}

TEST(EventJson, OptionalFieldsAppearWhenKnown) {
    EventRecord r = sample("k");
    r.deadline_ms = 1700000000000;
    r.attempt = 2;
    r.has_value = true;
    r.value = "\xFF";
    const auto j = nlohmann::json::parse(event_json(r));
    EXPECT_EQ(j["deadline_ms"], 1700000000000);
    EXPECT_EQ(j["attempt"], 2);
    EXPECT_EQ(j["value_b64"], "/w==");
    EXPECT_FALSE(j.contains("value"));
}

TEST(EventJson, EmptySnapshotIsAnEmptyValue) {
    EventRecord r = sample("k");
    r.has_value = true;
    const auto j = nlohmann::json::parse(event_json(r));
    EXPECT_EQ(j["value"], "");
}

TEST(EventJson, EveryFieldOfAnEventIsMappedOnce) {
    const std::string node = "[::1]:7001";
    Event ev;
    ev.name = "expired";
    ev.key = "k\0\xFF"s;
    ev.value = "v";
    ev.has_value = true;
    ev.db = 2;
    ev.ts_ms = 1700000000123;
    ev.deadline_ms = 1700000000000;
    ev.attempt = 3;
    ev.source = KW_SOURCE_LEASE_EXPIRED;
    ev.node = &node;
    ev.queue = "keys";
    const EventRecord r = event_record(ev);
    EXPECT_EQ(r.event, "expired");
    EXPECT_EQ(r.key, ev.key);
    EXPECT_TRUE(r.has_value);
    EXPECT_EQ(r.value, "v");
    EXPECT_EQ(r.db, 2);
    EXPECT_EQ(r.ts_ms, 1700000000123);
    EXPECT_EQ(r.deadline_ms, 1700000000000);
    EXPECT_EQ(r.attempt, 3);
    EXPECT_EQ(r.source, "lease_expired");
    EXPECT_EQ(r.node, node);
    EXPECT_EQ(r.queue, "keys");
    EXPECT_EQ(r.id, event_id(ev));
    EXPECT_EQ(event_json(ev), event_json(r));
    EXPECT_EQ(event_json(ev),
              "{\"event\":\"expired\",\"key_b64\":\"awD/\",\"value\":\"v\",\"db\":2,"
              "\"ts_ms\":1700000000123,\"deadline_ms\":1700000000000,\"attempt\":3,"
              "\"source\":\"lease_expired\",\"queue\":\"keys\",\"id\":\"" +
                  event_id(ev) + "\",\"node\":\"[::1]:7001\"}");
}

TEST(EventJson, AnEventWithoutSnapshotOrNodeHasNoValueAndAnEmptyNode) {
    Event ev;
    ev.name = "del";
    ev.key = "k";
    const EventRecord r = event_record(ev);
    EXPECT_FALSE(r.has_value);
    EXPECT_EQ(r.node, "");
    EXPECT_EQ(r.source, "notification");
    EXPECT_EQ(r.queue, "");
}

// The plugin host's fields (host->event_field) are the object's, in its order: each value
// as the JSON string's text, or the number's decimal.
TEST(EventJson, TheFieldsAreTheObjectsFieldsAsText) {
    EventRecord full = sample("bin:\xCA\xFE");
    full.has_value = true;
    full.value = "caf\xC3\xA9";
    full.deadline_ms = 1700000000000;
    full.attempt = 12;
    full.db = -1;
    full.queue = "keys";
    const std::string nul_key = "k\0"s;  // outlives the record's view of it
    EventRecord empty_value = sample(nul_key);
    empty_value.has_value = true;
    for (const EventRecord &r : {sample("k"), full, empty_value}) {
        const nlohmann::ordered_json j = event_object(r);
        std::vector<std::pair<std::string, std::string>> expected;
        for (auto it = j.begin(); it != j.end(); ++it)
            expected.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
        EXPECT_EQ(event_fields(r), expected) << event_json(r);
    }
}

// The source names: CApiEventJson.SourceNamesAreTheLinesOnes (kw_source_name forwards).

}  // namespace
