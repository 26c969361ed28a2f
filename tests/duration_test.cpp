// parse_duration_ms: "500ms", "30s", "5m", "1h", "2d" or plain milliseconds; everything else
// is refused with a message naming the text. time_limit.h: the latest deadline keywatch accepts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/base/duration.h"
#include "core/base/time_limit.h"

namespace keywatch {
namespace {

int64_t parse_ok(const std::string &text) {
    int64_t ms = -1;
    std::string err;
    EXPECT_TRUE(parse_duration_ms(text, &ms, &err)) << text << ": " << err;
    return ms;
}

TEST(ParseDuration, EveryUnit) {
    EXPECT_EQ(parse_ok("500ms"), 500);
    EXPECT_EQ(parse_ok("30s"), 30000);
    EXPECT_EQ(parse_ok("5m"), 300000);
    EXPECT_EQ(parse_ok("1h"), 3600000);
    EXPECT_EQ(parse_ok("2d"), 172800000);
}

TEST(ParseDuration, PlainNumberIsMilliseconds) {
    EXPECT_EQ(parse_ok("250"), 250);
    EXPECT_EQ(parse_ok("0"), 0);
    EXPECT_EQ(parse_ok("0s"), 0);
}

TEST(ParseDuration, LargeButRepresentableValues) {
    EXPECT_EQ(parse_ok("106751991167d"), INT64_C(106751991167) * 86400000);
    EXPECT_EQ(parse_ok("9223372036854775ms"), INT64_C(9223372036854775));
}

TEST(ParseDuration, RefusesMalformedTextAndNamesIt) {
    for (const char *bad : {"", "abc", "ms", "-5s", "+5s", "5 s", " 5s", "5s ", "1.5s", "5sec",
                            "5S", "5mss", "1h30m", "0x10"}) {
        int64_t ms = 42;
        std::string err;
        EXPECT_FALSE(parse_duration_ms(bad, &ms, &err)) << "accepted '" << bad << "'";
        EXPECT_EQ(ms, 42) << "refusal wrote a value for '" << bad << "'";
        EXPECT_NE(err.find("'" + std::string(bad) + "'"), std::string::npos)
            << "error does not quote the text: " << err;
        EXPECT_NE(err.find("500ms"), std::string::npos) << "error shows no example: " << err;
    }
}

TEST(ParseDuration, RefusesOverflow) {
    int64_t ms = 0;
    EXPECT_FALSE(parse_duration_ms("99999999999999999999", &ms));
    EXPECT_FALSE(parse_duration_ms("9999999999999999d", &ms));
    EXPECT_FALSE(parse_duration_ms("3000000000000000h", &ms));
}

TEST(ParseDuration, ErrorPointerMayBeNull) {
    int64_t ms = 0;
    EXPECT_FALSE(parse_duration_ms("nope", &ms, nullptr));
    EXPECT_TRUE(parse_duration_ms("1s", &ms, nullptr));
    EXPECT_EQ(ms, 1000);
}

TEST(TimeLimit, TheMaximumIsTheLastMillisecondOfYear9999) {
    EXPECT_EQ(kMaxTimeMs, 253402300799999);
    EXPECT_TRUE(time_within_max(kMaxTimeMs));
    EXPECT_FALSE(time_within_max(kMaxTimeMs + 1));
    EXPECT_FALSE(time_within_max(INT64_MAX));
}

TEST(TimeLimit, ADurationIsCheckedAsNowPlusItWithoutOverflow) {
    const int64_t now = 1795241184005;
    EXPECT_TRUE(duration_within_max(kMaxTimeMs - now, now));
    EXPECT_FALSE(duration_within_max(kMaxTimeMs - now + 1, now));
    EXPECT_FALSE(duration_within_max(INT64_MAX, now));
    EXPECT_FALSE(duration_within_max(INT64_MAX));
    int64_t ms = 0;
    ASSERT_TRUE(parse_duration_ms("106751991166d", &ms));
    EXPECT_FALSE(duration_within_max(ms)) << "parses, but its deadline is past the maximum";
    EXPECT_TRUE(duration_within_max(parse_ok("3650d")));
    EXPECT_NE(duration_after_max("'x'").find("9999-12-31T23:59:59.999Z"), std::string::npos);
}

}  // namespace
}  // namespace keywatch
