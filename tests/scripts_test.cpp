// The queue scripts (core/queue/scripts.cpp) called directly on a real redis-server: what a claim
// takes and reports, and who may ack. The engine-level tests (queue_test.cpp) cover the same
// paths end to end; these pin the rules the sweeper relies on.
#include <hiredis/hiredis.h>

#include <map>
#include <set>
#include <thread>
#include <memory>

#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/base/time_limit.h"
#include "redis_fixture.h"

namespace kwtest {
namespace {

using keywatch::QueueKeys;
using keywatch::Script;
namespace scripts = keywatch::scripts;

struct ReplyFree {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// A claimed item as claim_due returns it.
struct Item {
    std::string id;
    int64_t deadline, attempt;
    std::string source;
};

struct Claim {
    int64_t now, next_due, untracked, moved, next_lease, inflight;
    std::vector<Item> items;
};

class ScriptTest : public RedisTest {
  protected:
    void SetUp() override {
        RedisTest::SetUp();
        ctx_ = redisConnect(redis().host().c_str(), redis().port());
        ASSERT_TRUE(ctx_ && !ctx_->err);
        c_ = client();
    }
    void TearDown() override {
        if (ctx_) redisFree(ctx_);
        RedisTest::TearDown();
    }

    Reply eval(const Script &s, const QueueKeys &k, const std::vector<std::string> &argv) {
        std::vector<std::string> args = {"EVAL",     s.body, "5",    k.due,
                                         k.inflight, k.data, k.dead, k.done};
        args.insert(args.end(), argv.begin(), argv.end());
        std::vector<const char *> v;
        std::vector<size_t> l;
        for (auto &a : args) {
            v.push_back(a.data());
            l.push_back(a.size());
        }
        Reply r(static_cast<redisReply *>(
            redisCommandArgv(ctx_, static_cast<int>(v.size()), v.data(), l.data())));
        EXPECT_TRUE(r) << ctx_->errstr;
        if (r && r->type == REDIS_REPLY_ERROR) ADD_FAILURE() << s.name << ": " << r->str;
        return r;
    }

    Claim claim(const QueueKeys &k, const std::string &owner, int limit, bool is_keys = false,
                const std::string &prune = "0") {
        Reply r = eval(scripts::kClaimDue, k,
                       {std::to_string(limit), "30000", owner, is_keys ? "1" : "0", prune});
        Claim c{};
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 7) {
            ADD_FAILURE() << "claim_due: unexpected reply";
            return c;
        }
        c.now = r->element[0]->integer;
        c.next_due = r->element[1]->integer;
        c.untracked = r->element[2]->integer;
        c.moved = r->element[3]->integer;
        c.next_lease = r->element[5]->integer;
        c.inflight = r->element[6]->integer;
        const redisReply *out = r->element[4];
        for (size_t i = 0; i + keywatch::kClaimedFields <= out->elements;
             i += keywatch::kClaimedFields)
            c.items.push_back({std::string(out->element[i]->str, out->element[i]->len),
                               out->element[i + 1]->integer, out->element[i + 2]->integer,
                               std::string(out->element[i + 4]->str, out->element[i + 4]->len)});
        return c;
    }

    int64_t ack(const QueueKeys &k, const std::string &owner, std::vector<std::string> ids,
                bool is_keys = false) {
        ids.insert(ids.begin(), {owner, is_keys ? "1" : "0"});
        Reply r = eval(scripts::kAck, k, ids);
        return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    }

    int64_t redis_now() {
        std::string t = c_->command({"TIME"});
        size_t nl = t.find('\n');
        return std::stoll(t.substr(0, nl)) * 1000 + std::stoll(t.substr(nl + 1)) / 1000;
    }

    redisContext *ctx_ = nullptr;
    std::unique_ptr<RedisClient> c_;
    QueueKeys tasks_ = QueueKeys::make("kw", "jobs", "0");
    QueueKeys keys_ = QueueKeys::make("kw", "keys", "0");
};

TEST_F(ScriptTest, ClaimTakesWhatIsDueAndReportsTheNextDeadlineAndLease) {
    int64_t now = redis_now();
    std::string later = std::to_string(now + 60000);
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a", std::to_string(now - 50), "b",
                 later, "c"});
    Claim c = claim(tasks_, "A", 10);
    ASSERT_EQ(c.items.size(), 2u);
    EXPECT_EQ(c.items[0].id, "a");
    EXPECT_EQ(c.items[0].deadline, now - 100);
    EXPECT_EQ(c.items[0].attempt, 1);
    EXPECT_EQ(c.items[0].source, "S");
    EXPECT_EQ(c.items[1].id, "b");
    EXPECT_EQ(c.next_due, now + 60000) << "the next deadline is c's";
    EXPECT_EQ(c.next_lease, c.now + 30000) << "the leases just given";
    EXPECT_EQ(c.inflight, 2);

    // A limit smaller than what is due: the next deadline is the first one left behind.
    c_->command({"ZADD", tasks_.due, std::to_string(now - 20), "d", std::to_string(now - 10), "e"});
    c = claim(tasks_, "B", 1);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "d");
    EXPECT_EQ(c.next_due, now - 10) << "e is due too: the caller must sweep again";
    EXPECT_EQ(c.inflight, 3) << "a and b (owner A) and d (owner B)";

    // Nothing due: nothing taken, the next deadline and the earliest lease reported.
    c = claim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 1u) << "e";
    c = claim(tasks_, "B", 10);
    EXPECT_TRUE(c.items.empty());
    EXPECT_EQ(c.next_due, now + 60000);
    EXPECT_GT(c.next_lease, now);
    EXPECT_EQ(c.inflight, 4);
}

TEST_F(ScriptTest, ALeaseThatRanOutIsTakenByTheNextClaimerWithTheAttemptCounted) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a"});
    ASSERT_EQ(claim(tasks_, "A", 10).items.size(), 1u);
    // A's lease runs out (as if A hung).
    c_->command({"ZADD", tasks_.inflight, "XX", "1", "a"});
    Claim c = claim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "a");
    EXPECT_EQ(c.items[0].source, "L");
    EXPECT_EQ(c.items[0].attempt, 2);
    EXPECT_EQ(c.items[0].deadline, now - 100) << "the first deadline is kept";
    EXPECT_EQ(c.next_lease, c.now + 30000);
    EXPECT_EQ(c.inflight, 1);
    EXPECT_EQ(ack(tasks_, "A", {"a"}), 0) << "A no longer holds a";
    EXPECT_EQ(ack(tasks_, "B", {"a"}), 1);
}

TEST_F(ScriptTest, AFailWithADelayIsDueThenAndTheNextClaimCarriesTheLastError) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "r", std::to_string(now - 5), "s"});
    ASSERT_EQ(claim(tasks_, "A", 10).items.size(), 2u);
    // r asks for its own delay; s (no tenth argument: data and callers of before) backs off.
    Reply f =
        eval(scripts::kFail, tasks_, {"A", "0", "r", "boom", "0", "5", "50", "50", "0", "250000"});
    ASSERT_TRUE(f && f->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(f->integer, 1);
    int64_t due = std::stoll(c_->command({"ZSCORE", tasks_.due, "r"}));
    EXPECT_GE(due, now + 250000) << "the delay asked for, not retry.base/max (50ms)";
    EXPECT_LE(due, redis_now() + 250000);
    f = eval(scripts::kFail, tasks_, {"A", "0", "s", "", "0", "5", "50", "50", "0"});
    ASSERT_TRUE(f && f->type == REDIS_REPLY_INTEGER);
    EXPECT_LE(std::stoll(c_->command({"ZSCORE", tasks_.due, "s"})), redis_now() + 50);
    c_->command({"ZADD", tasks_.due, "XX", std::to_string(now - 10), "r"});
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    Reply r = eval(scripts::kClaimDue, tasks_, {"10", "30000", "B", "0", "0"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 7);
    ASSERT_EQ(r->element[4]->elements, 2 * keywatch::kClaimedFields);
    std::map<std::string, keywatch::ClaimedItem> items;
    for (size_t i = 0; i < 2; i++) {
        keywatch::ClaimedItem item;
        ASSERT_TRUE(keywatch::parse_claimed(r->element[4], i, &item));
        items[item.id] = item;
    }
    EXPECT_EQ(items["r"].attempt, 2);
    EXPECT_EQ(items["r"].last_error, "boom");
    EXPECT_EQ(items["s"].attempt, 2);
    EXPECT_EQ(items["s"].last_error, "") << "an empty error reads as none";
}

TEST_F(ScriptTest, AnAckCountsOnlyItemsItsOwnerStillHolds) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 30), "a", std::to_string(now - 20), "b",
                 std::to_string(now - 10), "c"});
    ASSERT_EQ(claim(tasks_, "A", 10).items.size(), 3u);
    // a goes back to due for a retry; b's lease runs out and B takes it.
    Reply f =
        eval(scripts::kFail, tasks_, {"A", "0", "a", "boom", "0", "5", "60000", "60000", "0"});
    ASSERT_TRUE(f && f->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(f->integer, 1) << "retry";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "1:" + std::to_string(now - 30) + ":")
        << "a waiting for its retry is nobody's";
    c_->command({"ZADD", tasks_.inflight, "XX", "1", "b"});
    ASSERT_EQ(claim(tasks_, "B", 10).items.size(), 1u);

    EXPECT_EQ(ack(tasks_, "A", {"a", "b", "c"}), 1) << "only c is still A's";
    EXPECT_EQ(ack(tasks_, "A", {"c"}), 0) << "acked once";
    Reply renew = eval(scripts::kRenew, tasks_, {"A", "30000", "a", "b"});
    ASSERT_TRUE(renew && renew->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(renew->integer, 0) << "A renews nothing it does not hold";
    EXPECT_EQ(ack(tasks_, "B", {"b"}), 1);
    EXPECT_GE(std::stoll(c_->command({"ZSCORE", tasks_.due, "a"})), now + 30000)
        << "a stays due for its retry (backoff 60 s, jitter 0: half of it)";
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "0");
}

