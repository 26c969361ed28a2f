// The event table's adoption column (core/redis/keyspace_events.h) against what a real
// redis-server publishes: for each command that gives, moves, keeps or removes a key's TTL,
// the events it publishes in order, the TTL it leaves, and what adoption does with each event.
// Guards the table (and so what the engine subscribes to and sends to `adopt`) against a
// Redis upgrade.
#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "core/redis/keyspace_events.h"
#include "redis_fixture.h"

namespace kwtest {
namespace {

using keywatch::AdoptUse;

struct ReplyFree {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Reply run(redisContext *c, const std::vector<std::string> &args) {
    std::vector<const char *> v;
    std::vector<size_t> l;
    for (const auto &a : args) {
        v.push_back(a.data());
        l.push_back(a.size());
    }
    return Reply(static_cast<redisReply *>(
        redisCommandArgv(c, static_cast<int>(v.size()), v.data(), l.data())));
}

// One published event: "<name>@<db> <key>", and what the table says adoption does with it.
struct Heard {
    std::string text;
    AdoptUse use;
    bool operator==(const Heard &o) const { return text == o.text && use == o.use; }
};

std::ostream &operator<<(std::ostream &os, const Heard &h) {
    return os << h.text << " (" << static_cast<int>(h.use) << ")";
}

// What the table must say for each event name this test meets.
Heard heard(const std::string &name, int db, const std::string &key) {
    const keywatch::EventSpec *e = keywatch::find_event(name);
    return {name + "@" + std::to_string(db) + " " + key, e ? e->adopt : AdoptUse::None};
}

Heard want(const std::string &name, const std::string &key, AdoptUse use, int db = 0) {
    return {name + "@" + std::to_string(db) + " " + key, use};
}

class AdoptionEvents : public RedisTest {
  protected:
    keywatch::RedisProcess::Options options() override {
        keywatch::RedisProcess::Options o;
        o.extra = {"--enable-debug-command", "local"};
        return o;
    }
    void SetUp() override {
        RedisTest::SetUp();
        cmd_ = redisConnect(redis().host().c_str(), redis().port());
        sub_ = redisConnect(redis().host().c_str(), redis().port());
        ASSERT_TRUE(cmd_ && !cmd_->err && sub_ && !sub_->err);
        // Only what a command publishes: no active expiry racing the markers.
        ASSERT_EQ(std::string(run(cmd_, {"DEBUG", "SET-ACTIVE-EXPIRE", "0"})->str), "OK");
        Reply p(run(sub_, {"PSUBSCRIBE", "__keyevent@*__:*"}));
        Reply s(run(sub_, {"SUBSCRIBE", "marker"}));
        ASSERT_TRUE(p && s);
    }
    void TearDown() override {
        if (cmd_) redisFree(cmd_);
        if (sub_) redisFree(sub_);
        RedisTest::TearDown();
    }

    // The events published up to now, in order (a PUBLISH marks the end).
    std::vector<Heard> drain() {
        Reply(run(cmd_, {"PUBLISH", "marker", "m"}));
        std::vector<Heard> out;
        for (;;) {
            void *raw = nullptr;
            if (redisGetReply(sub_, &raw) != REDIS_OK) {
                ADD_FAILURE() << "subscriber: " << sub_->errstr;
                return out;
            }
            Reply r(static_cast<redisReply *>(raw));
            std::string kind(r->element[0]->str, r->element[0]->len);
            if (kind == "message") return out;
            std::string channel(r->element[2]->str, r->element[2]->len);
            std::string key(r->element[3]->str, r->element[3]->len);
            size_t at = channel.find('@'), end = channel.find("__:");
            out.push_back(heard(channel.substr(end + 3),
                                std::stoi(channel.substr(at + 1, end - at - 1)), key));
        }
    }

    // Runs setup, then cmd; returns what cmd alone published.
    std::vector<Heard> after(const std::vector<std::vector<std::string>> &setup,
                             const std::vector<std::string> &cmd) {
        Reply(run(cmd_, {"FLUSHALL"}));
        for (const auto &s : setup) {
            Reply r = run(cmd_, s);
            EXPECT_TRUE(r && r->type != REDIS_REPLY_ERROR) << s[0] << ": " << (r ? r->str : "");
        }
        drain();
        Reply r = run(cmd_, cmd);
        EXPECT_TRUE(r && r->type != REDIS_REPLY_ERROR) << cmd[0] << ": " << (r ? r->str : "");
        return drain();
    }

