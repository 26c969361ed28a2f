// Engine life: slow handlers do not stall the loop, backpressure is counted, graceful stop
// waits for handlers (up to its deadline), state rules after start, and the statistics.
#include <atomic>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "redis_fixture.h"

namespace kwtest {
namespace {

// Opens a gate when it goes out of scope, so that a failed assertion never leaves a handler
// blocked (declare it after the engine: it is destroyed, and the gate opened, first).
struct OpenOnExit {
    Gate &gate;
    ~OpenOnExit() { gate.open(); }
};

// A statistic in the JSON object, by its documented dotted name: either a flat member
// ("events.received") or the same path through nested objects.
const nlohmann::json *find_stat(const nlohmann::json &j, const std::string &name) {
    auto flat = j.find(name);
    if (flat != j.end()) return &*flat;
    const nlohmann::json *node = &j;
    size_t start = 0;
    while (start <= name.size()) {
        size_t dot = name.find('.', start);
        std::string part =
            name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (!node->is_object()) return nullptr;
        auto it = node->find(part);
        if (it == node->end()) return nullptr;
        node = &*it;
        if (dot == std::string::npos) return node;
        start = dot + 1;
    }
    return nullptr;
}

class Lifecycle : public RedisTest {
  protected:
    // Clients subscribed to anything, as the server sees them.
    int pubsub_clients() {
        std::string list = client()->command({"CLIENT", "LIST", "TYPE", "pubsub"});
        return static_cast<int>(std::count(list.begin(), list.end(), '\n'));
    }
};

TEST_F(Lifecycle, SlowHandlerDoesNotStallTheEventLoop) {
    // One worker, blocked: the loop must keep reading from Redis and queueing.
    Gate gate;
    EventSink sink;
    sink.hook = [&](const Event &e) {
        if (e.key == "slow") gate.wait();
    };
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}});
    OpenOnExit guard{gate};
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "slow", "v"}), "OK");
    ASSERT_TRUE(wait_until([&] { return sink.in_handler() == 1; }));
    for (int i = 0; i < 50; i++)
        ASSERT_EQ(c->command({"SET", "fast:" + std::to_string(i), "v"}), "OK");
    EXPECT_TRUE(engine.stat_reaches("events.received", 51));
    EXPECT_TRUE(engine.stat_reaches("dispatch.queued", 50));
    EXPECT_EQ(sink.size(), 0u);
    EXPECT_TRUE(engine.stat_reaches("events.dropped", 0));
    gate.open();
    EXPECT_TRUE(sink.wait_count(51)) << sink.describe();
    EXPECT_TRUE(engine.stat_reaches("dispatch.queued", 0));
}

TEST_F(Lifecycle, SlowHandlerDoesNotDelayEventsOnOtherWorkers) {
    Gate gate;
    EventSink sink;
    sink.hook = [&](const Event &e) {
        if (e.key == "slow") gate.wait();
    };
    Engine engine(redis().url());
    engine.set("workers", "4");
    engine.add(&sink, {{"events", "set"}});
    OpenOnExit guard{gate};
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "slow", "v"}), "OK");
    ASSERT_TRUE(wait_until([&] { return sink.in_handler() == 1; }));
    for (int i = 0; i < 50; i++)
        ASSERT_EQ(c->command({"SET", "fast:" + std::to_string(i), "v"}), "OK");
    // All 50 are handled while the slow one is still blocked.
    EXPECT_TRUE(sink.wait_count(50)) << "got " << sink.size();
    EXPECT_TRUE(wait_until([&] { return sink.in_handler() == 1; })) << sink.in_handler();
    EXPECT_EQ(sink.count("set", "slow"), 0u);
    gate.open();
    EXPECT_TRUE(sink.wait_for("set", "slow")) << sink.describe();
}