TEST_F(ScriptTest, ATrackedKeyFiresOnlyWhenItIsGone) {
    int64_t now = redis_now();
    std::string due = std::to_string(now - 10);
    // gone: never written (or expired); later: its TTL was moved; forever: its TTL removed.
    c_->command({"SET", "later", "v", "PXAT", std::to_string(now + 5000)});
    c_->command({"SET", "forever", "v"});
    c_->command({"ZADD", keys_.due, due, "gone", due, "later", due, "forever"});
    Claim c = claim(keys_, "A", 10, true);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "gone");
    EXPECT_EQ(c.moved, 1);
    EXPECT_EQ(c.untracked, 1);
    EXPECT_EQ(c.next_due, now + 5000) << "later's new deadline";
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "later"}), std::to_string(now + 5000));
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "forever"}), "(nil)");

    // All gone: all fire.
    c_->command({"ZADD", keys_.due, due, "x", due, "y"});
    c = claim(keys_, "A", 10, true);
    EXPECT_EQ(c.items.size(), 2u);
    EXPECT_EQ(c.next_due, now + 5000);
    EXPECT_EQ(ack(keys_, "A", {"gone", "x", "y"}, true), 3);
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "3") << "handled keys are remembered";
}

// claim_live of `expired` events (mode 'x'): an item past its deadline fires without a key
// lookup; one whose score is still in the future is looked at. Gone: its TTL was shortened
// outside keywatch, so it fires now, with now as its deadline. Alive again: tracked again
// (or written again) since it expired, so a TTL keeps or moves its schedule and no TTL
// untracks it. A retry waiting for its backoff keeps its time.
TEST_F(ScriptTest, ClaimLiveOfAnExpiredKeyWithALaterScoreFiresOnlyIfTheKeyIsGone) {
    int64_t now = redis_now();
    std::string hour = std::to_string(now + 3600 * 1000), later = std::to_string(now + 7200 * 1000);
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "due", hour, "shortened", hour,
                 "tracked-again", hour, "written-again", hour, "persisted", hour, "retrying"});
    c_->command({"HSET", keys_.data, "p:shortened", hour + "|snap", "m:retrying", "1:123:"});
    c_->command({"SET", "tracked-again", "v", "PXAT", hour});
    c_->command({"SET", "written-again", "v", "PXAT", later});
    c_->command({"SET", "persisted", "v"});
    Reply r = eval(scripts::kClaimLive, keys_,
                   {"30000", "A", "x", "due", "shortened", "tracked-again", "written-again",
                    "persisted", "retrying"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    int64_t at = r->element[0]->integer;
    std::string answers;
    for (size_t i = 0; i < r->element[1]->elements; i++)
        answers += std::string(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
    EXPECT_EQ(answers, "CCRRUR");
    const redisReply *out = r->element[2];
    ASSERT_EQ(out->elements, 2 * keywatch::kClaimedFields);
    keywatch::ClaimedItem item;
    ASSERT_TRUE(keywatch::parse_claimed(out, 0, &item));
    EXPECT_EQ(item.id, "due");
    EXPECT_EQ(item.deadline_ms, now - 10) << "the usual case is as before";
    ASSERT_TRUE(keywatch::parse_claimed(out, 1, &item));
    EXPECT_EQ(item.id, "shortened");
    EXPECT_EQ(item.deadline_ms, at) << "a key that is gone is due now";
    EXPECT_EQ(item.attempt, 1);
    EXPECT_EQ(item.source, 'N');
    EXPECT_TRUE(item.has_payload);
    EXPECT_EQ(item.payload, "snap") << "its snapshot comes along";
    EXPECT_EQ(c_->command({"HGET", keys_.data, "m:shortened"}), "1:" + std::to_string(at) + ":A")
        << "redeliveries keep the deadline (and the event id)";
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "shortened"}), "(nil)");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "tracked-again"}), hour);
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "written-again"}), later);
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "persisted"}), "(nil)");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "retrying"}), hour);
    EXPECT_EQ(c_->command({"ZCARD", keys_.inflight}), "2");
}

// The scripts refuse (and write nothing for) a deadline after kMaxTimeMs on Redis's clock,
// whatever a client checked before.
TEST_F(ScriptTest, ADeadlineAfterTheMaximumIsRefusedAndNothingIsWritten) {
    const std::string past_max = std::to_string(scripts::kPastMax);
    const std::string over = std::to_string(keywatch::kMaxTimeMs + 1);
    EXPECT_EQ(c_->command({"EVAL", scripts::kTrack.body, "3", keys_.due, "k", keys_.data, "v", over,
                           "", "1"}),
              past_max);
    // The two-argument form (no NX/XX, no snapshot) refuses the same.
    EXPECT_EQ(c_->command({"EVAL", scripts::kTrack.body, "2", keys_.due, "k", "v", over}),
              past_max);
    EXPECT_EQ(c_->command({"EVAL", scripts::kSchedule.body, "5", tasks_.due, tasks_.inflight,
                           tasks_.data, tasks_.dead, tasks_.done, "x", "p", over, "0", ""}),
              past_max);
    EXPECT_EQ(
        c_->command({"EVAL", scripts::kSchedule.body, "5", tasks_.due, tasks_.inflight, tasks_.data,
                     tasks_.dead, tasks_.done, "x", "p", "0", "9223372036854775807", ""}),
        past_max);
    EXPECT_EQ(c_->command({"DBSIZE"}), "0") << "nothing written";
    c_->command({"ZADD", tasks_.due, "1000", "y"});
    EXPECT_EQ(c_->command({"EVAL", scripts::kReschedule.body, "5", tasks_.due, tasks_.inflight,
                           tasks_.data, tasks_.dead, tasks_.done, "y", over, "0"}),
              past_max);
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.due, "y"}), "1000");
    c_->command({"SET", "far", "v", "PXAT", over});
    EXPECT_EQ(c_->command(
                  {"EVAL", scripts::kAdopt.body, "3", keys_.due, keys_.data, "far", "0", "1", "1"}),
              past_max);
    EXPECT_EQ(c_->command({"EXISTS", keys_.due}), "0");
    // The maximum itself is accepted.
    EXPECT_EQ(c_->command({"EVAL", scripts::kTrack.body, "3", keys_.due, "k", keys_.data, "v",
                           std::to_string(keywatch::kMaxTimeMs), "", "0"}),
              std::to_string(keywatch::kMaxTimeMs));
    EXPECT_EQ(c_->command({"EVAL", scripts::kTrack.body, "2", keys_.due, "k2", "v",
                           std::to_string(keywatch::kMaxTimeMs)}),
              std::to_string(keywatch::kMaxTimeMs));
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "k2"}), std::to_string(keywatch::kMaxTimeMs));
    EXPECT_EQ(c_->command({"PEXPIRETIME", "k2"}), std::to_string(keywatch::kMaxTimeMs));
}

TEST_F(ScriptTest, TheDoneRecordIsPrunedOnlyWhenTheCallerAsks) {
    c_->command({"ZADD", keys_.done, "1", "old"});
    claim(keys_, "A", 10, true, "0");
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "1");
    claim(keys_, "A", 10, true, "10000");
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "0");
}

// Lua 5.1 writes numbers with "%.14g": a deadline of 1e14 ms (year 5138) or later, which
// keywatch accepts, must still go into records with every digit.
TEST_F(ScriptTest, ASnapshotRestampedForAnExpiryAfterYear5138KeepsEveryDigit) {
    int64_t now = redis_now();
    const std::string old = std::to_string(now - 10), late = "123456789012345";
    c_->command({"ZADD", keys_.due, old, "k"});
    c_->command({"HSET", keys_.data, "p:k", old + "|v"});
    c_->command({"SET", "k", "v", "PXAT", late});  // its TTL moved outside keywatch
    Claim c = claim(keys_, "A", 10, true);
    EXPECT_TRUE(c.items.empty());
    EXPECT_EQ(c.moved, 1);
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "k"}), late);
    EXPECT_EQ(c_->command({"HGET", keys_.data, "p:k"}), late + "|v")
        << "the snapshot is stamped with the new deadline, exactly";
}

