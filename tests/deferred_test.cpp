// Deferred completion (kw_event_hold / kw_event_complete) against a real redis-server:
// completion from another thread (ack, retry with a delay, reject), lease renewal of held
// items and hold.timeout, completing twice and after stop, holds at stop going back to
// their queue, several handlers holding one event, the opaque destructor.
#include <climits>
#include <thread>

#include "redis_fixture.h"

namespace kwtest {
namespace {

// A handler that holds the first `hold_first` events it gets and acks the rest, keeping
// the handles (freed at destruction) and what it saw.
struct Holder {
    int hold_first = INT_MAX;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<kw_hold_t *> holds;
    std::vector<std::string> keys, last_errors;
    std::vector<int> attempts, max_attempts;

    ~Holder() {
        for (auto *h : holds) kw_hold_free(h);
    }
    static int handler(kw_event_t *ev, void *opaque) {
        auto *self = static_cast<Holder *>(opaque);
        size_t len = 0;
        const char *key = static_cast<const char *>(kw_event_key(ev, &len));
        std::lock_guard<std::mutex> lock(self->mu);
        self->keys.emplace_back(key, len);
        self->attempts.push_back(kw_event_attempt(ev));
        self->max_attempts.push_back(kw_event_max_attempts(ev));
        self->last_errors.emplace_back(kw_event_last_error(ev));
        int result = KW_RESULT_ACK;
        if (static_cast<int>(self->keys.size()) <= self->hold_first) {
            kw_hold_t *h = kw_event_hold(ev);
            if (h) {
                self->holds.push_back(h);
                result = KW_RESULT_PENDING;
            }
        }
        self->cv.notify_all();
        return result;
    }
    bool wait_deliveries(size_t n) {
        std::unique_lock<std::mutex> lock(mu);
        return cv.wait_for(lock, kWait, [&] { return keys.size() >= n; });
    }
    bool wait_holds(size_t n) {
        std::unique_lock<std::mutex> lock(mu);
        return cv.wait_for(lock, kWait, [&] { return holds.size() >= n; });
    }
    size_t deliveries() {
        std::lock_guard<std::mutex> lock(mu);
        return keys.size();
    }
    // The hold of the event with this key (the first one held).
    kw_hold_t *hold_of(const std::string &key) {
        std::lock_guard<std::mutex> lock(mu);
        for (auto *h : holds) {
            size_t len = 0;
            const char *k = static_cast<const char *>(kw_event_key(kw_hold_event(h), &len));
            if (std::string(k, len) == key) return h;
        }
        return nullptr;
    }
};

class DeferredTest : public RedisTest {
  protected:
    // An engine serving task queue "jobs" with short leases and backoff.
    std::unique_ptr<Engine> engine(Holder *holder, const std::string &lease = "2s",
                                   const std::string &hold_timeout = "1m") {
        auto e = std::make_unique<Engine>(redis().url());
        e->set("queues", "jobs");
        e->set("lease", lease);
        e->set("hold.timeout", hold_timeout);
        e->set("retry.base", "50ms");
        e->set("retry.max", "200ms");
        e->set("max_attempts", "5");
        e->set("sweep.interval", "50ms");
        add(*e, holder);
        return e;
    }
    void add(Engine &e, Holder *holder) {
        kw_filter_t *f = kw_filter_new();
        char err[256] = "";
        ASSERT_EQ(kw_filter_set(f, "events", "task", err, sizeof err), KW_OK) << err;
        int rc = kw_engine_add_handler(e.get(), f, &Holder::handler, holder, nullptr);
        kw_filter_free(f);
        ASSERT_EQ(rc, KW_OK) << e.last_error();
    }
    void schedule(const std::string &id, int64_t delay_ms = 0) {
        kw_conf_t *conf = kw_conf_new();
        char err[256] = "";
        ASSERT_EQ(kw_conf_set(conf, "redis.url", redis().url().c_str(), err, sizeof err), KW_OK);
        kw_client_t *c = nullptr;
        ASSERT_EQ(kw_client_new(conf, &c, err, sizeof err), KW_OK) << err;
        EXPECT_EQ(
            kw_client_schedule(c, "jobs", id.data(), id.size(), "p", 1, 0, delay_ms, 0, nullptr),
            KW_OK)
            << kw_client_last_error(c);
        kw_client_free(c);
        kw_conf_free(conf);
    }
    int64_t redis_now(RedisClient &c) {
        std::string t = c.command({"TIME"});
        size_t nl = t.find('\n');
        return std::stoll(t.substr(0, nl)) * 1000 + std::stoll(t.substr(nl + 1)) / 1000;
    }
    // Completes h from a thread of its own, as an asynchronous handler would.
    static int complete_elsewhere(kw_hold_t *h, int result, const char *reason, int64_t delay) {
        int rc = KW_ERR_INTERNAL;
        std::thread([&] { rc = kw_event_complete(h, result, reason, delay); }).join();
        return rc;
    }
    // True if the item is in the queue's `part` ZSET (due or inflight).
    static bool scored(RedisClient &c, const std::string &part, const std::string &id) {
        return c.command({"ZSCORE", "kw:jobs:{0}:" + part, id}) != "(nil)";
    }
    // True once the item is neither due nor in flight (acked or dead).
    static bool gone(RedisClient &c, const std::string &id) {
        return !scored(c, "due", id) && !scored(c, "inflight", id);
    }
};

TEST_F(DeferredTest, CompletionsFromAnotherThreadAckRetryWithDelayAndReject) {
    Holder holder;
    auto e = engine(&holder);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("a");
    schedule("b");
    schedule("c");
    ASSERT_TRUE(holder.wait_holds(3));
    auto raw = client();

    ASSERT_EQ(complete_elsewhere(holder.hold_of("a"), KW_RESULT_ACK, nullptr, -1), KW_OK);
    int64_t before = redis_now(*raw);
    ASSERT_EQ(complete_elsewhere(holder.hold_of("b"), KW_RESULT_RETRY, "try later", 60000), KW_OK);
    ASSERT_EQ(complete_elsewhere(holder.hold_of("c"), KW_RESULT_REJECT, "bad input", -1), KW_OK);

    EXPECT_TRUE(wait_until([&] { return gone(*raw, "a"); })) << "a acked";
    ASSERT_TRUE(wait_until([&] { return scored(*raw, "due", "b"); })) << "b due again";
    int64_t due = std::stoll(raw->command({"ZSCORE", "kw:jobs:{0}:due", "b"}));
    EXPECT_GE(due, before + 60000) << "the delay asked for, not the backoff (50..200ms)";
    EXPECT_LE(due, redis_now(*raw) + 60000);
    EXPECT_EQ(raw->command({"HGET", "kw:jobs:{0}:data", "e:b"}), "try later");
    ASSERT_TRUE(wait_until([&] { return gone(*raw, "c"); }));
    std::string dead = raw->command({"XRANGE", "kw:jobs:{0}:dead", "-", "+"});
    EXPECT_TRUE(contains(dead, "bad input")) << dead;
    EXPECT_TRUE(contains(dead, "c")) << dead;
    // Counted as each script's reply reaches the engine, which may be after Redis shows it.
    EXPECT_TRUE(e->stat_reaches("items.acked", 1));
    EXPECT_TRUE(e->stat_reaches("items.retried", 1));
    EXPECT_TRUE(e->stat_reaches("items.dead", 1));
    EXPECT_TRUE(e->stat_reaches("handler.errors", 2)) << "the retry and the reject";
    EXPECT_EQ(holder.deliveries(), 3u) << "b waits a minute: not delivered again yet";
}

TEST_F(DeferredTest, TheNextAttemptReadsTheLastErrorAndMaxAttempts) {
    Holder holder;
    holder.hold_first = 1;
    auto e = engine(&holder);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("x");
    ASSERT_TRUE(holder.wait_holds(1));
    ASSERT_EQ(complete_elsewhere(holder.hold_of("x"), KW_RESULT_RETRY, "first failure", 10), KW_OK);
    ASSERT_TRUE(holder.wait_deliveries(2));
    std::lock_guard<std::mutex> lock(holder.mu);
    EXPECT_EQ(holder.attempts[0], 1);
    EXPECT_EQ(holder.last_errors[0], "");
    EXPECT_EQ(holder.attempts[1], 2);
    EXPECT_EQ(holder.last_errors[1], "first failure");
    EXPECT_EQ(holder.max_attempts[1], 5);
}

TEST_F(DeferredTest, PendingWithoutAHoldIsAHandlerErrorAndRetries) {
    struct Count {
        std::atomic<int> calls{0};
    } count;
    auto pending = [](kw_event_t *, void *opaque) {
        static_cast<Count *>(opaque)->calls++;
        return static_cast<int>(KW_RESULT_PENDING);
    };
    Engine eng(redis().url());
    eng.set("queues", "jobs");
    eng.set("retry.base", "50ms");
    eng.set("retry.max", "100ms");
    eng.set("max_attempts", "2");
    eng.set("sweep.interval", "50ms");
    kw_filter_t *f = kw_filter_new();
    char err[256] = "";
    ASSERT_EQ(kw_filter_set(f, "events", "task", err, sizeof err), KW_OK);
    ASSERT_EQ(kw_engine_add_handler(eng.get(), f, pending, &count, nullptr), KW_OK);
    kw_filter_free(f);
    ASSERT_EQ(eng.start(), KW_OK) << eng.last_error();
    schedule("p");
    auto raw = client();
    ASSERT_TRUE(eng.stat_reaches("items.dead", 1));
    EXPECT_EQ(count.calls.load(), 2) << "retried once, then dead (max_attempts 2)";
    EXPECT_TRUE(eng.stat_reaches("handler.errors", 2));
    EXPECT_TRUE(eng.stat_reaches("handler.retries", 2));
    std::string dead = raw->command({"XRANGE", "kw:jobs:{0}:dead", "-", "+"});
    EXPECT_TRUE(contains(dead, "KW_RESULT_PENDING without holding")) << dead;
}

TEST_F(DeferredTest, AHeldItemsLeaseIsRenewedAndNoOtherEngineGetsIt) {
    Holder holder, other;
    auto e1 = engine(&holder, "600ms", "1m");
    ASSERT_EQ(e1->start(), KW_OK) << e1->last_error();
    schedule("long");
    ASSERT_TRUE(holder.wait_holds(1));
    auto e2 = engine(&other, "600ms", "1m");
    ASSERT_EQ(e2->start(), KW_OK) << e2->last_error();
    // Five leases long: without renewal e2 would take the item over after the first.
    std::this_thread::sleep_for(milliseconds(3000));
    EXPECT_EQ(other.deliveries(), 0u) << "the held item must stay with its holder";
    EXPECT_TRUE(e2->stat_reaches("items.lease_expired", 0));
    EXPECT_EQ(holder.deliveries(), 1u);
    auto raw = client();
    EXPECT_TRUE(scored(*raw, "inflight", "long"));
    ASSERT_EQ(complete_elsewhere(holder.hold_of("long"), KW_RESULT_ACK, nullptr, -1), KW_OK);
    EXPECT_TRUE(wait_until([&] { return gone(*raw, "long"); }));
    EXPECT_TRUE(e1->stat_reaches("items.acked", 1));
    EXPECT_TRUE(e1->stat_reaches("items.late_acks", 0));
}

TEST_F(DeferredTest, PastHoldTimeoutTheItemIsRedeliveredAndTheLateCompletionCounted) {
    Holder holder;
    holder.hold_first = 1;  // holds the first delivery, acks the redelivery
    auto e = engine(&holder, "600ms", "1800ms");
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("hung");
    ASSERT_TRUE(holder.wait_holds(1));
    ASSERT_TRUE(holder.wait_deliveries(2)) << "released at hold.timeout and delivered again";
    auto raw = client();
    EXPECT_TRUE(wait_until([&] { return gone(*raw, "hung"); })) << "the redelivery acked it";
    EXPECT_TRUE(e->stat_reaches("items.released", at_least(1)));
    EXPECT_EQ(complete_elsewhere(holder.hold_of("hung"), KW_RESULT_REJECT, "too late", -1), KW_OK);
    EXPECT_TRUE(e->stat_reaches("items.late_acks", 1));
    EXPECT_TRUE(e->stat_reaches("items.dead", 0)) << "a late completion is not written";
    EXPECT_EQ(raw->command({"EXISTS", "kw:jobs:{0}:dead"}), "0");
}

TEST_F(DeferredTest, CompletingTwiceAndAfterStopAreRefused) {
    Holder holder;
    auto e = engine(&holder);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("once");
    ASSERT_TRUE(holder.wait_holds(1));
    kw_hold_t *h = holder.hold_of("once");
    EXPECT_EQ(kw_event_complete(h, 7, nullptr, -1), KW_ERR_INVALID_ARG) << "not a result";
    EXPECT_EQ(kw_event_complete(h, KW_RESULT_ACK, nullptr, -1), KW_OK);
    EXPECT_EQ(kw_event_complete(h, KW_RESULT_ACK, nullptr, -1), KW_ERR_STATE);
    EXPECT_EQ(kw_event_complete(h, KW_RESULT_REJECT, "again", -1), KW_ERR_STATE);
    EXPECT_EQ(kw_event_complete(nullptr, KW_RESULT_ACK, nullptr, -1), KW_ERR_INVALID_ARG);
    auto raw = client();
    EXPECT_TRUE(wait_until([&] { return gone(*raw, "once"); }));
    EXPECT_EQ(kw_engine_stop(e->get(), 1000), KW_OK);
    EXPECT_EQ(kw_event_complete(h, KW_RESULT_ACK, nullptr, -1), KW_ERR_STATE);
    EXPECT_TRUE(e->stat_reaches("items.acked", 1));
}

TEST_F(DeferredTest, AnEventHeldAtStopGoesBackToItsQueueForAnotherEngine) {
    Holder holder, other;
    other.hold_first = 0;
    auto e1 = engine(&holder);
    ASSERT_EQ(e1->start(), KW_OK) << e1->last_error();
    schedule("stuck");
    ASSERT_TRUE(holder.wait_holds(1));
    EXPECT_EQ(kw_engine_stop(e1->get(), 300), KW_ERR_TIMEOUT);
    EXPECT_TRUE(contains(e1->last_error(), "held")) << e1->last_error();
    EXPECT_TRUE(e1->stat_reaches("items.released", 1));
    EXPECT_EQ(kw_event_complete(holder.hold_of("stuck"), KW_RESULT_ACK, nullptr, -1), KW_ERR_STATE);
    auto raw = client();
    EXPECT_FALSE(scored(*raw, "inflight", "stuck"));
    EXPECT_TRUE(scored(*raw, "due", "stuck"));

    auto e2 = engine(&other);
    ASSERT_EQ(e2->start(), KW_OK) << e2->last_error();
    ASSERT_TRUE(other.wait_deliveries(1));
    {
        std::lock_guard<std::mutex> lock(other.mu);
        EXPECT_EQ(other.keys[0], "stuck");
        EXPECT_EQ(other.attempts[0], 1) << "a release gives the attempt back";
    }
    EXPECT_TRUE(wait_until([&] { return gone(*raw, "stuck"); }));
}

TEST_F(DeferredTest, TwoHandlersHoldingOneEventCompleteItTogether) {
    Holder first, second;
    auto e = engine(&first);
    add(*e, &second);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("both");
    ASSERT_TRUE(first.wait_holds(1));
    ASSERT_TRUE(second.wait_holds(1));
    ASSERT_EQ(complete_elsewhere(first.hold_of("both"), KW_RESULT_ACK, nullptr, -1), KW_OK);
    auto raw = client();
    // One handler done is not enough: the item stays in flight.
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_TRUE(scored(*raw, "inflight", "both"));
    EXPECT_TRUE(e->stat_reaches("items.acked", 0));
    ASSERT_EQ(complete_elsewhere(second.hold_of("both"), KW_RESULT_REJECT, "second says no", -1),
              KW_OK);
    EXPECT_TRUE(wait_until([&] { return gone(*raw, "both"); }));
    std::string dead = raw->command({"XRANGE", "kw:jobs:{0}:dead", "-", "+"});
    EXPECT_TRUE(contains(dead, "second says no")) << "any reject wins: " << dead;
    // Counted when the dead-letter script's reply reaches the engine: it can be after the
    // test saw the item leave Redis.
    EXPECT_TRUE(e->stat_reaches("items.dead", 1));
}

TEST_F(DeferredTest, AnUntrackedLiveEventCanBeHeld) {
    Holder holder;
    Engine e(redis().url());
    e.set("notify.enable", "true");
    kw_filter_t *f = kw_filter_new();
    char err[256] = "";
    ASSERT_EQ(kw_filter_set(f, "events", "set", err, sizeof err), KW_OK);
    ASSERT_EQ(kw_engine_add_handler(e.get(), f, &Holder::handler, &holder, nullptr), KW_OK);
    kw_filter_free(f);
    ASSERT_EQ(e.start(), KW_OK) << e.last_error();
    auto raw = client();
    raw->command({"SET", "live", "v"});
    ASSERT_TRUE(holder.wait_holds(1));
    kw_hold_t *h = holder.hold_of("live");
    EXPECT_STREQ(kw_event_name(kw_hold_event(h)), "set");
    EXPECT_STREQ(kw_event_queue(kw_hold_event(h)), "");
    EXPECT_EQ(kw_event_max_attempts(kw_hold_event(h)), 1);
    EXPECT_EQ(complete_elsewhere(h, KW_RESULT_RETRY, "counted only", -1), KW_OK);
    EXPECT_TRUE(e.stat_reaches("handler.retries", 1));
    EXPECT_EQ(kw_event_complete(h, KW_RESULT_ACK, nullptr, -1), KW_ERR_STATE);
}

struct Freed {
    std::atomic<int> calls{0};
    static void free_fn(void *opaque) { static_cast<Freed *>(opaque)->calls++; }
};

int ack_all(kw_event_t *, void *) {
    return KW_RESULT_ACK;
}

TEST_F(DeferredTest, CompletingAnEarlierClaimOfAnIdLeavesItsLaterClaimAlone) {
    // "a" scheduled again while its first claim is held, and claimed again: the first
    // claim's ack must not complete the second claim, whose retry is then applied.
    Holder holder;
    auto e = engine(&holder);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    schedule("a");
    ASSERT_TRUE(holder.wait_holds(1));
    schedule("a");
    ASSERT_TRUE(holder.wait_holds(2));
    kw_hold_t *first = nullptr, *second = nullptr;
    {
        std::lock_guard<std::mutex> lock(holder.mu);
        first = holder.holds[0];
        second = holder.holds[1];
    }
    auto raw = client();
    ASSERT_EQ(complete_elsewhere(first, KW_RESULT_ACK, nullptr, -1), KW_OK);
    ASSERT_EQ(complete_elsewhere(second, KW_RESULT_RETRY, "try later", 60000), KW_OK);
    EXPECT_TRUE(e->stat_reaches("items.retried", 1)) << "the second claim's retry applied";
    EXPECT_TRUE(scored(*raw, "due", "a"));
    EXPECT_EQ(raw->command({"HGET", "kw:jobs:{0}:data", "e:a"}), "try later");
}

TEST_F(DeferredTest, TheOpaqueDestructorRunsOnceWhenTheEngineIsFreed) {
    Freed kept, refused, never_started;
    {
        Engine e(redis().url());
        e.set("queues", "jobs");
        kw_filter_t *f = kw_filter_new();
        char err[256] = "";
        ASSERT_EQ(kw_filter_set(f, "events", "task", err, sizeof err), KW_OK);
        ASSERT_EQ(kw_engine_add_handler(e.get(), f, ack_all, &kept, &Freed::free_fn), KW_OK);
        ASSERT_EQ(e.start(), KW_OK) << e.last_error();
        EXPECT_EQ(kw_engine_add_handler(e.get(), f, ack_all, &refused, &Freed::free_fn),
                  KW_ERR_STATE);
        kw_filter_free(f);
        EXPECT_EQ(refused.calls.load(), 0) << "a failed add leaves opaque to the caller";
        EXPECT_EQ(kw_engine_stop(e.get(), 1000), KW_OK);
        EXPECT_EQ(kept.calls.load(), 0) << "stopped is not freed";
    }
    EXPECT_EQ(kept.calls.load(), 1);
    EXPECT_EQ(refused.calls.load(), 0);
    {
        Engine e(redis().url());
        ASSERT_EQ(kw_engine_add_handler(e.get(), nullptr, ack_all, &never_started, &Freed::free_fn),
                  KW_OK);
    }
    EXPECT_EQ(never_started.calls.load(), 1);
}

}  // namespace
}  // namespace kwtest
