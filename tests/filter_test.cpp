// glob_match (Redis-style, binary safe) and Filter: which events, keys and dbs a handler
// receives.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/engine/filter.h"
#include "core/redis/keyspace_events.h"

namespace keywatch {
namespace {

using namespace std::string_literals;

TEST(GlobMatch, StarMatchesAnyRunIncludingEmpty) {
    EXPECT_TRUE(glob_match("*", ""));
    EXPECT_TRUE(glob_match("*", "anything:at:all"));
    EXPECT_TRUE(glob_match("user:*", "user:"));
    EXPECT_TRUE(glob_match("user:*", "user:42:profile"));
    EXPECT_TRUE(glob_match("*:profile", "user:42:profile"));
    EXPECT_TRUE(glob_match("a*b*c", "a-x-b-y-c"));
    EXPECT_FALSE(glob_match("user:*", "users:1"));
    EXPECT_FALSE(glob_match("a*b*c", "a-x-b-y"));
}

TEST(GlobMatch, QuestionMarkMatchesExactlyOneByte) {
    EXPECT_TRUE(glob_match("h?llo", "hello"));
    EXPECT_TRUE(glob_match("h?llo", "hallo"));
    EXPECT_FALSE(glob_match("h?llo", "hllo"));
    EXPECT_FALSE(glob_match("h?llo", "heello"));
}

TEST(GlobMatch, BracketSetsRangesAndNegation) {
    EXPECT_TRUE(glob_match("h[ae]llo", "hello"));
    EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[ae]llo", "hillo"));
    EXPECT_TRUE(glob_match("h[^e]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
    EXPECT_TRUE(glob_match("h[a-b]llo", "hbllo"));
    EXPECT_FALSE(glob_match("h[a-b]llo", "hcllo"));
    EXPECT_TRUE(glob_match("id:[0-9][0-9]", "id:42"));
    EXPECT_FALSE(glob_match("id:[0-9][0-9]", "id:4x"));
}

TEST(GlobMatch, BackslashEscapesSpecialCharacters) {
    EXPECT_TRUE(glob_match("a\\*b", "a*b"));
    EXPECT_FALSE(glob_match("a\\*b", "axxb"));
    EXPECT_TRUE(glob_match("what\\?", "what?"));
    EXPECT_FALSE(glob_match("what\\?", "whats"));
    EXPECT_TRUE(glob_match("\\[x\\]", "[x]"));
}

TEST(GlobMatch, LiteralPatternMatchesOnlyItself) {
    EXPECT_TRUE(glob_match("exact", "exact"));
    EXPECT_FALSE(glob_match("exact", "exactly"));
    EXPECT_FALSE(glob_match("exact", "exac"));
    EXPECT_TRUE(glob_match("", ""));
    EXPECT_FALSE(glob_match("", "x"));
}

TEST(GlobMatch, IsCaseSensitive) {
    EXPECT_FALSE(glob_match("User:*", "user:1"));
    EXPECT_TRUE(glob_match("User:*", "User:1"));
}

TEST(GlobMatch, NulBytesAreOrdinaryBytes) {
    EXPECT_TRUE(glob_match("a\0*"s, "a\0zzz"s));
    EXPECT_FALSE(glob_match("a\0*"s, "a"s));
    EXPECT_FALSE(glob_match("a\0*"s, "ab"s));
    EXPECT_TRUE(glob_match("?\0?"s, "x\0y"s));
    EXPECT_TRUE(glob_match("*"s, "\0\0\0"s));
    EXPECT_FALSE(glob_match("abc"s, "ab\0"s));
}

TEST(GlobMatch, PathologicalPatternFinishes) {
    // Many stars against a long non-matching subject must not take exponential time.
    std::string pattern = std::string(30, '*') + "b";
    std::string subject(5000, 'a');
    EXPECT_FALSE(glob_match(pattern, subject));
}

TEST(Filter, DefaultSelectsExpiredEventsOfAnyKeyInAnyDb) {
    Filter f;
    EXPECT_TRUE(f.matches("expired", 0, "k"));
    EXPECT_TRUE(f.matches("expired", 15, "other"));
    EXPECT_TRUE(f.matches("expired", 0, ""));
    EXPECT_FALSE(f.matches("del", 0, "k"));
    EXPECT_FALSE(f.matches("evicted", 0, "k"));
}

TEST(Filter, EventListSelectsExactlyThoseEvents) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("events", "del,evicted", false, &err)) << err;
    EXPECT_TRUE(f.matches("del", 0, "k"));
    EXPECT_TRUE(f.matches("evicted", 0, "k"));
    EXPECT_FALSE(f.matches("expired", 0, "k"));
    EXPECT_FALSE(f.matches("dele", 0, "k"));
}

TEST(Filter, StarSelectsEveryDefaultEvent) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("events", "*", false, &err)) << err;
    const std::vector<std::string> star = star_events();
    ASSERT_EQ(star.size(), 8u);
    for (const std::string &e : star) EXPECT_TRUE(f.matches(e, 0, "k")) << e;
    EXPECT_EQ(f.events, (std::set<std::string, std::less<>>(star.begin(), star.end())));
}