TEST_F(ScriptTest, ASnapshotAdoptedForAnExpiryAfterYear5138KeepsEveryDigit) {
    const std::string late = "123456789012345";
    c_->command({"SET", "k", "v", "PXAT", late});
    EXPECT_EQ(
        c_->command({"EVAL", scripts::kAdopt.body, "3", keys_.due, keys_.data, "k", "1", "1", "1"}),
        late);
    EXPECT_EQ(c_->command({"HGET", keys_.data, "p:k"}), late + "|v")
        << "the snapshot is stamped with the key's deadline, exactly";
}

TEST_F(ScriptTest, DeadlinesAfterYear5138KeepExactEventIdsAcrossRetries) {
    // A claim made while Redis's clock read past year 5138 (forced: the record as a claim
    // then writes it).
    const std::string late = "123456789012345";
    c_->command({"ZADD", tasks_.inflight, std::to_string(redis_now() + 30000), "a"});
    c_->command({"HSET", tasks_.data, "m:a", "1:" + late + ":A"});
    Reply f = eval(scripts::kFail, tasks_, {"A", "0", "a", "boom", "0", "5", "50", "50", "0"});
    ASSERT_TRUE(f && f->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(f->integer, 1) << "retry";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "1:" + late + ":");
    c_->command({"ZADD", tasks_.due, "XX", "1", "a"});
    Claim c = claim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].attempt, 2);
    EXPECT_EQ(std::to_string(c.items[0].deadline), late) << "the same event id";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "2:" + late + ":B");
}

TEST_F(ScriptTest, EachClaimedItemCarriesItsOwnDeadlineAcrossRunsAndTheLimit) {
    int64_t now = redis_now();
    // Runs of equal deadlines (a burst) and single ones, interleaved; claims larger than the
    // 32 items read with their scores.
    std::vector<std::pair<std::string, int64_t>> want;
    for (int i = 0; i < 120; i++) {
        int64_t d = now - 1000 + (i < 40 ? 0 : i < 60 ? i : i < 100 ? 100 : i);
        std::string id = "i" + std::to_string(100 + i);
        c_->command({"ZADD", tasks_.due, std::to_string(d), id});
        want.push_back({id, d});
    }
    std::map<std::string, int64_t> got;
    for (int limit : {50, 45, 7, 100}) {
        Claim c = claim(tasks_, "A", limit);
        for (auto &item : c.items) got[item.id] = item.deadline;
        if (limit == 50) {
            ASSERT_EQ(c.items.size(), 50u);
            EXPECT_EQ(c.next_due, now - 1000 + 50) << "the first one the limit left behind";
        }
    }
    ASSERT_EQ(got.size(), want.size());
    for (auto &w : want) EXPECT_EQ(got[w.first], w.second) << w.first;
}

TEST_F(ScriptTest, AnAckDropsThePayloadUnlessTheIdIsDueAgain) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a", std::to_string(now - 10), "b",
                 std::to_string(now - 10), "c"});
    c_->command({"HSET", tasks_.data, "p:a", "pa", "p:b", "pb"});
    ASSERT_EQ(claim(tasks_, "A", 10).items.size(), 3u);
    c_->command({"ZADD", tasks_.due, std::to_string(now + 60000), "b"});  // scheduled again
    c_->command({"HSET", tasks_.data, "p:b", "pb2"});
    EXPECT_EQ(ack(tasks_, "A", {"a", "b", "c"}), 3);
    EXPECT_EQ(c_->command({"HEXISTS", tasks_.data, "p:a"}), "0");
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "p:b"}), "pb2") << "b's next run keeps its payload";
    EXPECT_EQ(c_->command({"HEXISTS", tasks_.data, "m:c"}), "0");
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "0");
}

// ---- The batch layout's scripts (scripts::batch) -------------------------------------------
// The behaviours above, against the batch layout: the same names and the same assertions on
// behaviour; the internal records they force or read are the batch layout's (a lease runs
// out by `ZADD leases XX 1 <member>`, not `ZADD inflight XX 1 <id>`). Then what the layout
// adds: version-1 data read and reclaimed, batch acks, and the rules of lease members.

// One batch a claim opened, as the engine keeps it.
struct Batch {
    std::string owner;
    uint64_t seq = 0;
    int64_t b = -1;
    std::string member() const {
        return owner + ":" + std::to_string(seq) + ":" + std::to_string(b);
    }
};

struct BatchClaim {
    int64_t now = 0, next_due = 0, next_lease = 0, live = 0, untracked = 0, moved = 0;
    Batch batch;
    std::vector<Item> items;  // the due part (source S), then the reclaimed (source L)
    std::map<std::string, std::string> errors, payloads;
    std::vector<std::string> stale;
};

class BatchScriptTest : public ScriptTest {
  protected:
    Reply evalk(const Script &s, const std::vector<std::string> &keys,
                const std::vector<std::string> &argv) {
        std::vector<std::string> args = {"EVAL", s.body, std::to_string(keys.size())};
        args.insert(args.end(), keys.begin(), keys.end());
        args.insert(args.end(), argv.begin(), argv.end());
        std::vector<const char *> v;
        std::vector<size_t> l;
        for (auto &a : args) {
            v.push_back(a.data());
            l.push_back(a.size());
        }
        Reply r(static_cast<redisReply *>(
            redisCommandArgv(ctx_, static_cast<int>(v.size()), v.data(), l.data())));
        EXPECT_TRUE(r) << ctx_->errstr;
        if (r && r->type == REDIS_REPLY_ERROR) ADD_FAILURE() << s.name << ": " << r->str;
        return r;
    }
    static std::string str(const redisReply *r) {
        return r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
    }

    // claim_due for `owner`, its next batch; the stale members of the last claim declared.
    BatchClaim bclaim(const QueueKeys &k, const std::string &owner, int limit, bool is_keys = false,
                      const std::string &prune = "0", const std::vector<std::string> &stale = {}) {
        uint64_t seq = ++seqs_[owner];
        std::vector<std::string> keys = {k.due,  k.inflight, k.leases,           k.data,
                                         k.done, k.seq,      k.batch(owner, seq)};
        std::vector<std::string> argv = {
            std::to_string(limit), "30000", owner, std::to_string(seq),
            is_keys ? "1" : "0",   prune,   "L",   std::to_string(stale.size())};
        for (auto &m : stale) {
            keys.push_back(
                k.batch(m.substr(0, m.find(':')),
                        std::stoull(m.substr(m.find(':') + 1, m.rfind(':') - m.find(':') - 1))));
            argv.push_back(m);
        }
        Reply r = evalk(keywatch::scripts::batch::kClaimDue, keys, argv);
        BatchClaim c;
        keywatch::ClaimReply parsed;
        std::string err;
        if (!r || !keywatch::parse_claim_reply(r.get(), &parsed, &err)) {
            ADD_FAILURE() << "claim_due: " << err;
            return c;
        }
        c.now = parsed.now;
        c.next_due = parsed.next_due;
        c.next_lease = parsed.next_lease;
        c.live = parsed.live;
        c.batch = {owner, seq, parsed.b};
        c.untracked = parsed.untracked;
        c.moved = parsed.moved;
        c.stale = parsed.stale;
        for (auto &it : parsed.items) {
            c.items.push_back({it.id, it.deadline_ms, it.attempt, std::string(1, it.source)});
            if (!it.last_error.empty() || it.attempt > 1) c.errors[it.id] = it.last_error;
            if (it.has_payload) c.payloads[it.id] = it.payload;
        }
        return c;
    }

    // A claim that declares what the previous one named stale (the engine's two steps).
    BatchClaim bclaim2(const QueueKeys &k, const std::string &owner, int limit,
                       bool is_keys = false) {
        BatchClaim c = bclaim(k, owner, limit, is_keys);
        if (c.stale.empty()) return c;
        BatchClaim d = bclaim(k, owner, limit, is_keys, "0", c.stale);
        d.items.insert(d.items.begin(), c.items.begin(), c.items.end());
        return d;
    }

