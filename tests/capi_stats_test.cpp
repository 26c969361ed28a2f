// The settled C API against a real redis-server: labelled statistics and histograms move
// after real events and read the same through kw_engine_stats, kw_engine_stat and
// kw_engine_stats_json; the client's JSON getters report their failures as statuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "redis_fixture.h"

namespace kwtest {
namespace {

// One sample of a snapshot, found by row name and label value.
struct Sample {
    bool found = false;
    kw_stat_type type = KW_STAT_COUNTER;
    std::string label_name;
    int64_t value = 0;
    double sum = 0;
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;
};

Sample sample(kw_engine_t *e, const std::string &name, const std::string &label) {
    kw_stats_t *s = nullptr;
    Sample out;
    EXPECT_EQ(kw_engine_stats(e, &s), KW_OK);
    for (size_t i = 0; i < kw_stats_count(s); i++) {
        if (name != kw_stats_name(s, i) || label != kw_stats_label_value(s, i)) continue;
        EXPECT_FALSE(out.found) << name << "{" << label << "} appears twice";
        out.found = true;
        out.type = kw_stats_type(s, i);
        out.label_name = kw_stats_label_name(s, i);
        out.value = kw_stats_value(s, i);
        out.sum = kw_stats_sum(s, i);
        const double *b = nullptr;
        const uint64_t *c = nullptr;
        size_t n = kw_stats_buckets(s, i, &b, &c);
        out.bounds.assign(b, b + n);
        out.cumulative.assign(c, c + n);
    }
    kw_stats_free(s);
    return out;
}

class CApiStatsTest : public RedisTest {
  protected:
    kw_client_t *new_client() {
        kw_conf_t *conf = kw_conf_new();
        kw_conf_set(conf, "redis.url", redis().url().c_str(), nullptr, 0);
        kw_client_t *c = nullptr;
        char err[256] = "";
        EXPECT_EQ(kw_client_new(conf, &c, err, sizeof err), KW_OK) << err;
        kw_conf_free(conf);
        return c;
    }
};

TEST_F(CApiStatsTest, LabelledStatisticsAndHistogramsMoveAfterRealEvents) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.set("retry.base", "100ms");
    engine.set("max_attempts", "1");
    // Handler 0: the task queue, acks after 30 ms. Handler 1: tracked keys, rejects.
    EventSink jobs, keys;
    jobs.decide = [](const Event &) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        return KW_RESULT_ACK;
    };
    keys.decide = [](const Event &) { return KW_RESULT_REJECT; };
    engine.add(&jobs, {{"events", "task"}, {"queue", "jobs"}});
    engine.add(&keys, {{"events", "expired"}, {"queue", "keys"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();

    kw_client_t *c = new_client();
    ASSERT_NE(c, nullptr);
    for (const char *id : {"a", "b", "c"})
        ASSERT_EQ(kw_client_schedule(c, "jobs", id, 1, "p", 1, 0, 0, 0, nullptr), KW_OK)
            << kw_client_last_error(c);
    ASSERT_EQ(kw_client_track(c, "k1", 2, "v", 1, 50, 0, nullptr), KW_OK)
        << kw_client_last_error(c);
    // Every figure read from the snapshots below, once the engine's thread has counted it.
    ASSERT_TRUE(engine.stat_reaches("queue.acked.jobs", 3));
    ASSERT_TRUE(engine.stat_reaches("queue.rejected.keys", 1));
    ASSERT_TRUE(engine.stat_reaches("expiry.lateness.jobs", 3));
    ASSERT_TRUE(engine.stat_reaches("expiry.lateness.keys", 1));
    ASSERT_TRUE(engine.stat_reaches("handler.calls.0", 3));
    ASSERT_TRUE(engine.stat_reaches("handler.calls.1", 1));
    ASSERT_TRUE(engine.stat_reaches("handler.errors.1", 1));
    ASSERT_TRUE(engine.stat_reaches("handler.duration.0", 3));

    kw_engine_t *e = engine.get();
    // Per queue: handler outcomes and the lateness histogram of first deliveries.
    EXPECT_EQ(sample(e, "queue.acked.<queue>", "jobs").value, 3);
    EXPECT_EQ(sample(e, "queue.rejected.<queue>", "keys").value, 1);
    EXPECT_EQ(sample(e, "queue.acked.<queue>", "keys").value, 0);
    Sample late_jobs = sample(e, "expiry.lateness.<queue>", "jobs");
    ASSERT_TRUE(late_jobs.found);
    EXPECT_EQ(late_jobs.type, KW_STAT_HISTOGRAM);
    EXPECT_EQ(late_jobs.label_name, "queue");
    EXPECT_EQ(late_jobs.value, 3);
    ASSERT_FALSE(late_jobs.cumulative.empty());
    EXPECT_EQ(late_jobs.cumulative.back(), 3u);
    EXPECT_TRUE(std::isinf(late_jobs.bounds.back()));
    EXPECT_EQ(sample(e, "expiry.lateness.<queue>", "keys").value, 1);

    // Per handler: calls, errors and durations (the 30 ms sleep is a lower bound).
    EXPECT_EQ(sample(e, "handler.calls.<handler>", "0").value, 3);
    EXPECT_EQ(sample(e, "handler.errors.<handler>", "0").value, 0);
    EXPECT_EQ(sample(e, "handler.calls.<handler>", "1").value, 1);
    EXPECT_EQ(sample(e, "handler.errors.<handler>", "1").value, 1);
    Sample dur = sample(e, "handler.duration.<handler>", "0");
    ASSERT_TRUE(dur.found);
    EXPECT_EQ(dur.value, 3);
    EXPECT_GE(dur.sum, 0.09);
    for (size_t b = 0; b < dur.bounds.size(); b++)
        if (dur.bounds[b] < 0.03) {
            EXPECT_EQ(dur.cumulative[b], 0u) << "le " << dur.bounds[b];
        }
    for (size_t b = 1; b < dur.cumulative.size(); b++)
        EXPECT_GE(dur.cumulative[b], dur.cumulative[b - 1]);

    // Per node: the one server, ready.
    const std::string node = redis().host() + ":" + std::to_string(redis().port());
    Sample state = sample(e, "node.state.<node>", node);
    ASSERT_TRUE(state.found) << node;
    EXPECT_EQ(state.type, KW_STAT_GAUGE);
    EXPECT_EQ(state.value, KW_CONN_READY);

    // The same figures by name and in the JSON.
    EXPECT_TRUE(engine.stat_reaches("node.state." + node, KW_CONN_READY));
    EXPECT_TRUE(engine.stat_reaches("queue.acked.nosuchqueue", 0));
    char *text = nullptr;
    ASSERT_EQ(kw_engine_stats_json(e, &text), KW_OK);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    kw_free(text);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["queue.acked.jobs"], 3);
    EXPECT_EQ(j["expiry.lateness.jobs"]["count"], 3);
    EXPECT_EQ(j["handler.duration.0"]["buckets"].back()[0], "+Inf");
    EXPECT_EQ(j["handler.duration.0"]["buckets"].back()[1], 3);  // cumulative: every call
    EXPECT_EQ(j["node.state." + node], KW_CONN_READY);
    kw_client_free(c);
}

TEST_F(CApiStatsTest, NodeReconnectsCountAfterTheConnectionIsKilled) {
    Engine engine(redis().url());
    EventSink sink;
    engine.add(&sink, {});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    const std::string node = redis().host() + ":" + std::to_string(redis().port());
    EXPECT_TRUE(engine.stat_reaches("node.reconnects." + node, 0));
    auto admin = client();
    admin->command({"CLIENT", "KILL", "TYPE", "pubsub"});
    int64_t reconnects = 0;
    ASSERT_TRUE(engine.stat_reaches("node.reconnects." + node, at_least(1), &reconnects));
    EXPECT_TRUE(engine.stat_reaches("conn.reconnects", reconnects));
}

// Holds every event it gets; the test completes the holds from its own thread.
struct Holder {
    std::mutex mu;
    std::vector<kw_hold_t *> holds;
    static int handler(kw_event_t *ev, void *opaque) {
        auto *self = static_cast<Holder *>(opaque);
        kw_hold_t *h = kw_event_hold(ev);
        if (!h) return KW_RESULT_RETRY;
        std::lock_guard<std::mutex> lock(self->mu);
        self->holds.push_back(h);
        return KW_RESULT_PENDING;
    }
    size_t size() {
        std::lock_guard<std::mutex> lock(mu);
        return holds.size();
    }
};

TEST_F(CApiStatsTest, QueueHandlerAndNodeRowsCountRealTrafficAndHolds) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.set("retry.base", "50ms");
    engine.set("retry.max", "50ms");
    engine.set("max_attempts", "3");
    // Handler 0: the task queue. "ok" acks, "again" retries once then acks, "bad" rejects.
    EventSink jobs;
    jobs.decide = [](const Event &e) {
        if (e.key == "bad") return KW_RESULT_REJECT;
        if (e.key == "again" && e.attempt == 1) return KW_RESULT_RETRY;
        return KW_RESULT_ACK;
    };
    engine.add(&jobs, {{"events", "task"}, {"queue", "jobs"}});
    // Handler 1: holds every live `set` event.
    Holder holder;
    kw_filter_t *f = kw_filter_new();
    ASSERT_EQ(kw_filter_set(f, "events", "set", nullptr, 0), KW_OK);
    ASSERT_EQ(kw_engine_add_handler(engine.get(), f, &Holder::handler, &holder, nullptr), KW_OK);
    kw_filter_free(f);
    kw_engine_t *e = engine.get();
    // Before start: no node is listed.
    EXPECT_TRUE(engine.stat_reaches("conn.nodes", 0));
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    const std::string node = redis().host() + ":" + std::to_string(redis().port());
    // The sweeper connects after the start: node.sweeping becomes 1.
    ASSERT_TRUE(engine.stat_reaches("node.sweeping." + node, 1));
    EXPECT_EQ(sample(e, "node.sweeping.<node>", node).type, KW_STAT_GAUGE);

    kw_client_t *c = new_client();
    ASSERT_NE(c, nullptr);
    for (const char *id : {"ok", "again", "bad"})
        ASSERT_EQ(kw_client_schedule(c, "jobs", id, strlen(id), "p", 1, 0, 0, 0, nullptr), KW_OK)
            << kw_client_last_error(c);
    ASSERT_TRUE(engine.stat_reaches("queue.acked.jobs", 2));
    ASSERT_TRUE(engine.stat_reaches("queue.dead.jobs", 1));
    // Per queue: four claims (one of them the retry), one retry, one dead letter, none of
    // them after a lease ran out.
    EXPECT_TRUE(engine.stat_reaches("queue.claimed.jobs", 4));
    EXPECT_TRUE(engine.stat_reaches("queue.retried.jobs", 1));
    EXPECT_TRUE(engine.stat_reaches("queue.rejected.jobs", 1));
    EXPECT_TRUE(engine.stat_reaches("queue.lease_expired.jobs", 0));
    EXPECT_TRUE(engine.stat_reaches("items.claimed", 4));
    EXPECT_TRUE(engine.stat_reaches("items.dead", 1));
    Sample claimed = sample(e, "queue.claimed.<queue>", "jobs");
    ASSERT_TRUE(claimed.found);
    EXPECT_EQ(claimed.type, KW_STAT_COUNTER);
    EXPECT_EQ(claimed.label_name, "queue");
    // Per handler: each event's result once.
    EXPECT_TRUE(engine.stat_reaches("handler.acked.0", 2));
    EXPECT_TRUE(engine.stat_reaches("handler.retried.0", 1));
    EXPECT_TRUE(engine.stat_reaches("handler.rejected.0", 1));
    EXPECT_TRUE(engine.stat_reaches("handler.pending.0", 0));
    EXPECT_EQ(sample(e, "handler.acked.<handler>", "0").label_name, "handler");

    // Handler 1 holds three live events; the holds complete ACK, REJECT and never.
    auto raw = client();
    for (const char *k : {"h1", "h2", "h3"}) raw->command({"SET", k, "v"});
    // The handler records its hold before it returns; the engine counts the call after.
    ASSERT_TRUE(wait_until([&] { return holder.size() == 3; })) << holder.size();
    ASSERT_TRUE(engine.stat_reaches("handler.pending.1", 3));
    EXPECT_TRUE(engine.stat_reaches("handler.calls.1", 3));
    EXPECT_TRUE(engine.stat_reaches("handler.acked.1", 0));
    {
        std::lock_guard<std::mutex> lock(holder.mu);
        EXPECT_EQ(kw_event_complete(holder.holds[0], KW_RESULT_ACK, nullptr, -1), KW_OK);
        EXPECT_EQ(kw_event_complete(holder.holds[1], KW_RESULT_REJECT, "no", -1), KW_OK);
        for (kw_hold_t *h : holder.holds) kw_hold_free(h);  // the third: released
        holder.holds.clear();
    }
    EXPECT_TRUE(engine.stat_reaches("handler.acked.1", 1));
    EXPECT_TRUE(engine.stat_reaches("handler.rejected.1", 1));
    EXPECT_TRUE(engine.stat_reaches("handler.retried.1", 0));
    EXPECT_TRUE(engine.stat_reaches("handler.pending.1", 3));
    EXPECT_TRUE(engine.stat_reaches("handler.calls.1", 3));

    // Per node: what was read from it (the three `set` events), as events.received.
    EXPECT_TRUE(engine.stat_reaches("node.received." + node, 3));
    EXPECT_TRUE(engine.stat_reaches("events.received", 3));
    EXPECT_TRUE(engine.stat_reaches("conn.nodes", 1));
    // Standalone: no topology to refresh.
    EXPECT_TRUE(engine.stat_reaches("topology.refreshes", 0));

    // The server gone: the sweeper stops sweeping; back: it sweeps again.
    redis().kill9();
    ASSERT_TRUE(engine.stat_reaches("node.sweeping." + node, 0));
    // The subscriber's connection is another one: it may notice the loss a little later.
    EXPECT_TRUE(engine.stat_reaches("conn.state", other_than(KW_CONN_READY)));
    redis().start();  // the same port
    ASSERT_TRUE(engine.stat_reaches("node.sweeping." + node, 1, nullptr, milliseconds(15000)));
    ASSERT_TRUE(engine.stat_reaches("conn.state", KW_CONN_READY));
    // Stopped: nothing sweeps.
    ASSERT_EQ(kw_engine_stop(e, 5000), KW_OK) << engine.last_error();
    EXPECT_TRUE(engine.stat_reaches("node.sweeping." + node, 0));
    kw_client_free(c);
}

// kw_engine_check: subscribed to the node like a start, then gone; nothing was handled or
// claimed meanwhile (a due task and live events arrive), and the engine does not start.
TEST_F(CApiStatsTest, CheckSubscribesButHandlesAndClaimsNothing) {
    kw_client_t *c = new_client();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(kw_client_schedule(c, "jobs", "due", 3, "p", 1, 0, 0, 0, nullptr), KW_OK)
        << kw_client_last_error(c);
    EventSink checked;
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.add(&checked, {{"events", "task"}, {"queue", "jobs"}});
    engine.add(&checked, {{"events", "set"}});
    auto raw = client();
    std::atomic<bool> writing{true};
    std::thread writer([&] {  // live events all along the check
        for (int i = 0; writing; i++) {
            raw->command({"SET", "live:" + std::to_string(i % 10), "v"});
            std::this_thread::sleep_for(milliseconds(2));
        }
    });
    const int rc = kw_engine_check(engine.get());
    writing = false;
    writer.join();
    ASSERT_EQ(rc, KW_OK) << engine.last_error();
    const std::string node = redis().host() + ":" + std::to_string(redis().port());
    EXPECT_TRUE(sample(engine.get(), "node.state.<node>", node).found);
    EXPECT_TRUE(engine.stat_reaches("items.claimed", 0));
    EXPECT_EQ(kw_engine_start(engine.get()), KW_ERR_STATE);
    EXPECT_NE(engine.last_error().find("only once"), std::string::npos) << engine.last_error();
    EXPECT_EQ(kw_engine_stop(engine.get(), 1000), KW_OK);
    EXPECT_EQ(checked.size(), 0u) << checked.describe();
    // The task is still due, never claimed: a started engine gets it at its first attempt.
    EventSink served;
    Engine next(redis().url());
    next.set("queues", "jobs");
    next.add(&served, {{"events", "task"}, {"queue", "jobs"}});
    ASSERT_EQ(next.start(), KW_OK) << next.last_error();
    ASSERT_TRUE(served.wait_for("task", "due")) << served.describe();
    EXPECT_EQ(served.events().at(0).attempt, 1);
    EXPECT_EQ(checked.size(), 0u) << checked.describe();
    kw_client_free(c);
}

// kw_engine_check fails as kw_engine_start would: the same status and message.
TEST_F(CApiStatsTest, CheckFailsLikeStart) {
    Engine checked(redis().url() + "/99"), started(redis().url() + "/99");
    EventSink sink;
    checked.add(&sink, {{"events", "set"}});
    started.add(&sink, {{"events", "set"}});
    const int rc = kw_engine_check(checked.get());
    EXPECT_NE(rc, KW_OK);
    EXPECT_EQ(started.start(), rc);
    EXPECT_EQ(checked.last_error(), started.last_error());
    EXPECT_NE(checked.last_error(), "");
}

TEST_F(CApiStatsTest, JsonGettersReportFailuresAsStatuses) {
    kw_client_t *c = new_client();
    ASSERT_NE(c, nullptr);
    char *out = nullptr;
    ASSERT_EQ(kw_client_inspect_json(c, &out), KW_OK) << kw_client_last_error(c);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out[0], '{');
    kw_free(out);
    // A bad queue name: KW_ERR_INVALID_ARG, no text, a message naming the problem.
    out = reinterpret_cast<char *>(1);
    EXPECT_EQ(kw_client_dead_list_json(c, "bad name{", 10, &out), KW_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    EXPECT_STRNE(kw_client_last_error(c), "");
    // A NULL out-parameter.
    EXPECT_EQ(kw_client_inspect_json(c, nullptr), KW_ERR_INVALID_ARG);
    // An unknown queue has no dead letters: an empty array.
    ASSERT_EQ(kw_client_dead_list_json(c, "never", 10, &out), KW_OK);
    EXPECT_STREQ(out, "[]");
    kw_free(out);
    // A page: after a cursor that is not one, KW_ERR_INVALID_ARG naming it; a good one (with
    // or without a slot tag) on an unknown queue, an empty array.
    for (const char *bad : {"abc", "12", "1-x", "-1", "1-2-3@x"}) {
        out = reinterpret_cast<char *>(1);
        EXPECT_EQ(kw_client_dead_page_json(c, "never", bad, 10, &out), KW_ERR_INVALID_ARG) << bad;
        EXPECT_EQ(out, nullptr);
        EXPECT_NE(std::string(kw_client_last_error(c)).find("cursor"), std::string::npos);
    }
    for (const char *good : {"", "1795241184005-0", "1795241184005-3@12"}) {
        ASSERT_EQ(kw_client_dead_page_json(c, "never", good, 10, &out), KW_OK) << good;
        EXPECT_STREQ(out, "[]");
        kw_free(out);
    }
    // The server gone: inspect still answers (documented), saying what it could not read;
    // the dead-letter list fails with a status a binding can map.
    redis().kill9();
    ASSERT_EQ(kw_client_inspect_json(c, &out), KW_OK) << kw_client_last_error(c);
    EXPECT_NE(std::string(out).find("\"complete\":false"), std::string::npos) << out;
    kw_free(out);
    out = reinterpret_cast<char *>(1);
    int rc = kw_client_dead_list_json(c, "jobs", 10, &out);
    EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << kw_client_last_error(c);
    EXPECT_EQ(out, nullptr);
    kw_client_free(c);
}

}  // namespace
}  // namespace kwtest
