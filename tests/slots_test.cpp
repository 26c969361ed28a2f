// Cluster slots (CRC16/XMODEM with the spec's test vectors, hash tags, the slot -> tag
// table) and the parsing of queue keys. Pure functions: no Redis.
#include <gtest/gtest.h>

#include <set>

#include "core/queue/queue_keys.h"
#include "core/redis/slots.h"

namespace {

using namespace keywatch;

TEST(Crc16, MatchesTheClusterSpecTestVector) {
    EXPECT_EQ(crc16("123456789"), 0x31C3);
    EXPECT_EQ(key_slot("123456789"), 12739);
}

TEST(KeySlot, MatchesRedisForPlainAndTaggedKeys) {
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("{user1000}.following"), 3443);
    EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("{user1000}.following"));
}

TEST(HashTag, EmptyTagHashesTheWholeKeyAndOnlyTheFirstBraceCounts) {
    EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");
    EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
    EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
    EXPECT_EQ(hash_tag("no-braces"), "no-braces");
    EXPECT_EQ(hash_tag("open{only"), "open{only");
}

TEST(KeySlot, IsBinarySafe) {
    std::string key("a\0b", 3);
    EXPECT_EQ(key_slot(key), crc16(key) & 16383);
    EXPECT_NE(key_slot(key), key_slot("a"));
}

TEST(SlotTags, EverySlotHasAShortTagThatHashesToIt) {
    const SlotTags &tags = SlotTags::instance();
    std::set<std::string> distinct;
    for (int slot = 0; slot < kSlotCount; slot++) {
        const std::string &t = tags.tag(slot);
        ASSERT_FALSE(t.empty()) << slot;
        EXPECT_LE(t.size(), 4u);
        EXPECT_EQ(key_slot("kw:keys:{" + t + "}:due"), slot);
        distinct.insert(t);
    }
    EXPECT_EQ(distinct.size(), static_cast<size_t>(kSlotCount));
}

TEST(SlotTags, TheQueueOfAKeyLivesInTheKeysSlot) {
    const SlotTags &tags = SlotTags::instance();
    for (std::string key : {"session:alice", "order:42", "{user1000}.following", "x"}) {
        QueueKeys q = QueueKeys::make("kw", "keys", tags.tag_for_key(key));
        EXPECT_EQ(key_slot(q.due), key_slot(key)) << key;
        EXPECT_EQ(key_slot(q.dead), key_slot(key)) << key;
    }
}

TEST(SlotTags, IsTheSameTableEveryTime) {
    SlotTags a, b;
    for (int slot = 0; slot < kSlotCount; slot += 97) EXPECT_EQ(a.tag(slot), b.tag(slot));
}

TEST(ParseQueueKey, ReadsQueueAndTagAndRefusesOtherKeys) {
    std::string queue, tag;
    EXPECT_TRUE(parse_due_key("kw", "kw:keys:{1bz}:due", &queue, &tag));
    EXPECT_EQ(queue, "keys");
    EXPECT_EQ(tag, "1bz");
    EXPECT_TRUE(parse_queue_key("kw", "kw:emails:{0}:dead", "dead", &queue, &tag));
    EXPECT_EQ(queue, "emails");
    EXPECT_FALSE(parse_due_key("kw", "kw:keys:{1bz}:data", &queue, &tag));
    EXPECT_FALSE(parse_due_key("kw", "other:keys:{1bz}:due", &queue, &tag));
    EXPECT_FALSE(parse_due_key("kw", "kw::{1bz}:due", &queue, &tag));
    EXPECT_FALSE(parse_due_key("kw", "kw:keys:{}:due", &queue, &tag));
    EXPECT_FALSE(parse_due_key("kw", "kwx:keys:{1}:due", &queue, &tag));
}

TEST(QueueKeyGlob, MatchesTheQueueKeysOfEverySlot) {
    EXPECT_EQ(queue_key_glob("kw", "*", "due"), "kw:*:{*}:due");
    EXPECT_EQ(queue_key_glob("kw", "mail", "dead"), "kw:mail:{*}:dead");
    std::string queue, tag;
    EXPECT_TRUE(parse_due_key("kw", QueueKeys::due_key("kw", "mail", "1bz"), &queue, &tag));
}

TEST(DedupeKey, LivesInTheEventKeysSlot) {
    const std::string key = "order:{7}:x";
    const std::string &tag = SlotTags::instance().tag_for_key(key);
    const std::string d = dedupe_key("kw", tag, 3, "expired", key);
    EXPECT_EQ(d, "kw:dedupe:{" + tag + "}:3:expired:" + key);
    EXPECT_EQ(key_slot(d), key_slot(key));
}

}  // namespace