    // ack of one batch: '*' (ids empty) or the ids.
    int64_t back(const QueueKeys &k, const Batch &bt, const std::vector<std::string> &ids,
                 bool is_keys = false, bool all = false) {
        std::vector<std::string> argv = {bt.owner, is_keys ? "1" : "0", std::to_string(bt.seq),
                                         std::to_string(bt.b), all ? "*" : "i"};
        if (!all) {
            argv.push_back(std::to_string(ids.size()));
            argv.insert(argv.end(), ids.begin(), ids.end());
        }
        Reply r =
            evalk(keywatch::scripts::batch::kAck,
                  {k.due, k.inflight, k.leases, k.data, k.done, k.batch(bt.owner, bt.seq)}, argv);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1) return -99;
        return r->element[0]->integer;
    }

    int64_t bfail(const QueueKeys &k, const Batch &bt, const std::string &id,
                  const std::string &err, const std::vector<std::string> &rest,
                  bool is_keys = false) {
        std::vector<std::string> argv = {
            bt.owner, std::to_string(bt.seq), std::to_string(bt.b), is_keys ? "1" : "0", id, err};
        argv.insert(argv.end(), rest.begin(), rest.end());
        Reply r = evalk(
            keywatch::scripts::batch::kFail,
            {k.due, k.inflight, k.leases, k.data, k.dead, k.done, k.batch(bt.owner, bt.seq)}, argv);
        return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    }

    std::vector<int64_t> brenew(const QueueKeys &k, const std::vector<std::string> &members) {
        std::vector<std::string> argv = {"30000"};
        argv.insert(argv.end(), members.begin(), members.end());
        Reply r = evalk(keywatch::scripts::batch::kRenew, {k.leases}, argv);
        std::vector<int64_t> out;
        if (r && r->type == REDIS_REPLY_ARRAY)
            for (size_t i = 0; i < r->elements; i++) out.push_back(r->element[i]->integer);
        return out;
    }

    // The batch's lease runs out (as if its owner hung).
    void expire(const QueueKeys &k, const Batch &bt) {
        c_->command({"ZADD", k.leases, "XX", "1", bt.member()});
    }

    std::map<std::string, uint64_t> seqs_;
};

TEST_F(BatchScriptTest, ClaimTakesWhatIsDueAndReportsTheNextDeadlineAndLease) {
    int64_t now = redis_now();
    std::string later = std::to_string(now + 60000);
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a", std::to_string(now - 50), "b",
                 later, "c"});
    BatchClaim c = bclaim(tasks_, "A", 10);
    ASSERT_EQ(c.items.size(), 2u);
    EXPECT_EQ(c.items[0].id, "a");
    EXPECT_EQ(c.items[0].deadline, now - 100);
    EXPECT_EQ(c.items[0].attempt, 1);
    EXPECT_EQ(c.items[0].source, "S");
    EXPECT_EQ(c.items[1].id, "b");
    EXPECT_EQ(c.next_due, now + 60000) << "the next deadline is c's";
    EXPECT_EQ(c.next_lease, c.now + 30000) << "the leases just given";
    EXPECT_EQ(c.live, 1) << "one batch in flight";

    c_->command({"ZADD", tasks_.due, std::to_string(now - 20), "d", std::to_string(now - 10), "e"});
    c = bclaim(tasks_, "B", 1);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "d");
    EXPECT_EQ(c.next_due, now - 10) << "e is due too: the caller must sweep again";
    EXPECT_EQ(c.live, 2) << "A's batch (a, b) and B's (d)";

    c = bclaim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 1u) << "e";
    c = bclaim(tasks_, "B", 10);
    EXPECT_TRUE(c.items.empty());
    EXPECT_EQ(c.batch.b, -1) << "no batch for nothing";
    EXPECT_EQ(c.next_due, now + 60000);
    EXPECT_GT(c.next_lease, now);
    EXPECT_EQ(c.live, 3);
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "4") << "every item in flight is seen there";
}

TEST_F(BatchScriptTest, ALeaseThatRanOutIsTakenByTheNextClaimerWithTheAttemptCounted) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a"});
    BatchClaim first = bclaim(tasks_, "A", 10);
    ASSERT_EQ(first.items.size(), 1u);
    expire(tasks_, first.batch);
    BatchClaim c = bclaim(tasks_, "B", 10);
    EXPECT_TRUE(c.items.empty()) << "the batch key is not declared yet";
    ASSERT_EQ(c.stale, std::vector<std::string>{first.batch.member()});
    c = bclaim(tasks_, "B", 10, false, "0", c.stale);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "a");
    EXPECT_EQ(c.items[0].source, "L");
    EXPECT_EQ(c.items[0].attempt, 2);
    EXPECT_EQ(c.items[0].deadline, now - 100) << "the first deadline is kept";
    EXPECT_EQ(c.next_lease, c.now + 30000);
    EXPECT_EQ(c.live, 1) << "A's batch is gone with its last item";
    EXPECT_EQ(back(tasks_, first.batch, {"a"}), 0) << "A no longer holds a";
    EXPECT_EQ(back(tasks_, c.batch, {"a"}), 1);
}

TEST_F(BatchScriptTest, AFailWithADelayIsDueThenAndTheNextClaimCarriesTheLastError) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "r", std::to_string(now - 5), "s"});
    BatchClaim a = bclaim(tasks_, "A", 10);
    ASSERT_EQ(a.items.size(), 2u);
    EXPECT_EQ(bfail(tasks_, a.batch, "r", "boom", {"0", "5", "50", "50", "0", "250000"}), 1);
    int64_t due = std::stoll(c_->command({"ZSCORE", tasks_.due, "r"}));
    EXPECT_GE(due, now + 250000) << "the delay asked for, not retry.base/max (50ms)";
    EXPECT_LE(due, redis_now() + 250000);
    EXPECT_EQ(bfail(tasks_, a.batch, "s", "", {"0", "5", "50", "50", "0"}), 1);
    EXPECT_LE(std::stoll(c_->command({"ZSCORE", tasks_.due, "s"})), redis_now() + 50);
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.leases, a.batch.member()}), "(nil)")
        << "an empty batch leaves no lease behind";
    c_->command({"ZADD", tasks_.due, "XX", std::to_string(now - 10), "r"});
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    BatchClaim c = bclaim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 2u);
    std::map<std::string, Item> items;
    for (auto &it : c.items) items[it.id] = it;
    EXPECT_EQ(items["r"].attempt, 2);
    EXPECT_EQ(items["r"].deadline, now - 10) << "the first deadline, not the retry time";
    EXPECT_EQ(c.errors["r"], "boom");
    EXPECT_EQ(items["s"].attempt, 2);
    EXPECT_EQ(items["s"].deadline, now - 5);
    EXPECT_EQ(c.errors["s"], "") << "an empty error reads as none";
}

TEST_F(BatchScriptTest, AnAckCountsOnlyItemsItsOwnerStillHolds) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 30), "a", std::to_string(now - 20), "b",
                 std::to_string(now - 10), "c"});
    BatchClaim a = bclaim(tasks_, "A", 2);
    BatchClaim a2 = bclaim(tasks_, "A", 2);
    ASSERT_EQ(a.items.size(), 2u) << "a, b";
    ASSERT_EQ(a2.items.size(), 1u) << "c";
    EXPECT_EQ(bfail(tasks_, a.batch, "a", "boom", {"0", "5", "60000", "60000", "0"}), 1) << "retry";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "1:" + std::to_string(now - 30) + ":")
        << "a waiting for its retry is nobody's";
    // A's first batch (b) runs out and B takes it.
    expire(tasks_, a.batch);
    BatchClaim b = bclaim2(tasks_, "B", 10);
    ASSERT_EQ(b.items.size(), 1u);
    EXPECT_EQ(b.items[0].id, "b");

    EXPECT_EQ(back(tasks_, a.batch, {"a", "b", "c"}), 0) << "that batch is no longer A's";
    EXPECT_EQ(back(tasks_, a2.batch, {"a", "b", "c"}), 1) << "only c is still A's";
    EXPECT_EQ(back(tasks_, a2.batch, {"c"}), 0) << "acked once";
    EXPECT_EQ(brenew(tasks_, {a.batch.member(), a2.batch.member()}), (std::vector<int64_t>{0, 0}))
        << "A renews nothing it does not hold";
    EXPECT_EQ(back(tasks_, b.batch, {"b"}), 1);
    EXPECT_GE(std::stoll(c_->command({"ZSCORE", tasks_.due, "a"})), now + 30000)
        << "a stays due for its retry (backoff 60 s, jitter 0: half of it)";
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "0");
    EXPECT_EQ(c_->command({"ZCARD", tasks_.leases}), "0");
}

TEST_F(BatchScriptTest, ATrackedKeyFiresOnlyWhenItIsGone) {
    int64_t now = redis_now();
    std::string due = std::to_string(now - 10);
    c_->command({"SET", "later", "v", "PXAT", std::to_string(now + 5000)});
    c_->command({"SET", "forever", "v"});
    c_->command({"ZADD", keys_.due, due, "gone", due, "later", due, "forever"});
    BatchClaim c = bclaim(keys_, "A", 10, true);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "gone");
    EXPECT_EQ(c.moved, 1);
    EXPECT_EQ(c.untracked, 1);
    EXPECT_EQ(c.next_due, now + 5000) << "later's new deadline";
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "later"}), std::to_string(now + 5000));
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "forever"}), "(nil)");

    c_->command({"ZADD", keys_.due, due, "x", due, "y"});
    BatchClaim d = bclaim(keys_, "A", 10, true);
    EXPECT_EQ(d.items.size(), 2u);
    EXPECT_EQ(d.next_due, now + 5000);
    EXPECT_EQ(back(keys_, c.batch, {"gone"}, true), 1);
    EXPECT_EQ(back(keys_, d.batch, {}, true, true), 2);
    // Handled keys are remembered: one acked by itself in done, a batch acked whole in
    // inflight under its done marker.
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "1");
    EXPECT_EQ(c_->command({"ZCARD", keys_.inflight}), "2");
    EXPECT_EQ(c_->command({"ZRANGE", keys_.leases, "0", "-1"}), "d:" + std::to_string(d.batch.b));
}

