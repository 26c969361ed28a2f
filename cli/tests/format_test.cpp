// Unit tests of the CLI's pure pieces: --events, printable bytes, times (--at, ISO output,
// spans), the inspect table and passwords hidden in URL lists. The event's JSON line is core's:
// tests/format_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "cli/event_names.h"
#include "cli/inspect_table.h"
#include "cli/redact_url.h"
#include "cli/time_text.h"
#include "cli/utf8.h"

using namespace keywatch::cli;
using namespace std::string_literals;

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

TEST(RedactUrl, HidesEachSeedsPasswordInAList) {
    EXPECT_EQ(redact_url_list("redis://:pw@a:1,redis://u:p2@b:2,redis://c:3"),
              "redis://:***@a:1,redis://u:***@b:2,redis://c:3");
    EXPECT_EQ(url_list("redis://a:1,,x"), (std::vector<std::string>{"redis://a:1", "", "x"}));
    EXPECT_EQ(redact_url_list(""), "");
}
