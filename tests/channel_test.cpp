// parse_channel: keyevent/keyspace channels are parsed binary-safely: the db digits, then
// "__:", then every remaining byte.
#include <gtest/gtest.h>

#include <string>

#include "core/redis/channel.h"

namespace keywatch {
namespace {

using namespace std::string_literals;

std::string keyspace(int db, const std::string &key) {
    return "__keyspace@" + std::to_string(db) + "__:" + key;
}

// The result's rest is a view into channel: keep channel alive while using it (the
// deleted overload refuses temporaries).
ParsedChannel parse_ok(const std::string &channel) {
    ParsedChannel p{};
    EXPECT_TRUE(parse_channel(channel, &p)) << "channel: " << channel;
    return p;
}
ParsedChannel parse_ok(std::string &&) = delete;

TEST(ParseChannel, KeyeventGivesDbAndEventName) {
    const std::string first = "__keyevent@0__:expired";
    ParsedChannel p = parse_ok(first);
    EXPECT_EQ(p.kind, ChannelKind::Keyevent);
    EXPECT_EQ(p.db, 0);
    EXPECT_EQ(p.rest, "expired");

    const std::string second = "__keyevent@15__:rename_to";
    p = parse_ok(second);
    EXPECT_EQ(p.kind, ChannelKind::Keyevent);
    EXPECT_EQ(p.db, 15);
    EXPECT_EQ(p.rest, "rename_to");
}

TEST(ParseChannel, KeyspaceGivesDbAndWholeKey) {
    const std::string channel = keyspace(3, "user:42");
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.kind, ChannelKind::Keyspace);
    EXPECT_EQ(p.db, 3);
    EXPECT_EQ(p.rest, "user:42");
}

TEST(ParseChannel, KeyWithColonsAndSeparatorLookalikesIsTakenWhole) {
    const std::string key = "a:b:c::__:x__:y:";
    const std::string channel = keyspace(0, key);
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.rest, key);
}

TEST(ParseChannel, KeyWithSpacesAndNewlinesIsTakenWhole) {
    const std::string key = " leading and trailing \r\n second line\n\t";
    const std::string channel = keyspace(1, key);
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.db, 1);
    EXPECT_EQ(p.rest, key);
}

TEST(ParseChannel, KeyWithNulBytesKeepsItsLength) {
    const std::string key = "\0a\0\0b\0"s;
    ASSERT_EQ(key.size(), 6u);
    const std::string channel = keyspace(2, key);
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.rest.size(), key.size());
    EXPECT_EQ(std::string(p.rest), key);
}

TEST(ParseChannel, NulByteInsideThePrefixIsRefused) {
    ParsedChannel p{};
    EXPECT_FALSE(parse_channel("__keyspace@0\0__:k"s, &p));
    EXPECT_FALSE(parse_channel("__key\0space@0__:k"s, &p));
}

TEST(ParseChannel, Utf8KeyIsTakenByteForByte) {
    const std::string key = "ключ:日本語:🔑";
    const std::string channel = keyspace(0, key);
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.rest, key);
}

TEST(ParseChannel, EmptyKeyIsValid) {
    // Redis allows the empty string as a key.
    const std::string channel = keyspace(0, "");
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.kind, ChannelKind::Keyspace);
    EXPECT_TRUE(p.rest.empty());
}

TEST(ParseChannel, HalfMegabyteKeyWithEveryByteValueIsTakenWhole) {
    std::string key(512 * 1024, '\0');
    for (size_t i = 0; i < key.size(); i++) key[i] = static_cast<char>(i * 131 % 256);
    const std::string channel = keyspace(9, key);
    ParsedChannel p = parse_ok(channel);
    EXPECT_EQ(p.db, 9);
    ASSERT_EQ(p.rest.size(), key.size());
    EXPECT_TRUE(p.rest == key);
    // The remainder is a view into the channel, not a copy.
    EXPECT_EQ(p.rest.data(), channel.data() + channel.size() - key.size());
}

TEST(ParseChannel, MultiDigitDbIsParsed) {
    const std::string three = "__keyevent@123__:del", padded = "__keyevent@007__:del";
    EXPECT_EQ(parse_ok(three).db, 123);
    EXPECT_EQ(parse_ok(padded).db, 7);
}