TEST_F(BatchScriptTest, AClaimOfTrackedKeysNobodyElseHearsIsAloneAndItsItemsStillCountAsTaken) {
    // No second subscriber on the engines channel: the claim writes no inflight entry and
    // no batch number, its ack no done record. A live claim sent after it by the same
    // engine (its notification came before the claim's answer) declares its batch key and
    // answers "taken", not "untracked".
    const std::string channel = "__keywatch:heartbeat:engines:kw";
    int64_t now = redis_now();
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "k1", std::to_string(now - 5), "k2"});
    Reply r = evalk(keywatch::scripts::batch::kClaimDue,
                    {keys_.due, keys_.inflight, keys_.leases, keys_.data, keys_.done, keys_.seq,
                     keys_.batch("A", 1)},
                    {"10", "30000", "A", "1", "1", "0", "L", "0", channel});
    keywatch::ClaimReply c;
    std::string err;
    ASSERT_TRUE(r && keywatch::parse_claim_reply(r.get(), &c, &err)) << err;
    EXPECT_EQ(c.items.size(), 2u);
    EXPECT_EQ(c.b, -1) << "alone";
    EXPECT_EQ(c.listeners, 0);
    EXPECT_EQ(c_->command({"EXISTS", keys_.inflight, keys_.seq}), "0");
    EXPECT_EQ(c_->command({"ZRANGE", keys_.leases, "0", "-1"}), "A:1:-1");
    // claim_live's answers for `ids`, the batch keys of claims on their way declared first.
    auto live_answers = [&](const std::vector<std::string> &pending,
                            const std::vector<std::string> &ids) {
        std::vector<std::string> keys = {keys_.due,  keys_.inflight, keys_.leases,       keys_.data,
                                         keys_.done, keys_.seq,      keys_.batch("B", 9)};
        keys.insert(keys.end(), pending.begin(), pending.end());
        keys.insert(keys.end(), ids.begin(), ids.end());
        Reply l = evalk(keywatch::scripts::batch::kClaimLive, keys,
                        {"30000", "B", "9", "x", "", "", std::to_string(pending.size())});
        std::string out;
        if (!l || l->type != REDIS_REPLY_ARRAY || l->elements < 2) return std::string("?");
        for (size_t i = 0; i < l->element[1]->elements; i++) out += str(l->element[1]->element[i]);
        return out;
    };
    EXPECT_EQ(live_answers({keys_.batch("A", 1)}, {"k1", "other"}), "TU");
    EXPECT_EQ(live_answers({}, {"k1"}), "U") << "what the pending key says";
    EXPECT_EQ(back(keys_, {"A", 1, -1}, {"k1"}, true), 1);
    EXPECT_EQ(back(keys_, {"A", 1, -1}, {}, true, true), 1);
    EXPECT_EQ(c_->command({"EXISTS", keys_.done, keys_.leases, keys_.batch("A", 1)}), "0")
        << "no done record, no marker";
}

TEST_F(BatchScriptTest, AClaimIsAloneOnlyWhileItsOwnSubscriberIsTheOneListener) {
    // One subscriber on the engines channel, but not the caller's: its own channel (its
    // heartbeat channel) has none, as while its subscriber reconnects and another engine
    // listens. The claim must be shared (the other engine may hear what it takes); with its
    // own channel subscribed too, it is alone.
    const std::string channel = "__keywatch:heartbeat:engines:kw";
    const std::string own = "__keywatch:heartbeat:2:00000000000000aa";
    auto other = client();
    other->command({"SUBSCRIBE", channel});
    int64_t now = redis_now();
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "k1", std::to_string(now - 5), "k2"});
    auto claim_due = [&](uint64_t seq, const std::string &id) {
        c_->command({"ZADD", keys_.due, std::to_string(now - 10), id});
        Reply r = evalk(keywatch::scripts::batch::kClaimDue,
                        {keys_.due, keys_.inflight, keys_.leases, keys_.data, keys_.done, keys_.seq,
                         keys_.batch("A", seq)},
                        {"10", "30000", "A", std::to_string(seq), "1", "0", "", "0", channel, own});
        keywatch::ClaimReply c;
        std::string err;
        EXPECT_TRUE(r && keywatch::parse_claim_reply(r.get(), &c, &err)) << err;
        return c;
    };
    keywatch::ClaimReply c = claim_due(1, "k3");
    EXPECT_EQ(c.items.size(), 3u);
    EXPECT_EQ(c.listeners, 1);
    EXPECT_GE(c.b, 0) << "the one listener is another engine: shared";
    auto live_b = [&](uint64_t seq, const std::string &id) -> int64_t {
        c_->command({"ZADD", keys_.due, std::to_string(now - 10), id});
        Reply l = evalk(keywatch::scripts::batch::kClaimLive,
                        {keys_.due, keys_.inflight, keys_.leases, keys_.data, keys_.done, keys_.seq,
                         keys_.batch("A", seq), id},
                        {"30000", "A", std::to_string(seq), "x", channel, "", "0", own});
        if (!l || l->type != REDIS_REPLY_ARRAY || l->elements < 4) return -99;
        return l->element[3]->integer;
    };
    EXPECT_GE(live_b(2, "k4"), 0) << "live claim: shared too";
    // The caller's subscriber is back: it is the one listener (the other one left).
    other.reset();
    auto mine = client();
    mine->command({"SUBSCRIBE", channel});
    auto mine_own = client();
    mine_own->command({"SUBSCRIBE", own});
    ASSERT_TRUE(wait_until([&] {
        return c_->command({"PUBSUB", "NUMSUB", channel, own}) == channel + "\n1\n" + own + "\n1";
    })) << c_->command({"PUBSUB", "NUMSUB", channel, own});
    EXPECT_EQ(claim_due(3, "k5").b, -1) << "alone";
    EXPECT_EQ(live_b(4, "k6"), -1) << "alone";
}

TEST_F(BatchScriptTest, ClaimLiveOfAnExpiredKeyWithALaterScoreFiresOnlyIfTheKeyIsGone) {
    int64_t now = redis_now();
    std::string hour = std::to_string(now + 3600 * 1000), later = std::to_string(now + 7200 * 1000);
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "due", hour, "shortened", hour,
                 "tracked-again", hour, "written-again", hour, "persisted", hour, "retrying"});
    c_->command({"HSET", keys_.data, "p:shortened", hour + "|snap", "m:retrying", "1:123:"});
    c_->command({"SET", "tracked-again", "v", "PXAT", hour});
    c_->command({"SET", "written-again", "v", "PXAT", later});
    c_->command({"SET", "persisted", "v"});
    Reply r = evalk(keywatch::scripts::batch::kClaimLive,
                    {keys_.due, keys_.inflight, keys_.leases, keys_.data, keys_.done, keys_.seq,
                     keys_.batch("A", 1), "due", "shortened", "tracked-again", "written-again",
                     "persisted", "retrying"},
                    {"30000", "A", "1", "x"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    int64_t at = r->element[0]->integer;
    std::string answers;
    for (size_t i = 0; i < r->element[1]->elements; i++) answers += str(r->element[1]->element[i]);
    EXPECT_EQ(answers, "CCRRUR");
    const redisReply *out = r->element[2];
    ASSERT_EQ(out->elements, 10u);
    EXPECT_EQ(str(out->element[0]), "due");
    EXPECT_EQ(out->element[1]->integer, now - 10) << "the usual case is as before";
    EXPECT_EQ(str(out->element[5]), "shortened");
    EXPECT_EQ(out->element[6]->integer, at) << "a key that is gone is due now";
    EXPECT_EQ(out->element[7]->integer, 1);
    EXPECT_EQ(str(out->element[9]), "snap") << "its snapshot comes along";
    EXPECT_EQ(c_->command({"ZSCORE", keys_.batch("A", 1), "shortened"}), std::to_string(at))
        << "redeliveries keep the deadline (and the event id)";
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "shortened"}), "(nil)");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "tracked-again"}), hour);
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "written-again"}), later);
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "persisted"}), "(nil)");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "retrying"}), hour);
    EXPECT_EQ(c_->command({"ZCARD", keys_.inflight}), "2");
    EXPECT_EQ(c_->command({"ZCARD", keys_.leases}), "1");
}

TEST_F(BatchScriptTest, TheDoneRecordIsPrunedOnlyWhenTheCallerAsks) {
    c_->command({"ZADD", keys_.done, "1", "old"});
    c_->command({"ZADD", keys_.inflight, "4503599627370503", "old-batch-item"});
    c_->command({"ZADD", keys_.leases, "-1", "d:7"});
    bclaim(keys_, "A", 10, true, "0");
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "1");
    EXPECT_EQ(c_->command({"ZCARD", keys_.inflight}), "1");
    bclaim(keys_, "A", 10, true, "10000");
    EXPECT_EQ(c_->command({"ZCARD", keys_.done}), "0");
    EXPECT_EQ(c_->command({"ZCARD", keys_.inflight}), "0") << "a batch acked whole, pruned";
    EXPECT_EQ(c_->command({"ZCARD", keys_.leases}), "0");
}

