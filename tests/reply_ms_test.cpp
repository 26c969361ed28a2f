// reply_ms(): the one reader of a deadline or score in a reply accepts what Redis and
// keywatch's scripts send (an integer, digits, a score as a server prints it) and nothing
// else.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/queue/reply_ms.h"

namespace keywatch {
namespace {

std::optional<int64_t> from_text(std::string text, int type = REDIS_REPLY_STRING) {
    redisReply r{};
    r.type = type;
    r.str = text.data();
    r.len = text.size();
    int64_t out = -7;
    if (!reply_ms(&r, &out)) {
        EXPECT_EQ(out, -7) << "a refused reply wrote its output";
        return std::nullopt;
    }
    return out;
}

TEST(ReplyMs, IntegersAndDigitsAreExact) {
    redisReply r{};
    r.type = REDIS_REPLY_INTEGER;
    r.integer = -3;
    int64_t out = 0;
    ASSERT_TRUE(reply_ms(&r, &out));
    EXPECT_EQ(out, -3);
    EXPECT_EQ(from_text("1764201600123"), 1764201600123);
    EXPECT_EQ(from_text("-1764201600123"), -1764201600123);
    // Beyond 2^53 digits stay exact (no detour through a double).
    EXPECT_EQ(from_text("9007199254740993"), 9007199254740993);
    EXPECT_EQ(from_text("0"), 0);
}

TEST(ReplyMs, AScoreInExponentFormIsRead) {
    // Redis 7.0 prints a score with "%.17g": 1e17 ms comes back as "1e+17"; a server that
    // prints the shortest form sends a deadline as "1.7642016e+12".
    EXPECT_EQ(from_text("1e+17"), 100000000000000000);
    EXPECT_EQ(from_text("2.5e+3"), 2500);
    EXPECT_EQ(from_text("1.7642016e+12"), 1764201600000);
}

TEST(ReplyMs, AFractionIsCutTowardZero) {
    // keywatch writes whole scores; one written by another program is read as before.
    EXPECT_EQ(from_text("1.5"), 1);
    EXPECT_EQ(from_text("-1.5"), -1);
}

TEST(ReplyMs, AnythingElseIsRefused) {
    EXPECT_EQ(from_text(""), std::nullopt);
    EXPECT_EQ(from_text("12x"), std::nullopt);
    EXPECT_EQ(from_text("0x10"), std::nullopt);
    EXPECT_EQ(from_text("+12"), std::nullopt);
    EXPECT_EQ(from_text("12 "), std::nullopt);
    EXPECT_EQ(from_text(std::string("12\0"
                                    "3",
                                    4)),
              std::nullopt);
    EXPECT_EQ(from_text(" 12"), std::nullopt);
    EXPECT_EQ(from_text("inf"), std::nullopt);
    EXPECT_EQ(from_text("nan"), std::nullopt);
    EXPECT_EQ(from_text("1e+19"), std::nullopt);  // beyond int64
    EXPECT_EQ(from_text("99999999999999999999"), std::nullopt);
    EXPECT_EQ(from_text("12", REDIS_REPLY_STATUS), std::nullopt);
    EXPECT_EQ(from_text("12", REDIS_REPLY_ERROR), std::nullopt);
    int64_t out = 5;
    EXPECT_FALSE(reply_ms(nullptr, &out));
    redisReply nil{};
    nil.type = REDIS_REPLY_NIL;
    EXPECT_FALSE(reply_ms(&nil, &out));
    EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace keywatch
