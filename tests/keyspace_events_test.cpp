// The event table (core/redis/keyspace_events.h): names as Redis publishes them, their
// flags, what "*" means, and the flag arithmetic.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/redis/keyspace_events.h"

namespace keywatch {
namespace {

TEST(KeyspaceEvents, EveryNameIsUniqueWithAKnownFlagAndAMeaning) {
    std::set<std::string_view> seen;
    for (const EventSpec &e : event_table()) {
        EXPECT_TRUE(seen.insert(e.name).second) << e.name;
        EXPECT_NE(std::string("g$lshzxetdnm").find(e.flag), std::string::npos) << e.name;
        EXPECT_FALSE(e.meaning.empty()) << e.name;
        EXPECT_TRUE(e.since.empty() || e.since == "7.4") << e.name;
    }
    EXPECT_EQ(event_names().size(), event_table().size());
}

TEST(KeyspaceEvents, NamesAndFlagsAreThoseRedisPublishes) {
    const std::vector<std::pair<const char *, char>> want = {
        {"expired", 'x'},          {"evicted", 'e'}, {"del", 'g'},       {"new", 'n'},
        {"zremrangebyscore", 'z'}, {"zpopmin", 'z'}, {"sortstore", 'l'}, {"sdiffstore", 's'},
        {"xgroup-create", 't'},    {"setbit", '$'},  {"pfadd", '$'},     {"keymiss", 'm'},
        {"georadiusstore", 'z'},   {"restore", 'g'}, {"hset", 'h'},      {"xsetid", 't'}};
    for (const auto &[name, flag] : want) {
        const EventSpec *e = find_event(name);
        ASSERT_NE(e, nullptr) << name;
        EXPECT_EQ(e->flag, flag) << name;
    }
    // Names Redis never publishes (SMOVE publishes srem and sadd).
    for (const char *name : {"zrembyscore", "zrembyrank", "smove", "task", "*", ""})
        EXPECT_EQ(find_event(name), nullptr) << name;
}

TEST(KeyspaceEvents, HashFieldExpiryIsOnFlagHSince74) {
    for (const char *name : {"hexpire", "hexpired", "hpersist"}) {
        const EventSpec *e = find_event(name);
        ASSERT_NE(e, nullptr) << name;
        EXPECT_EQ(e->flag, 'h') << name;
        EXPECT_EQ(e->since, "7.4") << name;
    }
}

TEST(KeyspaceEvents, StarIsTheDocumentedEight) {
    EXPECT_EQ(star_events(), (std::vector<std::string>{"expired", "evicted", "del", "set", "expire",
                                                       "persist", "rename_from", "rename_to"}));
}

TEST(KeyspaceEvents, FlagsFollowTheTableOnceEachAndNameTheUnknown) {
    std::vector<std::string> unknown;
    EXPECT_EQ(notify_flags_for({"rename_from", "sortstore", "del", "expired", "zremrangebyscore",
                                "future-event", "evicted"},
                               &unknown),
              "Exeglz");
    EXPECT_EQ(unknown, std::vector<std::string>{"future-event"});
    EXPECT_EQ(notify_flags_for({}, nullptr), "E");
}

TEST(KeyspaceEvents, MissingFlagsCountAAsTheClassFlags) {
    EXPECT_EQ(missing_notify_flags("AE", "Exgz"), "");
    EXPECT_EQ(missing_notify_flags("Ex", "Exgz"), "gz");
    EXPECT_EQ(missing_notify_flags("AE", "EKn"), "Kn");
    EXPECT_EQ(missing_notify_flags("", "Egg"), "Eg");
}

}  // namespace
}  // namespace keywatch