TEST_F(BatchScriptTest, DeadlinesAfterYear5138KeepExactEventIdsAcrossRetries) {
    const std::string late = "123456789012345";
    // A batch claimed while Redis's clock read past year 5138 (forced).
    c_->command({"ZADD", tasks_.due, "1", "a"});
    BatchClaim a = bclaim(tasks_, "A", 10);
    ASSERT_EQ(a.items.size(), 1u);
    c_->command({"ZADD", tasks_.batch("A", a.batch.seq), "XX", late, "a"});
    EXPECT_EQ(bfail(tasks_, a.batch, "a", "boom", {"0", "5", "50", "50", "0"}), 1) << "retry";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "1:" + late + ":");
    c_->command({"ZADD", tasks_.due, "XX", "1", "a"});
    BatchClaim c = bclaim(tasks_, "B", 10);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].attempt, 2);
    EXPECT_EQ(std::to_string(c.items[0].deadline), late) << "the same event id";
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "2:" + late + ":");
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.batch("B", c.batch.seq), "a"}), late);
    // And a batch number past 2^52's float precision of Lua's "%.14g" stays exact.
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.inflight, "a"}),
              std::to_string(4503599627370496LL + c.batch.b));
}

TEST_F(BatchScriptTest, EachClaimedItemCarriesItsOwnDeadlineAcrossRunsAndTheLimit) {
    int64_t now = redis_now();
    std::vector<std::pair<std::string, int64_t>> want;
    for (int i = 0; i < 120; i++) {
        int64_t d = now - 1000 + (i < 40 ? 0 : i < 60 ? i : i < 100 ? 100 : i);
        std::string id = "i" + std::to_string(100 + i);
        c_->command({"ZADD", tasks_.due, std::to_string(d), id});
        want.push_back({id, d});
    }
    std::map<std::string, int64_t> got;
    for (int limit : {50, 45, 7, 100}) {
        BatchClaim c = bclaim(tasks_, "A", limit);
        for (auto &item : c.items) got[item.id] = item.deadline;
        if (limit == 50) {
            ASSERT_EQ(c.items.size(), 50u);
            EXPECT_EQ(c.next_due, now - 1000 + 50) << "the first one the limit left behind";
        }
        for (auto &item : c.items)
            EXPECT_EQ(c_->command({"ZSCORE", tasks_.batch("A", c.batch.seq), item.id}),
                      std::to_string(item.deadline));
    }
    ASSERT_EQ(got.size(), want.size());
    for (auto &w : want) EXPECT_EQ(got[w.first], w.second) << w.first;
}

TEST_F(BatchScriptTest, AnAckDropsThePayloadUnlessTheIdIsDueAgain) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a", std::to_string(now - 10), "b",
                 std::to_string(now - 10), "c"});
    c_->command({"HSET", tasks_.data, "p:a", "pa", "p:b", "pb"});
    BatchClaim c = bclaim(tasks_, "A", 10);
    ASSERT_EQ(c.items.size(), 3u);
    EXPECT_EQ(c.payloads["a"], "pa");
    c_->command({"ZADD", tasks_.due, std::to_string(now + 60000), "b"});  // scheduled again
    c_->command({"HSET", tasks_.data, "p:b", "pb2"});
    EXPECT_EQ(back(tasks_, c.batch, {}, false, true), 3) << "the whole batch";
    EXPECT_EQ(c_->command({"HEXISTS", tasks_.data, "p:a"}), "0");
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "p:b"}), "pb2") << "b's next run keeps its payload";
    EXPECT_EQ(c_->command({"HEXISTS", tasks_.data, "m:c"}), "0");
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "0");
}

// -- What the batch layout adds.

// The version-1 claim_due (scripts::kClaimDue, what engines of version 1 run) beside the new.
TEST_F(BatchScriptTest,
       V1InFlightItemsAreReclaimedAfterTheirLeaseWithTheAttemptCountedAndTheSameEventId) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a"});
    c_->command({"HSET", tasks_.data, "p:a", "pa"});
    ASSERT_EQ(claim(tasks_, "V1", 10).items.size(), 1u);
    BatchClaim c = bclaim(tasks_, "N", 10);
    EXPECT_TRUE(c.items.empty()) << "not before its lease";
    EXPECT_EQ(c.live, 1) << "a version-1 item in flight counts";
    c_->command({"ZADD", tasks_.inflight, "XX", "1", "a"});
    c = bclaim(tasks_, "N", 10);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].source, "L");
    EXPECT_EQ(c.items[0].attempt, 2);
    EXPECT_EQ(c.items[0].deadline, now - 100) << "the same event id";
    EXPECT_EQ(c.payloads["a"], "pa");
    EXPECT_EQ(ack(tasks_, "V1", {"a"}), 0) << "the version-1 owner's late ack is refused";
    EXPECT_EQ(back(tasks_, c.batch, {"a"}), 1);
    EXPECT_EQ(c_->command({"HLEN", tasks_.data}), "1") << "only '~' left";
}

TEST_F(BatchScriptTest, V1RetryRecordsKeepTheirDeadlineAndAttempt) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a"});
    c_->command({"HSET", tasks_.data, "m:a", "3:777:", "e:a", "v1 error"});
    BatchClaim c = bclaim(tasks_, "N", 10);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].attempt, 4);
    EXPECT_EQ(c.items[0].deadline, 777);
    EXPECT_EQ(c.errors["a"], "v1 error");
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:a"}), "4:777:") << "the version-1 format";
}

TEST_F(BatchScriptTest, V1DoneRecordsStillSuppressALateNotification) {
    c_->command({"ZADD", keys_.done, std::to_string(redis_now()), "k"});
    Reply r = evalk(keywatch::scripts::batch::kClaimLive,
                    {keys_.due, keys_.inflight, keys_.leases, keys_.data, keys_.done, keys_.seq,
                     keys_.batch("A", 1), "k"},
                    {"30000", "A", "1", "x"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    EXPECT_EQ(str(r->element[1]->element[0]), "D");
}

TEST_F(BatchScriptTest, AV1EngineNeverTakesOrAcksNewInFlightItems) {
    int64_t now = redis_now();
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "k", std::to_string(now - 10), "j"});
    BatchClaim c = bclaim(keys_, "N", 10, true);
    ASSERT_EQ(c.items.size(), 2u);
    Claim v1 = claim(keys_, "V1", 10, true);
    EXPECT_TRUE(v1.items.empty()) << "a batch's items never look like a run-out lease";
    EXPECT_EQ(ack(keys_, "V1", {"k"}, true), 0);
    EXPECT_EQ(ack(keys_, "N", {"k"}, true), 0) << "not even with the new owner's name";
    Reply f = eval(scripts::kFail, keys_, {"N", "1", "k", "e", "0", "5", "50", "50", "0"});
    ASSERT_TRUE(f && f->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(f->integer, 0);
    Reply live = eval(scripts::kClaimLive, keys_, {"30000", "V1", "x", "k"});
    ASSERT_TRUE(live && live->type == REDIS_REPLY_ARRAY);
    EXPECT_EQ(str(live->element[1]->element[0]), "T") << "held: suppressed, not untracked";
    // And once the batch is acked whole, its items still suppress a late notification.
    EXPECT_EQ(back(keys_, c.batch, {}, true, true), 2);
    live = eval(scripts::kClaimLive, keys_, {"30000", "V1", "x", "k"});
    ASSERT_TRUE(live && live->type == REDIS_REPLY_ARRAY);
    EXPECT_EQ(str(live->element[1]->element[0]), "T");
}

TEST_F(BatchScriptTest, ABatchAckAfterTheBatchWasReclaimedIsRefusedAndCountedLate) {
    int64_t now = redis_now();
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "k", std::to_string(now - 10), "j"});
    BatchClaim a = bclaim(keys_, "A", 10, true);
    ASSERT_EQ(a.items.size(), 2u);
    expire(keys_, a.batch);
    BatchClaim b = bclaim2(keys_, "B", 10, true);
    ASSERT_EQ(b.items.size(), 2u);
    EXPECT_EQ(back(keys_, a.batch, {}, true, true), 0) << "refused: the items are B's now";
    EXPECT_EQ(c_->command({"ZCARD", keys_.batch("B", b.batch.seq)}), "2");
    EXPECT_EQ(back(keys_, b.batch, {}, true, true), 2);
}

