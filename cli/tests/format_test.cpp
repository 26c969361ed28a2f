// Unit tests of the CLI's pure pieces: strict UTF-8, base64, JSON lines, --events, times
// (--at, ISO output, spans) and the inspect table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "cli/event_names.h"
#include "cli/inspect_table.h"
#include "core/format/json_line.h"
#include "cli/time_text.h"
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
    EXPECT_EQ(j["attempt"], 1);
    EXPECT_FALSE(j.contains("value"));
    EXPECT_FALSE(j.contains("queue"));
}

TEST(JsonLine, FieldsComeInDocumentedOrder) {
    EXPECT_EQ(json_line(sample("k")),
              "{\"event\":\"expired\",\"key\":\"k\",\"db\":3,\"ts_ms\":1700000000123,"
              "\"attempt\":1,\"source\":\"notification\",\"id\":\"n:3:expired:6b\","
              "\"node\":\"127.0.0.1:6379\"}\n");
}

TEST(JsonLine, TrackedItemFieldsComeInDocumentedOrder) {
    EventRecord r = sample("k");
    r.has_value = true;
    r.value = "v";
    r.deadline_ms = 1700000000000;
    r.attempt = 2;
    r.source = "sweep";
    r.queue = "keys";
    r.id = "q:keys:1700000000000:6b";
    EXPECT_EQ(json_line(r),
              "{\"event\":\"expired\",\"key\":\"k\",\"value\":\"v\",\"db\":3,"
              "\"ts_ms\":1700000000123,\"deadline_ms\":1700000000000,\"attempt\":2,"
              "\"source\":\"sweep\",\"queue\":\"keys\",\"id\":\"q:keys:1700000000000:6b\","
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
    EXPECT_FALSE(j.contains("value"));
}

TEST(JsonLine, EmptySnapshotIsAnEmptyValue) {
    EventRecord r = sample("k");
    r.has_value = true;
    const auto j = nlohmann::json::parse(json_line(r));
    EXPECT_EQ(j["value"], "");
}

TEST(EventList, AcceptsKnownNamesTrimmedAndDeduplicated) {
    std::string canonical, err;
    ASSERT_TRUE(parse_event_list(" expired, del,expired ,rename_from", false, &canonical, &err))
        << err;
    EXPECT_EQ(canonical, "expired,del,rename_from");
    ASSERT_TRUE(parse_event_list("*", false, &canonical, &err));
    EXPECT_EQ(canonical, "*");
    ASSERT_TRUE(parse_event_list("xgroup-createconsumer,hset", false, &canonical, &err));
    ASSERT_TRUE(parse_event_list("zremrangebyscore,sortstore", false, &canonical, &err)) << err;
}

TEST(EventList, TaskOnlyWhereAllowed) {
    std::string canonical, err;
    EXPECT_FALSE(parse_event_list("task", false, &canonical, &err));
    ASSERT_TRUE(parse_event_list("expired,task", true, &canonical, &err)) << err;
    EXPECT_EQ(canonical, "expired,task");
}

TEST(EventList, UnknownNameIsNamedWithASuggestion) {
    std::string canonical, err;
    EXPECT_FALSE(parse_event_list("expired,expird", false, &canonical, &err));
    EXPECT_NE(err.find("'expird'"), std::string::npos) << err;
    EXPECT_NE(err.find("did you mean 'expired'"), std::string::npos) << err;
    EXPECT_FALSE(parse_event_list("zrembyscore", true, &canonical, &err));
    EXPECT_NE(err.find("did you mean 'zremrangebyscore'"), std::string::npos) << err;
    EXPECT_FALSE(parse_event_list("nonsense-event-name", false, &canonical, &err));
    EXPECT_EQ(err.find("did you mean"), std::string::npos) << err;
}

TEST(EventList, EmptyEntriesAreRefused) {
    std::string canonical, err;
    EXPECT_FALSE(parse_event_list("", false, &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,,del", false, &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,", false, &canonical, &err));
    EXPECT_FALSE(parse_event_list("expired,*", false, &canonical, &err));
}

TEST(Printable, EscapesWhatIsNotPrintableAscii) {
    EXPECT_EQ(printable("session:alice"), "session:alice");
    EXPECT_EQ(printable("bin:\xCA\xFE"), "bin:\\xCA\\xFE");
    EXPECT_EQ(printable("a\\b\n"), "a\\x5Cb\\x0A");
    EXPECT_EQ(printable("a\0b"s), "a\\x00b");
}

int64_t at(std::string_view text) {
    int64_t ms = -1;
    std::string err;
    EXPECT_TRUE(parse_time_ms(text, &ms, &err)) << text << ": " << err;
    return ms;
}

std::string refusal(std::string_view text) {
    int64_t ms = -1;
    std::string err;
    EXPECT_FALSE(parse_time_ms(text, &ms, &err)) << text << " was accepted as " << ms;
    EXPECT_EQ(ms, -1) << text;
    return err;
}

TEST(TimeText, EpochMillisecondsAsGiven) {
    EXPECT_EQ(at("0"), 0);
    EXPECT_EQ(at("1795241184005"), 1795241184005);
    EXPECT_EQ(at("253402300799999"), kMaxTimeMs);
}

TEST(TimeText, IsoUtcToTheMillisecond) {
    EXPECT_EQ(at("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(at("2026-11-21T10:00:00Z"), 1795255200000);
    EXPECT_EQ(at("2026-11-21T10:00:00.250Z"), 1795255200250);
    EXPECT_EQ(at("2026-11-21T10:00:00.25Z"), 1795255200250);
    EXPECT_EQ(at("2026-11-21T10:00:00.2Z"), 1795255200200);
    EXPECT_EQ(at("2000-02-29T23:59:59.999Z"), 951868799999);  // leap year (divisible by 400)
    EXPECT_EQ(at("2024-02-29T00:00:00Z"), 1709164800000);
    EXPECT_EQ(at("9999-12-31T23:59:59.999Z"), kMaxTimeMs);
}

TEST(TimeText, MalformedTimesAreRefusedWithTheReason) {
    EXPECT_NE(refusal("").find("empty"), std::string::npos);
    EXPECT_NE(refusal("-5").find("negative"), std::string::npos);
    EXPECT_NE(refusal("253402300800000").find("later than 9999-12-31"), std::string::npos);
    EXPECT_NE(refusal("1234567890123456").find("later than 9999-12-31"), std::string::npos);
    EXPECT_NE(refusal("tomorrow").find("neither a number"), std::string::npos);
    EXPECT_NE(refusal("12s").find("neither a number"), std::string::npos);
    EXPECT_NE(refusal("2026-13-01T00:00:00Z").find("month 13"), std::string::npos);
    EXPECT_NE(refusal("2026-00-01T00:00:00Z").find("month 0"), std::string::npos);
    EXPECT_NE(refusal("2026-02-29T00:00:00Z").find("day 29"), std::string::npos);
    EXPECT_NE(refusal("1900-02-29T00:00:00Z").find("before 1970"), std::string::npos);
    EXPECT_NE(refusal("2100-02-29T00:00:00Z").find("day 29"), std::string::npos);
    EXPECT_NE(refusal("2026-04-31T00:00:00Z").find("day 31"), std::string::npos);
    EXPECT_NE(refusal("2026-11-00T00:00:00Z").find("day 0"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T24:00:00Z").find("hour 24"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:60:00Z").find("minute 60"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:60Z").find("second 60"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00").find("must end with Z"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00z").find("must end with Z"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00ZZ").find("must end with Z"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00+01:00").find("only UTC"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00-05:00").find("only UTC"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00.Z").find("1 to 3 digits"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00:00.1234Z").find("1 to 3 digits"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21 10:00:00Z").find("expected 'T' at position 11"),
              std::string::npos);
    EXPECT_NE(refusal("2026-11-21t10:00:00Z").find("expected 'T'"), std::string::npos);
    EXPECT_NE(refusal("2026-1-21T10:00:00Z").find("expected a digit"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21T10:00").find("too short"), std::string::npos);
    EXPECT_NE(refusal("2026-11-21").find("too short"), std::string::npos);
    // Every refusal says which forms are accepted.
    EXPECT_NE(refusal("x").find("2026-11-21T10:00:00Z"), std::string::npos);
}

TEST(TimeText, FormatsUtcAndRoundTrips) {
    EXPECT_EQ(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(format_utc_ms(1795255200250), "2026-11-21T10:00:00.250Z");
    EXPECT_EQ(format_utc_ms(951868799999), "2000-02-29T23:59:59.999Z");
    EXPECT_EQ(format_utc_ms(kMaxTimeMs), "9999-12-31T23:59:59.999Z");
    EXPECT_EQ(format_utc_ms(-1), "-1");
    for (int64_t ms : {int64_t{0}, int64_t{1}, int64_t{86399999}, int64_t{1709164800000},
                       int64_t{1795241184005}, int64_t{4102444800000}})
        EXPECT_EQ(at(format_utc_ms(ms)), ms) << ms;
}

TEST(TimeText, SpansForPeople) {
    EXPECT_EQ(format_span_ms(0), "0ms");
    EXPECT_EQ(format_span_ms(850), "850ms");
    EXPECT_EQ(format_span_ms(1000), "1.0s");
    EXPECT_EQ(format_span_ms(1250), "1.2s");
    EXPECT_EQ(format_span_ms(12999), "12s");
    EXPECT_EQ(format_span_ms(312000), "5m12s");
    EXPECT_EQ(format_span_ms(3 * 3600000 + 5 * 60000), "3h05m");
    EXPECT_EQ(format_span_ms(2 * 86400000 + 3 * 3600000), "2d03h");
    EXPECT_EQ(format_span_ms(-1500), "-1.5s");
}

TEST(InspectTable, ParsesTheLibraryJsonAndAlignsColumns) {
    const std::string json =
        "{\"now_ms\":1795241184005,\"queues\":[{\"dead\":0,\"due\":12345,\"due_now\":3,"
        "\"inflight\":2,\"oldest_overdue_ms\":1250,\"queue\":\"keys\"},{\"dead\":1,"
        "\"due\":0,\"due_now\":0,\"inflight\":0,\"oldest_overdue_ms\":-1,"
        "\"queue\":\"emails\"}]}";
    std::vector<QueueFigures> queues;
    int64_t now = 0;
    std::string err;
    ASSERT_TRUE(parse_inspect_json(json, &queues, &now, &err)) << err;
    EXPECT_EQ(now, 1795241184005);
    ASSERT_EQ(queues.size(), 2u);
    EXPECT_EQ(queues[0].queue, "keys");
    EXPECT_EQ(queues[0].due, 12345);
    EXPECT_EQ(queues[0].due_now, 3);
    EXPECT_EQ(queues[0].inflight, 2);
    EXPECT_EQ(queues[0].oldest_overdue_ms, 1250);
    EXPECT_EQ(queues[1].dead, 1);
    EXPECT_EQ(inspect_table(queues),
              "QUEUE     DUE  DUE NOW  IN FLIGHT  DEAD  OLDEST OVERDUE\n"
              "keys    12345        3          2     0  1.2s\n"
              "emails      0        0          0     1  -\n");
}

TEST(InspectTable, RefusesAnUnknownShape) {
    std::vector<QueueFigures> queues;
    int64_t now = 0;
    std::string err;
    EXPECT_FALSE(parse_inspect_json("{\"queues\":[{\"queue\":\"keys\"}]}", &queues, &now, &err));
    EXPECT_NE(err.find("unexpected inspect output"), std::string::npos) << err;
    EXPECT_FALSE(parse_inspect_json("not json", &queues, &now, &err));
    EXPECT_EQ(inspect_table({}), "QUEUE  DUE  DUE NOW  IN FLIGHT  DEAD  OLDEST OVERDUE\n");
}