TEST(ParseChannel, LargestIntDbIsAcceptedAndOneMoreIsRefused) {
    // The header promises any non-negative decimal number that fits an int.
    ParsedChannel p{};
    ASSERT_TRUE(parse_channel("__keyevent@2147483647__:expired", &p));
    EXPECT_EQ(p.db, 2147483647);
    EXPECT_FALSE(parse_channel("__keyevent@2147483648__:expired", &p));
}

TEST(ParseChannel, RefusesChannelWithoutDbDigits) {
    ParsedChannel p{};
    EXPECT_FALSE(parse_channel("__keyevent@__:expired", &p));
    EXPECT_FALSE(parse_channel("__keyspace@__:key", &p));
    EXPECT_FALSE(parse_channel("__keyevent@x__:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@-1__:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@+1__:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@ 1__:expired", &p));
}

TEST(ParseChannel, RefusesChannelWithoutSeparator) {
    ParsedChannel p{};
    EXPECT_FALSE(parse_channel("__keyevent@0", &p));
    EXPECT_FALSE(parse_channel("__keyevent@0__", &p));
    EXPECT_FALSE(parse_channel("__keyevent@0_:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@0:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@0__expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@1a__:expired", &p));
}

TEST(ParseChannel, RefusesHugeDb) {
    ParsedChannel p{};
    EXPECT_FALSE(parse_channel("__keyevent@99999999999__:expired", &p));
    EXPECT_FALSE(parse_channel("__keyevent@" + std::string(400, '9') + "__:expired", &p));
}

TEST(ParseChannel, RefusesOtherChannels) {
    ParsedChannel p{};
    EXPECT_FALSE(parse_channel("", &p));
    EXPECT_FALSE(parse_channel("__keyevent", &p));
    EXPECT_FALSE(parse_channel("__keyevent@", &p));
    EXPECT_FALSE(parse_channel("__keyevents@0__:expired", &p));
    EXPECT_FALSE(parse_channel("__KEYEVENT@0__:expired", &p));
    EXPECT_FALSE(parse_channel("news:sports", &p));
    EXPECT_FALSE(parse_channel("x__keyevent@0__:expired", &p));
}

TEST(KeyeventPattern, NamesEveryDbAndTheEvent) {
    EXPECT_EQ(keyevent_pattern("expired"), "__keyevent@*__:expired");
    EXPECT_EQ(keyevent_pattern("rename_from"), "__keyevent@*__:rename_from");
    EXPECT_EQ(keyevent_pattern("set", 0), "__keyevent@0__:set");
    EXPECT_EQ(keyevent_pattern("expire", 15), "__keyevent@15__:expire");
}

// The tracked db's keyevents name one channel each (SUBSCRIBEd to); every db's, or a glob
// of keys, are patterns (PSUBSCRIBEd to).
TEST(KeyeventPattern, OneDbsEventNamesOneChannel) {
    EXPECT_TRUE(names_one_channel(keyevent_pattern("del", 0)));
    EXPECT_FALSE(names_one_channel(keyevent_pattern("del")));
    EXPECT_FALSE(names_one_channel(keyspace_pattern(0, "kw:*:{*}:due")));
    EXPECT_FALSE(names_one_channel(keyevent_pattern("a?b", 0)));
    EXPECT_FALSE(names_one_channel(keyevent_pattern("[ab]", 0)));
    EXPECT_FALSE(names_one_channel(keyevent_pattern("a\\b", 0)));
}

TEST(KeyeventPattern, ChannelsItMatchesParseBackToTheEvent) {
    for (const char *event : {"expired", "evicted", "del", "set"}) {
        std::string pattern = keyevent_pattern(event);
        std::string channel = pattern;
        channel.replace(channel.find('*'), 1, "4");
        ParsedChannel p = parse_ok(channel);
        EXPECT_EQ(p.kind, ChannelKind::Keyevent);
        EXPECT_EQ(p.db, 4);
        EXPECT_EQ(p.rest, event);
    }
}

}  // namespace
TEST(KeyspacePattern, NamesTheDbAndTheGlob) {
    EXPECT_EQ(keyspace_pattern(0, "kw:*:{*}:due"), "__keyspace@0__:kw:*:{*}:due");
    EXPECT_EQ(keyspace_pattern(12, "a"), "__keyspace@12__:a");
}

}  // namespace keywatch