TEST_F(BatchScriptTest, AResentAckDoesNotAckALaterClaimOfTheSameIdBySameEngine) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a"});
    BatchClaim first = bclaim(tasks_, "A", 10);
    ASSERT_EQ(first.items.size(), 1u);
    EXPECT_EQ(back(tasks_, first.batch, {"a"}), 1);
    c_->command({"ZADD", tasks_.due, std::to_string(now - 5), "a"});  // scheduled again
    BatchClaim second = bclaim(tasks_, "A", 10);
    ASSERT_EQ(second.items.size(), 1u);
    EXPECT_EQ(back(tasks_, first.batch, {"a"}), 0) << "the first ack, resent";
    EXPECT_EQ(back(tasks_, first.batch, {}, false, true), 0);
    EXPECT_EQ(c_->command({"ZCARD", tasks_.batch("A", second.batch.seq)}), "1") << "still held";
    EXPECT_EQ(back(tasks_, second.batch, {"a"}), 1);
}

TEST_F(BatchScriptTest, OneHeldItemKeepsItsBatchLeasedWhileTheOthersAreAckedOneByOne) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a", std::to_string(now - 10), "b",
                 std::to_string(now - 10), "c"});
    BatchClaim a = bclaim(tasks_, "A", 10);
    ASSERT_EQ(a.items.size(), 3u);
    EXPECT_EQ(back(tasks_, a.batch, {"a"}), 1);
    EXPECT_EQ(back(tasks_, a.batch, {"b"}), 1);
    EXPECT_NE(c_->command({"ZSCORE", tasks_.leases, a.batch.member()}), "(nil)") << "c is held";
    EXPECT_EQ(brenew(tasks_, {a.batch.member()}), std::vector<int64_t>{1});
    BatchClaim b = bclaim2(tasks_, "B", 10);
    EXPECT_TRUE(b.items.empty()) << "renewed: nobody else takes c";
    EXPECT_EQ(back(tasks_, a.batch, {"c"}), 1);
    EXPECT_EQ(c_->command({"ZCARD", tasks_.leases}), "0") << "the last ack ends the batch";
    EXPECT_EQ(brenew(tasks_, {a.batch.member()}), std::vector<int64_t>{0});
}

TEST_F(BatchScriptTest, AReclaimLargerThanTheRoomIsTakenInParts) {
    int64_t now = redis_now();
    for (int i = 0; i < 5; i++)
        c_->command({"ZADD", tasks_.due, std::to_string(now - 10 + i), "i" + std::to_string(i)});
    BatchClaim a = bclaim(tasks_, "A", 10);
    ASSERT_EQ(a.items.size(), 5u);
    expire(tasks_, a.batch);
    BatchClaim b = bclaim2(tasks_, "B", 3);
    ASSERT_EQ(b.items.size(), 3u);
    EXPECT_EQ(c_->command({"ZCARD", tasks_.batch("A", a.batch.seq)}), "2") << "the rest stays A's";
    BatchClaim c = bclaim2(tasks_, "B", 3);
    ASSERT_EQ(c.items.size(), 2u);
    std::set<std::string> ids;
    for (auto &it : b.items) ids.insert(it.id);
    for (auto &it : c.items) ids.insert(it.id);
    EXPECT_EQ(ids.size(), 5u) << "each exactly once";
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.leases, a.batch.member()}), "(nil)");
}

// The look reads the first 17 lease members and the version-1 items up to one more than it
// takes; with more than that in flight it still counts every one and names the earliest
// lease left (here a run-out version-1 item the room left for the next claim).
TEST_F(BatchScriptTest, ALookPastWhatItReadsStillCountsEveryLiveBatchAndItem) {
    int64_t now = redis_now();
    for (int i = 0; i < 20; i++)
        c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "a" + std::to_string(i)});
    for (int i = 0; i < 20; i++) ASSERT_EQ(bclaim(tasks_, "A", 1).items.size(), 1u);
    for (int i = 0; i < 3; i++)
        c_->command({"ZADD", tasks_.inflight, std::to_string(now - 10), "out" + std::to_string(i)});
    for (int i = 0; i < 20; i++)
        c_->command(
            {"ZADD", tasks_.inflight, std::to_string(now + 60000), "held" + std::to_string(i)});
    c_->command({"ZADD", tasks_.due, std::to_string(now - 5), "z"});
    BatchClaim c = bclaim(tasks_, "B", 2);
    ASSERT_EQ(c.items.size(), 2u) << "two run-out version-1 items fill the room";
    EXPECT_EQ(c.items[0].source, "L");
    EXPECT_EQ(c.items[1].source, "L");
    EXPECT_EQ(c.live, 21 + 21) << "A's 20 batches and B's; 23 version-1 items less the 2 taken";
    EXPECT_EQ(c.next_lease, now - 10) << "the run-out version-1 item the room left";
    EXPECT_EQ(c.next_due, now - 5);
}

TEST_F(BatchScriptTest, ARunOutBatchWhoseKeyIsGoneLeavesLeasesAndHidesNoOtherBehindIt) {
    // 16 run-out batches whose keys are gone (evicted, deleted): the claim that declares
    // them drops their members, so the next look reaches the real batch behind them.
    int64_t now = redis_now();
    for (int i = 0; i < 16; i++) {
        c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "o" + std::to_string(i)});
        BatchClaim o = bclaim(tasks_, "A", 1);
        ASSERT_EQ(o.items.size(), 1u);
        c_->command({"DEL", tasks_.batch("A", o.batch.seq)});
        c_->command({"ZADD", tasks_.leases, "XX", "1", o.batch.member()});
    }
    c_->command({"ZADD", tasks_.due, std::to_string(now - 100), "real"});
    BatchClaim r = bclaim(tasks_, "A", 1);
    ASSERT_EQ(r.items.size(), 1u);
    c_->command({"ZADD", tasks_.leases, "XX", "2", r.batch.member()});  // ran out after them
    BatchClaim b = bclaim2(tasks_, "B", 10);
    EXPECT_TRUE(b.items.empty()) << "the 16 named and declared: nothing in them";
    EXPECT_EQ(c_->command({"ZCARD", tasks_.leases}), "1") << "their members are gone";
    b = bclaim2(tasks_, "B", 10);
    ASSERT_EQ(b.items.size(), 1u) << "the real batch behind them";
    EXPECT_EQ(b.items[0].id, "real");
    EXPECT_EQ(b.items[0].source, "L");
    EXPECT_EQ(c_->command({"ZRANGE", tasks_.leases, "0", "-1"}), b.batch.member());
}

TEST_F(BatchScriptTest, ClaimsWorkWhileMemoryIsFull) {
    // maxmemory reached under noeviction: Redis refuses a script's first DENYOOM write, so a
    // claim starts its writes with another one; what it takes is acked.
    int64_t now = redis_now();
    c_->command({"ZADD", keys_.due, std::to_string(now - 10), "a", std::to_string(now - 5), "b"});
    c_->command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    c_->command({"CONFIG", "SET", "maxmemory", "1"});
    BatchClaim c = bclaim(keys_, "A", 10, true);
    EXPECT_EQ(c.items.size(), 2u);
    EXPECT_EQ(back(keys_, c.batch, {}, true, true), 2);
    // A key that stays (its expiry moved) is written back first otherwise.
    c_->command({"CONFIG", "SET", "maxmemory", "0"});
    c_->command({"SET", "later", "v", "PXAT", std::to_string(now + 60000)});
    c_->command(
        {"ZADD", keys_.due, std::to_string(now - 2), "c", std::to_string(now - 1), "later"});
    c_->command({"CONFIG", "SET", "maxmemory", "1"});
    BatchClaim d = bclaim(keys_, "A", 10, true);
    EXPECT_EQ(d.items.size(), 1u);
    EXPECT_EQ(d.moved, 1);
    c_->command({"CONFIG", "SET", "maxmemory", "0"});
}

TEST_F(BatchScriptTest, AReleasedBatchIsDueAgainAtItsDeadlinesWithTheAttemptGivenBack) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a", std::to_string(now - 20), "b"});
    c_->command({"HSET", tasks_.data, "m:b", "2:55:"});
    BatchClaim a = bclaim(tasks_, "A", 10);
    ASSERT_EQ(a.items.size(), 2u);
    Reply r = evalk(
        keywatch::scripts::batch::kRelease,
        {tasks_.due, tasks_.inflight, tasks_.leases, tasks_.data, tasks_.batch("A", a.batch.seq)},
        {"A", std::to_string(a.batch.seq), std::to_string(a.batch.b), "*"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(r->integer, 2);
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.due, "a"}), std::to_string(now - 10));
    EXPECT_EQ(c_->command({"ZSCORE", tasks_.due, "b"}), "55");
    EXPECT_EQ(c_->command({"HGET", tasks_.data, "m:b"}), "2:55:") << "attempt 3 given back";
    EXPECT_EQ(c_->command({"ZCARD", tasks_.inflight}), "0");
    EXPECT_EQ(c_->command({"ZCARD", tasks_.leases}), "0");
}

TEST_F(BatchScriptTest, InspectCountsVersion1ItemsAndNamesTheLiveBatches) {
    int64_t now = redis_now();
    c_->command({"ZADD", tasks_.due, std::to_string(now - 10), "a", std::to_string(now - 10), "b"});
    BatchClaim a = bclaim(tasks_, "A", 10);
    c_->command({"ZADD", tasks_.inflight, std::to_string(now + 30000), "v1item"});
    Reply r = evalk(
        keywatch::scripts::batch::kInspect,
        {tasks_.due, tasks_.inflight, tasks_.data, tasks_.dead, tasks_.done, tasks_.leases}, {});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 7);
    EXPECT_EQ(r->element[5]->integer, 1) << "the version-1 item";
    ASSERT_EQ(r->element[6]->elements, 1u);
    EXPECT_EQ(str(r->element[6]->element[0]), a.batch.member());
}