    // PTTL of key in db 0: > 0 is returned as 1.
    long long ttl(const std::string &key) {
        long long t = run(cmd_, {"PTTL", key})->integer;
        return t > 0 ? 1 : t;
    }

    std::string dump(const std::string &value) {
        Reply(run(cmd_, {"SET", "dump:src", value}));
        Reply d = run(cmd_, {"DUMP", "dump:src"});
        return std::string(d->str, d->len);
    }

    redisContext *cmd_ = nullptr;
    redisContext *sub_ = nullptr;
};

using V = std::vector<Heard>;
constexpr AdoptUse kAdopt = AdoptUse::Adopt, kForget = AdoptUse::Forget,
                   kSnapshot = AdoptUse::Snapshot, kNone = AdoptUse::None;

TEST_F(AdoptionEvents, AdoptionEventsAreWhatRedisPublishes) {
    const std::vector<std::string> volatile_k = {"SET", "k", "v", "EX", "100"};
    const std::vector<std::string> plain_k = {"SET", "k", "v"};
    const V set_expire = {want("set", "k", kAdopt), want("expire", "k", kAdopt)};

    // A TTL given: set is always followed by expire (set alone cannot say).
    EXPECT_EQ(after({}, {"SET", "k", "v", "EX", "100"}), set_expire);
    EXPECT_EQ(after({}, {"SET", "k", "v", "PXAT", "99999999999999"}), set_expire);
    EXPECT_EQ(after({}, {"SETEX", "k", "100", "v"}), set_expire);
    EXPECT_EQ(after({}, {"PSETEX", "k", "100000", "v"}), set_expire);
    EXPECT_EQ(ttl("k"), 1);
    EXPECT_EQ(after({plain_k}, {"GETEX", "k", "EX", "100"}), V{want("expire", "k", kAdopt)});
    EXPECT_EQ(after({plain_k}, {"EXPIRE", "k", "100"}), V{want("expire", "k", kAdopt)});
    EXPECT_EQ(after({plain_k}, {"PEXPIREAT", "k", "99999999999999"}),
              V{want("expire", "k", kAdopt)});
    EXPECT_EQ(after({volatile_k}, {"EXPIRE", "k", "50", "LT"}), V{want("expire", "k", kAdopt)});
    EXPECT_EQ(after({volatile_k}, {"EXPIRE", "k", "50", "NX"}), V{});
    EXPECT_EQ(after({volatile_k}, {"EXPIRE", "k", "50", "GT"}), V{});
    EXPECT_EQ(ttl("k"), 1);
    EXPECT_EQ(after({}, {"EVAL", "return redis.call('SET', KEYS[1], 'v', 'EX', 100)", "1", "k"}),
              set_expire);

    // A TTL removed or kept by a write: set alone.
    EXPECT_EQ(after({volatile_k}, {"SET", "k", "v2"}), V{want("set", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), -1);
    EXPECT_EQ(after({volatile_k}, {"MSET", "k", "v2"}), V{want("set", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), -1);
    EXPECT_EQ(after({volatile_k}, {"GETSET", "k", "v2"}), V{want("set", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), -1);
    EXPECT_EQ(after({volatile_k}, {"SET", "k", "v2", "KEEPTTL"}), V{want("set", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), 1);
    EXPECT_EQ(after({}, {"SETNX", "k", "v"}), V{want("set", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), -1);
    EXPECT_EQ(after({volatile_k}, {"PERSIST", "k"}), V{want("persist", "k", kAdopt)});
    EXPECT_EQ(after({plain_k}, {"PERSIST", "k"}), V{});
    EXPECT_EQ(after({volatile_k}, {"GETEX", "k", "PERSIST"}), V{want("persist", "k", kAdopt)});
    EXPECT_EQ(ttl("k"), -1);
    EXPECT_EQ(after({plain_k}, {"GETEX", "k", "PERSIST"}), V{});

    // A TTL in the past: SET publishes set and expire (the key expires later); EXPIRE
    // publishes del (Valkey 8.1: expired).
    EXPECT_EQ(after({}, {"SET", "k", "v", "EXAT", "1"}), set_expire);
    EXPECT_EQ(ttl("k"), -2);
    EXPECT_EQ(drain(), V{want("expired", "k", AdoptUse::Claim)});
    for (auto cmd : {std::vector<std::string>{"EXPIRE", "k", "0"},
                     std::vector<std::string>{"EXPIREAT", "k", "1"}}) {
        V got = after({volatile_k}, cmd);
        EXPECT_TRUE(got == V{want("del", "k", kForget)} ||
                    got == V{want("expired", "k", AdoptUse::Claim)})
            << cmd[0] << ": " << ::testing::PrintToString(got);
        EXPECT_EQ(ttl("k"), -2);
    }
    EXPECT_EQ(after({volatile_k}, {"GETDEL", "k"}), V{want("del", "k", kForget)});
    EXPECT_EQ(after({volatile_k}, {"UNLINK", "k"}), V{want("del", "k", kForget)});

    // The TTL moves with the key: the source is forgotten, the destination adopted.
    const std::vector<std::string> volatile_a = {"SET", "a", "v", "EX", "100"};
    const V renamed = {want("rename_from", "a", kForget), want("rename_to", "b", kAdopt)};
    EXPECT_EQ(after({volatile_a}, {"RENAME", "a", "b"}), renamed);
    EXPECT_EQ(ttl("b"), 1);
    EXPECT_EQ(after({volatile_a}, {"RENAMENX", "a", "b"}), renamed);
    EXPECT_EQ(after({{"SET", "a", "v"}, {"SET", "b", "v", "EX", "100"}}, {"RENAME", "a", "b"}),
              renamed)
        << "no del for the old b";
    EXPECT_EQ(ttl("b"), -1);
    EXPECT_EQ(after({volatile_a}, {"COPY", "a", "d"}), V{want("copy_to", "d", kAdopt)});
    EXPECT_EQ(ttl("d"), 1);
    EXPECT_EQ(after({volatile_a, {"SET", "d", "v", "EX", "50"}}, {"COPY", "a", "d", "REPLACE"}),
              V{want("copy_to", "d", kAdopt)});
    const std::string blob = dump("v");
    EXPECT_EQ(after({}, {"RESTORE", "r", "100000", blob}), V{want("restore", "r", kAdopt)});
    EXPECT_EQ(ttl("r"), 1);
    EXPECT_EQ(after({{"SET", "r", "v", "EX", "100"}}, {"RESTORE", "r", "0", blob, "REPLACE"}),
              V{want("restore", "r", kAdopt)});
    EXPECT_EQ(ttl("r"), -1);
    EXPECT_EQ(after({volatile_k}, {"MOVE", "k", "1"}),
              (V{want("move_from", "k", kForget), want("move_to", "k", kAdopt, 1)}));

    // The value changes and the TTL stays: only a snapshot rule cares.
    EXPECT_EQ(after({volatile_k}, {"SETRANGE", "k", "0", "x"}),
              V{want("setrange", "k", kSnapshot)});
    EXPECT_EQ(after({{"SET", "k", "1", "EX", "100"}}, {"INCR", "k"}),
              V{want("incrby", "k", kSnapshot)});
    EXPECT_EQ(after({volatile_k}, {"APPEND", "k", "x"}), V{want("append", "k", kSnapshot)});
    EXPECT_EQ(ttl("k"), 1);

    // A TTL removed by a store: the store event only, not an adoption event (the claim's key
    // check untracks it at the old deadline).
    EXPECT_EQ(after({{"SADD", "s", "a"}, {"SADD", "u", "b"}, {"EXPIRE", "u", "100"}},
                    {"SUNIONSTORE", "u", "s"}),
              V{want("sunionstore", "u", kNone)});
    EXPECT_EQ(ttl("u"), -1);

    // Whole databases: nothing per key.
    EXPECT_EQ(after({volatile_k, volatile_a}, {"FLUSHDB"}), V{});
    EXPECT_EQ(after({volatile_k}, {"SWAPDB", "0", "1"}), V{});
}

TEST(AdoptionEventList, IsTheTablesAdoptForgetAndClaimEvents) {
    EXPECT_EQ(keywatch::adopt_events(false),
              (std::vector<std::string>{"expired", "evicted", "del", "set", "expire", "persist",
                                        "rename_from", "rename_to", "move_from", "move_to",
                                        "copy_to", "restore"}));
    std::vector<std::string> snap = keywatch::adopt_events(true);
    EXPECT_EQ(snap.size(), 17u);
    EXPECT_EQ(snap.back(), "setbit");
    EXPECT_EQ(keywatch::notify_flags_for(keywatch::adopt_events(false), nullptr), "Exeg$");
}

}  // namespace
}  // namespace kwtest