TEST_F(Lifecycle, FullDispatchQueueDropsAndCountsLiveEvents) {
    Gate gate;
    EventSink sink;
    sink.hook = [&](const Event &e) {
        if (e.key == "slow") gate.wait();
    };
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.set("dispatch.queue_size", "16");
    engine.add(&sink, {{"events", "set"}});
    OpenOnExit guard{gate};
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "slow", "v"}), "OK");
    ASSERT_TRUE(wait_until([&] { return sink.in_handler() == 1; }));
    for (int i = 0; i < 100; i++)
        ASSERT_EQ(c->command({"SET", "flood:" + std::to_string(i), "v"}), "OK");
    // Counted as read; dropped when the batch read is handed over, just after.
    ASSERT_TRUE(engine.stat_reaches("events.received", 101));
    ASSERT_TRUE(engine.stat_reaches("events.dropped", at_least(100 - 16)));
    EXPECT_TRUE(engine.stat_reaches("dispatch.queued", at_most(16)));
    gate.open();
    EXPECT_TRUE(stats_reach(engine.get(), {"events.delivered", "events.dropped"}, 101));
    // The sink records an event before its handler returns; the engine counts it after.
    EXPECT_TRUE(engine.stat_reaches("events.delivered", static_cast<int64_t>(sink.size())));
}

TEST_F(Lifecycle, StopWaitsForInFlightHandler) {
    Gate gate;
    std::atomic<bool> finished{false};
    EventSink sink;
    sink.hook = [&](const Event &) {
        gate.wait();
        std::this_thread::sleep_for(milliseconds(200));
        finished = true;
    };
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "set"}});
    OpenOnExit guard{gate};
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    ASSERT_EQ(client()->command({"SET", "busy", "v"}), "OK");
    ASSERT_TRUE(wait_until([&] { return sink.in_handler() == 1; }));

    std::thread opener([&] {
        std::this_thread::sleep_for(milliseconds(300));
        gate.open();
    });
    int rc = kw_engine_stop(engine.get(), 5000);
    opener.join();
    EXPECT_EQ(rc, KW_OK) << engine.last_error();
    EXPECT_TRUE(finished) << "stop returned before the handler finished";
    EXPECT_EQ(sink.size(), 1u);
    EXPECT_TRUE(engine.stat_reaches("events.delivered", 1));
    EXPECT_TRUE(engine.stat_reaches("events.abandoned", 0));
}

TEST_F(Lifecycle, StopLetsQueuedEventsFinishWithinTheDeadline) {
    EventSink sink;
    sink.hook = [](const Event &) { std::this_thread::sleep_for(milliseconds(20)); };
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(c->command({"SET", "q:" + std::to_string(i), "v"}), "OK");
    ASSERT_TRUE(engine.stat_reaches("events.received", 20));
    EXPECT_EQ(kw_engine_stop(engine.get(), 10000), KW_OK) << engine.last_error();
    EXPECT_EQ(sink.size(), 20u);
    EXPECT_TRUE(engine.stat_reaches("events.abandoned", 0));
}

TEST_F(Lifecycle, StopDeadlineReportsTimeoutAndCountsAbandonedEvents) {
    Gate gate;
    EventSink sink;
    sink.hook = [&](const Event &e) {
        if (e.key == "block") gate.wait();
    };
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}});
    OpenOnExit guard{gate};
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "block", "v"}), "OK");
    ASSERT_TRUE(wait_until([&] { return sink.in_handler() == 1; }));
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(c->command({"SET", "queued:" + std::to_string(i), "v"}), "OK");
    ASSERT_TRUE(engine.stat_reaches("dispatch.queued", 5));

    std::thread opener([&] {
        std::this_thread::sleep_for(milliseconds(1500));
        gate.open();
    });
    int rc = kw_engine_stop(engine.get(), 300);
    bool handler_done_at_return = sink.in_handler() == 0;
    opener.join();
    EXPECT_EQ(rc, KW_ERR_TIMEOUT);
    EXPECT_TRUE(handler_done_at_return) << "stop returned while a handler was still running";
    EXPECT_TRUE(engine.stat_reaches("events.abandoned", 5));
    for (const auto &e : sink.events()) EXPECT_EQ(e.key, "block") << "handled after deadline";
}