TEST_F(BatchScriptTest, ClaimReplyParserRejectsWrongShapes) {
    keywatch::ClaimReply c;
    keywatch::LiveClaimReply l;
    std::string err;
    auto check = [&](const std::string &lua, bool ok) {
        Reply r(static_cast<redisReply *>(redisCommand(ctx_, "EVAL %s 0", lua.c_str())));
        ASSERT_TRUE(r);
        EXPECT_EQ(keywatch::parse_claim_reply(r.get(), &c, &err), ok) << lua << ": " << err;
    };
    // now next_due next_lease live b ids runs reclaimed extras stale untracked moved
    check("return {1,2,3,4,5,{'a','b'},{7,2},{},{},{},0,0}", true);
    EXPECT_EQ(c.items.size(), 2u);
    // next_due and the runs' deadlines as Redis's score text, as claim_due hands them on.
    check("return {1,'1700000000123',3,4,5,{'a','b'},{'1700000000007',2},{},{},{},0,0}", true);
    EXPECT_EQ(c.next_due, 1700000000123);
    ASSERT_EQ(c.items.size(), 2u);
    EXPECT_EQ(c.items[1].deadline_ms, 1700000000007);
    check("return {1,2,3,4,5,{'a'},{'7x',1},{},{},{},0,0}", false);   // a deadline not a number
    check("return {1,'',3,4,5,{'a'},{7,1},{},{},{},0,0}", false);     // next_due not a number
    check("return {1,2,3,4,5,{'a','b'},{7,1},{},{},{},0,0}", false);  // runs short of the ids
    check("return {1,2,3,4,5,{'a'},{7,2},{},{},{},0,0}", false);      // runs past the ids
    check("return {1,2,3,4,5,{'a'},{7,1},{},{2,2,7,false,false},{},0,0}", false);  // no item 2
    check("return {1,2,3,4,5,{'a'},{7,1},{'x',1},{},{},0,0}", false);  // reclaimed not of 5
    check("return {1,2,3,4,5,{'a'},{7,1},{},{},{3},0,0}", false);      // stale not a string
    check("return {1,2,3,4,5,{},{},{},{},{}}", false);                 // too short
    check("return 'x'", false);
    Reply r(
        static_cast<redisReply *>(redisCommand(ctx_, "EVAL %s 0", "return {1,{'C','TT'},{},-1}")));
    EXPECT_FALSE(keywatch::parse_live_claim_reply(r.get(), &l, &err)) << "letters are one byte";
}

// adopt (core/queue/scripts.h): the queues agree with each key's TTL, read in the script, so a
// second run (another engine hearing the same event) writes nothing; a gone key is left to the
// claim; a key tracked in `keys` keeps its record there.
class AdoptScriptTest : public BatchScriptTest {
  protected:
    // adopt with the rule's queue P (and `keys` as K when two), reply letters.
    std::string adopt(const std::vector<std::string> &ids, bool snapshot, bool two = true) {
        std::vector<std::string> keys = {sessions_.due, sessions_.data};
        if (two) keys.insert(keys.end(), {keys_.due, keys_.data});
        keys.insert(keys.end(), ids.begin(), ids.end());
        Reply r = evalk(scripts::kAdopt, keys, {snapshot ? "1" : "0", two ? "2" : "1", "0"});
        return r && r->type == REDIS_REPLY_STRING ? str(r.get()) : "?";
    }
    // Everything the queues hold, as text.
    std::string state() {
        std::string out;
        for (const QueueKeys *k : {&sessions_, &keys_}) {
            out += c_->command({"ZRANGE", k->due, "0", "-1", "WITHSCORES"}) + "|";
            std::string h = c_->command({"HGETALL", k->data});
            out += h + "|";
        }
        return out;
    }
    int64_t writes() {
        std::string info = c_->command({"INFO", "persistence"});
        size_t at = info.find("rdb_changes_since_last_save:");
        return std::stoll(info.substr(at + 28));
    }
    std::string exp(const std::string &key) { return c_->command({"PEXPIRETIME", key}); }

    QueueKeys sessions_ = QueueKeys::make("kw", "sessions", "0");
};

TEST_F(AdoptScriptTest, AdoptIsIdempotentAndWritesNothingTheSecondTime) {
    int64_t now = redis_now();
    c_->command({"SET", "a", "va", "PX", "60000"});  // adopted into the rule's queue
    c_->command({"SET", "b", "vb"});                 // no TTL, not tracked
    c_->command({"SET", "t", "vt", "PX", "50000"});  // tracked in `keys`, its TTL moved since
    c_->command({"ZADD", keys_.due, std::to_string(now + 1000), "t"});
    c_->command({"HSET", keys_.data, "p:t", std::to_string(now + 1000) + "|old"});
    c_->command({"RPUSH", "l", "x"});  // not a string: no snapshot
    c_->command({"PEXPIRE", "l", "70000"});
    c_->command({"SET", "p", "vp"});  // tracked here, its TTL gone since
    c_->command({"ZADD", sessions_.due, "5", "p"});
    c_->command({"HSET", sessions_.data, "p:p", "5|x", "m:p", "1:5:", "e:p", "err"});

    EXPECT_EQ(adopt({"a", "b", "gone", "t", "l", "p"}, true), "angrSu");
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "a"}), exp("a"));
    EXPECT_EQ(c_->command({"HGET", sessions_.data, "p:a"}), exp("a") + "|va");
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "l"}), exp("l"));
    EXPECT_EQ(c_->command({"HEXISTS", sessions_.data, "p:l"}), "0");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "t"}), exp("t")) << "t keeps its queue";
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "t"}), "(nil)") << "and is in no other";
    EXPECT_EQ(c_->command({"HGET", keys_.data, "p:t"}), exp("t") + "|old")
        << "its snapshot kept, restamped for the new deadline";
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "p"}), "(nil)") << "untracked";
    EXPECT_EQ(c_->command({"HLEN", sessions_.data}), "2") << "p's fields gone: ~ and p:a left";

    // Again (a second engine heard the same events): the same state, nothing written.
    const std::string before = state();
    const int64_t w = writes();
    EXPECT_EQ(adopt({"a", "b", "gone", "t", "l", "p"}, true), "=ng=Sn");
    EXPECT_EQ(writes(), w) << "the second run writes nothing";
    EXPECT_EQ(state(), before);

    // A key gone (deleted, no forget yet) is left for the claim, which fires it.
    c_->command({"ZADD", sessions_.due, "XX", std::to_string(now - 10), "a"});
    c_->command({"DEL", "a"});
    EXPECT_EQ(adopt({"a"}, false), "g");
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "a"}), std::to_string(now - 10));
    BatchClaim c = bclaim(sessions_, "A", 10, true);
    ASSERT_EQ(c.items.size(), 1u);
    EXPECT_EQ(c.items[0].id, "a");
    EXPECT_EQ(c.items[0].attempt, 1);
    // The key written again: adopted again, once.
    c_->command({"SET", "a", "va2", "PX", "60000"});
    EXPECT_EQ(adopt({"a"}, false), "a");
    EXPECT_EQ(adopt({"a"}, false), "=");
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "a"}), exp("a"));

    // A later expiry moves the score, in the queue the key is in.
    c_->command({"PEXPIRE", "t", "90000"});
    EXPECT_EQ(adopt({"t"}, false), "r");
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "t"}), exp("t"));
    // One queue (the rule's queue is `keys`): P is that queue.
    c_->command({"SET", "one", "v", "PX", "60000"});
    EXPECT_EQ(adopt({"one"}, false, false), "a");
    EXPECT_EQ(c_->command({"ZSCORE", sessions_.due, "one"}), exp("one"));
}

TEST_F(AdoptScriptTest, StrictAdoptionRefusesWithTodaysCodesAndWritesNothing) {
    c_->command({"SET", "nottl", "v"});
    c_->command({"RPUSH", "l", "x"});
    c_->command({"PEXPIRE", "l", "60000"});
    const int64_t w = writes();
    auto strict = [&](const std::string &key, const char *snap) {
        return c_->command(
            {"EVAL", scripts::kAdopt.body, "3", keys_.due, keys_.data, key, snap, "1", "1"});
    };
    EXPECT_EQ(strict("gone", "0"), "-2");
    EXPECT_EQ(strict("nottl", "0"), "-1");
    EXPECT_EQ(strict("l", "1"), "-3");
    EXPECT_EQ(writes(), w);
    EXPECT_EQ(strict("l", "0"), exp("l"));
    EXPECT_EQ(c_->command({"ZSCORE", keys_.due, "l"}), exp("l"));
}

}  // namespace
}  // namespace kwtest