TEST(Filter, OtherEventNamesRedisPublishesAreAccepted) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("events", "hset,lpush", false, &err)) << err;
    EXPECT_TRUE(f.matches("hset", 0, "h"));
    EXPECT_TRUE(f.matches("lpush", 0, "l"));
    EXPECT_FALSE(f.matches("expired", 0, "h"));
}

TEST(Filter, RefusesEmptyEventList) {
    Filter f;
    std::string err;
    EXPECT_FALSE(f.set("events", "", false, &err));
    EXPECT_FALSE(err.empty());
    EXPECT_FALSE(f.set("events", ",", false, &err));
    // Refusal leaves the filter as it was.
    EXPECT_TRUE(f.matches("expired", 0, "k"));
}

TEST(Filter, PrefixSelectsKeysStartingWithIt) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("prefix", "session:", false, &err)) << err;
    EXPECT_TRUE(f.matches("expired", 0, "session:1"));
    EXPECT_TRUE(f.matches("expired", 0, "session:"));
    EXPECT_FALSE(f.matches("expired", 0, "sessions:1"));
    EXPECT_FALSE(f.matches("expired", 0, "session"));
    EXPECT_FALSE(f.matches("expired", 0, "user:session:1"));
}

TEST(Filter, BinaryPrefixWithNulBytes) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("prefix", "a\0b"s, true, &err)) << err;
    EXPECT_TRUE(f.matches("expired", 0, "a\0bc"s));
    EXPECT_FALSE(f.matches("expired", 0, "a\0c"s));
    EXPECT_FALSE(f.matches("expired", 0, "a"s));
}

TEST(Filter, GlobSelectsMatchingKeys) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("glob", "order:*:paid", false, &err)) << err;
    EXPECT_TRUE(f.matches("expired", 0, "order:7:paid"));
    EXPECT_FALSE(f.matches("expired", 0, "order:7:open"));
}

TEST(Filter, PrefixAndGlobMustBothMatch) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("prefix", "order:", false, &err)) << err;
    ASSERT_TRUE(f.set("glob", "*:paid", false, &err)) << err;
    EXPECT_TRUE(f.matches("expired", 0, "order:1:paid"));
    EXPECT_FALSE(f.matches("expired", 0, "invoice:1:paid"));
    EXPECT_FALSE(f.matches("expired", 0, "order:1:open"));
}

TEST(Filter, DbSelectsOneDatabase) {
    Filter f;
    std::string err;
    ASSERT_TRUE(f.set("db", "3", false, &err)) << err;
    EXPECT_TRUE(f.matches("expired", 3, "k"));
    EXPECT_FALSE(f.matches("expired", 0, "k"));
    EXPECT_FALSE(f.matches("expired", 4, "k"));
}

TEST(Filter, DbStarOrMinusOneSelectsAny) {
    for (const char *any : {"*", "-1"}) {
        Filter f;
        std::string err;
        ASSERT_TRUE(f.set("db", "3", false, &err)) << err;
        ASSERT_TRUE(f.set("db", any, false, &err)) << any << ": " << err;
        EXPECT_TRUE(f.matches("expired", 0, "k")) << any;
        EXPECT_TRUE(f.matches("expired", 12, "k")) << any;
    }
}

TEST(Filter, RefusesBadDb) {
    for (const char *bad : {"abc", "", "-2", "1x", "99999999999"}) {
        Filter f;
        std::string err;
        EXPECT_FALSE(f.set("db", bad, false, &err)) << "accepted db '" << bad << "'";
        EXPECT_FALSE(err.empty()) << bad;
        EXPECT_TRUE(f.matches("expired", 5, "k")) << "refusal changed the filter: " << bad;
    }
}

TEST(Filter, RefusesUnknownNameAndNamesIt) {
    Filter f;
    std::string err;
    EXPECT_FALSE(f.set("keyprefix", "x", false, &err));
    EXPECT_NE(err.find("keyprefix"), std::string::npos) << err;
}

}  // namespace
}  // namespace keywatch