TEST_F(Lifecycle, NoHandlerCallsAfterStop) {
    EventSink sink;
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "set"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "before-stop", "v"}), "OK");
    ASSERT_TRUE(sink.wait_for("set", "before-stop")) << sink.describe();
    ASSERT_EQ(kw_engine_stop(engine.get(), 5000), KW_OK);
    EXPECT_TRUE(engine.stat_reaches("conn.state", KW_CONN_DISCONNECTED));
    EXPECT_TRUE(wait_until([&] { return pubsub_clients() == 0; })) << "still subscribed after stop";
    ASSERT_EQ(c->command({"SET", "after-stop", "v"}), "OK");
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(sink.count("set", "after-stop"), 0u);
    EXPECT_EQ(kw_engine_stop(engine.get(), 5000), KW_OK) << "stop is not idempotent";
}

TEST_F(Lifecycle, FreeingARunningEngineStopsIt) {
    EventSink sink;
    {
        Engine engine(redis().url());
        engine.add(&sink, {{"events", "set"}});
        ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
        ASSERT_EQ(pubsub_clients(), 1);
    }
    EXPECT_TRUE(wait_until([&] { return pubsub_clients() == 0; }));
}

TEST_F(Lifecycle, RegistrationAfterStartIsRefusedWithStateError) {
    EventSink sink;
    StateLog late_states;
    LogSink late_logs;
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "set"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    EXPECT_EQ(kw_engine_add_handler(engine.get(), nullptr, &EventSink::handler, &sink, nullptr),
              KW_ERR_STATE);
    EXPECT_FALSE(engine.last_error().empty());
    // The loop thread reads the callbacks: changing them now would race with it.
    EXPECT_EQ(kw_engine_set_state_cb(engine.get(), &StateLog::callback, &late_states),
              KW_ERR_STATE);
    EXPECT_EQ(kw_engine_set_log_cb(engine.get(), &LogSink::callback, &late_logs), KW_ERR_STATE);
}

TEST_F(Lifecycle, StartWithoutHandlersIsAllowedOrRefusedClearly) {
    // Either way it must not hang: with no handler there is nothing to subscribe to.
    Engine engine(redis().url());
    auto t0 = Clock::now();
    int rc = engine.start();
    EXPECT_LT(Clock::now() - t0, milliseconds(6000));
    if (rc != KW_OK) {
        EXPECT_FALSE(engine.last_error().empty()) << kw_err_name(rc);
    }
}

TEST_F(Lifecycle, StatsJsonIsAnObjectWithTheDocumentedNames) {
    EventSink sink;
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "set,del"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "j1", "v"}), "OK");
    ASSERT_EQ(c->command({"SET", "j2", "v"}), "OK");
    ASSERT_EQ(c->command({"DEL", "j1"}), "1");
    ASSERT_TRUE(sink.wait_count(3)) << sink.describe();
    ASSERT_TRUE(engine.stat_reaches("events.delivered", 3));

    char *text = nullptr;
    ASSERT_EQ(kw_engine_stats_json(engine.get(), &text), KW_OK);
    ASSERT_NE(text, nullptr);
    std::string json_text(text);
    kw_free(text);
    nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << json_text;
    ASSERT_TRUE(j.is_object()) << json_text;

    for (const char *name :
         {"events.received", "events.received.set", "events.received.del", "events.delivered",
          "events.dropped", "events.abandoned", "handler.errors", "handler.retries",
          "conn.reconnects", "conn.state", "dispatch.queued"}) {
        const nlohmann::json *v = find_stat(j, name);
        ASSERT_NE(v, nullptr) << name << " missing from " << json_text;
        ASSERT_TRUE(v->is_number_integer()) << name << " is not an integer in " << json_text;
        EXPECT_TRUE(engine.stat_reaches(name, v->get<int64_t>())) << name << " in " << json_text;
    }
    EXPECT_EQ(find_stat(j, "events.received")->get<int64_t>(), 3);
    EXPECT_EQ(find_stat(j, "events.received.set")->get<int64_t>(), 2);
    EXPECT_EQ(find_stat(j, "conn.state")->get<int64_t>(), KW_CONN_READY);
}

}  // namespace
}  // namespace kwtest
