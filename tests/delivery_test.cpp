// Delivery through the public C API from a real redis-server: every event type, event
// metadata, binary keys, handler results and several handlers.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis_fixture.h"

namespace kwtest {
namespace {

using namespace std::string_literals;

class Delivery : public RedisTest {
  protected:
    // Starts an engine whose single handler collects into sink_ the events `events` selects.
    void start_watching(const std::string &events) {
        engine_ = std::make_unique<Engine>(redis().url());
        engine_->add(&sink_, {{"events", events}});
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
        writer_ = client();
    }
    void TearDown() override {
        engine_.reset();  // stop before the sink and the server go away
        RedisTest::TearDown();
    }

    EventSink sink_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<RedisClient> writer_;
};

TEST_F(Delivery, DeliversExpiredEventWhenTtlRunsOut) {
    start_watching("expired");
    ASSERT_TRUE(set_and_expire(*writer_, "exp:1"));
    EXPECT_TRUE(sink_.wait_for("expired", "exp:1", 0)) << sink_.describe();
}

TEST_F(Delivery, DeliversExpiredEventFromTheActiveExpireCycle) {
    // Nobody touches the key: Redis's own expire cycle deletes it and publishes.
    start_watching("expired");
    ASSERT_EQ(writer_->command({"SET", "exp:cycle", "v", "PX", "100"}), "OK");
    EXPECT_TRUE(sink_.wait_for("expired", "exp:cycle", 0, milliseconds(15000))) << sink_.describe();
}

TEST_F(Delivery, DeliversEvictedEventUnderMaxmemory) {
    start_watching("evicted");
    std::string info = writer_->command({"INFO", "memory"});
    auto pos = info.find("used_memory:");
    ASSERT_NE(pos, std::string::npos) << info;
    long long used = std::stoll(info.substr(pos + strlen("used_memory:")));
    ASSERT_EQ(writer_->command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "OK");
    ASSERT_EQ(writer_->command({"CONFIG", "SET", "maxmemory", std::to_string(used + (2 << 20))}),
              "OK");
    const std::string value(64 * 1024, 'x');
    for (int i = 0; i < 100; i++) {
        std::string r = writer_->command({"SET", "evict:" + std::to_string(i), value});
        ASSERT_EQ(r, "OK") << "SET under allkeys-lru should evict, not fail";
    }
    std::string stats = writer_->command({"INFO", "stats"});
    ASSERT_EQ(stats.find("evicted_keys:0\r"), std::string::npos) << "Redis evicted nothing";
    EXPECT_TRUE(sink_.wait([](const Event &e) {
        return e.name == "evicted" && e.key.rfind("evict:", 0) == 0 && e.db == 0;
    })) << sink_.describe();
}

TEST_F(Delivery, DeliversDelEvent) {
    start_watching("del");
    ASSERT_EQ(writer_->command({"SET", "gone", "v"}), "OK");
    ASSERT_EQ(writer_->command({"DEL", "gone"}), "1");
    EXPECT_TRUE(sink_.wait_for("del", "gone", 0)) << sink_.describe();
}

TEST_F(Delivery, DeliversSetEvent) {
    start_watching("set");
    ASSERT_EQ(writer_->command({"SET", "written", "v"}), "OK");
    EXPECT_TRUE(sink_.wait_for("set", "written", 0)) << sink_.describe();
}

TEST_F(Delivery, DeliversExpireEvent) {
    start_watching("expire");
    ASSERT_EQ(writer_->command({"SET", "ttl", "v"}), "OK");
    ASSERT_EQ(writer_->command({"EXPIRE", "ttl", "100"}), "1");
    EXPECT_TRUE(sink_.wait_for("expire", "ttl", 0)) << sink_.describe();
}

TEST_F(Delivery, DeliversPersistEvent) {
    start_watching("persist");
    ASSERT_EQ(writer_->command({"SET", "kept", "v", "EX", "100"}), "OK");
    ASSERT_EQ(writer_->command({"PERSIST", "kept"}), "1");
    EXPECT_TRUE(sink_.wait_for("persist", "kept", 0)) << sink_.describe();
}

TEST_F(Delivery, DeliversRenameFromAndRenameTo) {
    start_watching("rename_from,rename_to");
    ASSERT_EQ(writer_->command({"SET", "old:name", "v"}), "OK");
    ASSERT_EQ(writer_->command({"RENAME", "old:name", "new:name"}), "OK");
    EXPECT_TRUE(sink_.wait_for("rename_from", "old:name", 0)) << sink_.describe();
    EXPECT_TRUE(sink_.wait_for("rename_to", "new:name", 0)) << sink_.describe();
}

TEST_F(Delivery, StarSubscribesToEveryDefaultEvent) {
    start_watching("*");
    ASSERT_EQ(writer_->command({"SET", "a", "v", "EX", "100"}), "OK");  // set, expire
    ASSERT_EQ(writer_->command({"PERSIST", "a"}), "1");                 // persist
    ASSERT_EQ(writer_->command({"RENAME", "a", "b"}), "OK");            // rename_from/to
    ASSERT_EQ(writer_->command({"DEL", "b"}), "1");                     // del
    ASSERT_TRUE(set_and_expire(*writer_, "c"));                         // expired
    for (const auto &[name, key] :
         std::vector<std::pair<std::string, std::string>>{{"set", "a"},
                                                          {"expire", "a"},
                                                          {"persist", "a"},
                                                          {"rename_from", "a"},
                                                          {"rename_to", "b"},
                                                          {"del", "b"},
                                                          {"expired", "c"}})
        EXPECT_TRUE(sink_.wait_for(name, key, 0)) << name << " " << key << "\n" << sink_.describe();
}

TEST_F(Delivery, DeliversOtherEventNamesWhenAsked) {
    start_watching("hset,lpush");
    ASSERT_EQ(writer_->command({"HSET", "h", "f", "v"}), "1");
    ASSERT_EQ(writer_->command({"LPUSH", "l", "x"}), "1");
    EXPECT_TRUE(sink_.wait_for("hset", "h", 0)) << sink_.describe();
    EXPECT_TRUE(sink_.wait_for("lpush", "l", 0)) << sink_.describe();
}

TEST_F(Delivery, NullFilterDeliversOnlyExpiredEvents) {
    engine_ = std::make_unique<Engine>(redis().url());
    ASSERT_EQ(kw_engine_add_handler(engine_->get(), nullptr, &EventSink::handler, &sink_, nullptr),
              KW_OK);
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    writer_ = client();
    ASSERT_EQ(writer_->command({"SET", "plain", "v"}), "OK");
    ASSERT_EQ(writer_->command({"DEL", "plain"}), "1");
    ASSERT_TRUE(set_and_expire(*writer_, "default:1"));
    ASSERT_TRUE(sink_.wait_for("expired", "default:1", 0)) << sink_.describe();
    for (const auto &e : sink_.events()) EXPECT_EQ(e.name, "expired") << printable(e.key);
}

TEST_F(Delivery, EventCarriesDbNodeSourceAttemptAndTimestamp) {
    start_watching("set");
    int64_t before = wall_ms();
    ASSERT_EQ(writer_->command({"SET", "meta", "v"}), "OK");
    ASSERT_TRUE(sink_.wait_for("set", "meta")) << sink_.describe();
    int64_t after = wall_ms();
    Event e = sink_.events().front();
    EXPECT_EQ(e.db, 0);
    EXPECT_EQ(e.node, "127.0.0.1:" + std::to_string(redis().port()));
    EXPECT_EQ(e.source, KW_SOURCE_NOTIFICATION);
    EXPECT_EQ(e.attempt, 1);
    EXPECT_FALSE(e.has_value);
    EXPECT_GE(e.ts_ms, before - 1000);  // local clock; allow for coarse clocks
    EXPECT_LE(e.ts_ms, after + 1000);
    EXPECT_FALSE(e.id.empty());
}

TEST_F(Delivery, EventIdIsStableForSameKeyAndDistinctOtherwise) {
    start_watching("set");
    ASSERT_EQ(writer_->command({"SET", "same", "1"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "same", "2"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "other", "1"}), "OK");
    ASSERT_EQ(writer_->command({"SELECT", "1"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "same", "3"}), "OK");
    ASSERT_TRUE(sink_.wait_count(4)) << sink_.describe();
    std::vector<std::string> same0, other0, same1;
    for (const auto &e : sink_.events()) {
        if (e.key == "same" && e.db == 0) same0.push_back(e.id);
        if (e.key == "other") other0.push_back(e.id);
        if (e.key == "same" && e.db == 1) same1.push_back(e.id);
    }
    ASSERT_EQ(same0.size(), 2u);
    ASSERT_EQ(other0.size(), 1u);
    ASSERT_EQ(same1.size(), 1u);
    EXPECT_EQ(same0[0], same0[1]);
    EXPECT_NE(same0[0], other0[0]);
    EXPECT_NE(same0[0], same1[0]) << "the same key in another db is another item";
}

TEST_F(Delivery, BinaryKeysArriveByteExact) {
    std::string big(512 * 1024, '\0');
    for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 131 % 256);
    const std::vector<std::string> keys = {
        "nul\0in\0the\0middle"s,
        "\0"s,
        "line one\nline two\r\n",
        "a:b:c::__:d",
        "__keyevent@0__:expired",
        "with spaces  ",
        "ключ:日本語:🔑",
        "\xff\xfe\x80 not utf-8",
        big,
    };
    start_watching("set");
    for (const auto &k : keys) ASSERT_EQ(writer_->command({"SET", k, "v"}), "OK") << printable(k);
    for (const auto &k : keys)
        EXPECT_TRUE(sink_.wait_for("set", k, 0)) << "missing key " << printable(k) << "\n"
                                                 << sink_.describe();
    for (const auto &e : sink_.events())
        EXPECT_NE(std::find(keys.begin(), keys.end(), e.key), keys.end())
            << "unexpected key " << printable(e.key) << " (" << e.key.size() << " bytes)";
    EXPECT_EQ(sink_.size(), keys.size());
}

TEST_F(Delivery, EmptyKeyIsDelivered) {
    start_watching("set");
    ASSERT_EQ(writer_->command({"SET", "", "v"}), "OK");
    EXPECT_TRUE(sink_.wait_for("set", "", 0)) << sink_.describe();
}

TEST_F(Delivery, CountsReceivedAndDeliveredEvents) {
    start_watching("set,del");
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(writer_->command({"SET", "n" + std::to_string(i), "v"}), "OK");
    ASSERT_EQ(writer_->command({"DEL", "n0"}), "1");
    ASSERT_TRUE(sink_.wait_count(4)) << sink_.describe();
    EXPECT_TRUE(engine_->stat_reaches("events.delivered", 4));
    EXPECT_TRUE(engine_->stat_reaches("events.received", 4));
    EXPECT_TRUE(engine_->stat_reaches("events.received.set", 3));
    EXPECT_TRUE(engine_->stat_reaches("events.received.del", 1));
    EXPECT_TRUE(engine_->stat_reaches("events.received.expired", 0));
    EXPECT_TRUE(engine_->stat_reaches("events.dropped", 0));
    EXPECT_TRUE(engine_->stat_reaches("handler.errors", 0));
}

TEST_F(Delivery, RetryAndRejectResultsAreCountedAsHandlerErrors) {
    sink_.decide = [](const Event &e) {
        if (e.key.rfind("retry:", 0) == 0) return static_cast<int>(KW_RESULT_RETRY);
        if (e.key.rfind("reject:", 0) == 0) return static_cast<int>(KW_RESULT_REJECT);
        if (e.key.rfind("bogus:", 0) == 0) return 99;  // not a kw_result
        return static_cast<int>(KW_RESULT_ACK);
    };
    start_watching("set");
    ASSERT_EQ(writer_->command({"SET", "retry:1", "v"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "reject:1", "v"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "bogus:1", "v"}), "OK");
    ASSERT_EQ(writer_->command({"SET", "ack:1", "v"}), "OK");
    ASSERT_TRUE(sink_.wait_for("set", "ack:1")) << sink_.describe();
    ASSERT_TRUE(sink_.wait_for("set", "retry:1")) << sink_.describe();
    ASSERT_TRUE(sink_.wait_for("set", "reject:1")) << sink_.describe();
    ASSERT_TRUE(sink_.wait_for("set", "bogus:1")) << sink_.describe();
    int64_t retries = 0;
    EXPECT_TRUE(engine_->stat_reaches("handler.retries", at_least(1), &retries));
    // The REJECT and the unknown code are errors but not retries.
    EXPECT_TRUE(engine_->stat_reaches("handler.errors", at_least(retries + 2)));
}

TEST_F(Delivery, ThrowingHandlerIsCountedAndDeliveryContinues) {
    // A C++ handler that throws: the exception must stay inside the engine, count as a
    // handler error, and not stop later deliveries.
    sink_.hook = [](const Event &e) {
        if (e.key == "throws") throw std::runtime_error("handler failure");
    };
    start_watching("set");
    ASSERT_EQ(writer_->command({"SET", "throws", "v"}), "OK");
    EXPECT_TRUE(engine_->stat_reaches("handler.errors", at_least(1)));
    ASSERT_EQ(writer_->command({"SET", "fine", "v"}), "OK");
    EXPECT_TRUE(sink_.wait_for("set", "fine")) << sink_.describe();
    EXPECT_TRUE(engine_->stat_reaches("conn.state", KW_CONN_READY));
}

TEST_F(Delivery, EveryMatchingHandlerReceivesTheEvent) {
    EventSink first, second, unrelated;
    Engine engine(redis().url());  // declared after the sinks: freed first
    engine.add(&first, {{"events", "set"}});
    engine.add(&second, {{"events", "set,del"}});
    engine.add(&unrelated, {{"events", "del"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    writer_ = client();
    ASSERT_EQ(writer_->command({"SET", "shared", "v"}), "OK");
    EXPECT_TRUE(first.wait_for("set", "shared")) << first.describe();
    EXPECT_TRUE(second.wait_for("set", "shared")) << second.describe();
    ASSERT_EQ(writer_->command({"DEL", "shared"}), "1");
    EXPECT_TRUE(unrelated.wait_for("del", "shared")) << unrelated.describe();
    EXPECT_TRUE(second.wait_for("del", "shared")) << second.describe();
    EXPECT_EQ(unrelated.count("set", "shared"), 0u);
    EXPECT_EQ(first.count("del", "shared"), 0u);
}

TEST_F(Delivery, ManyEventsAreAllDeliveredOnce) {
    start_watching("set");
    const int n = 2000;
    for (int i = 0; i < n; i++)
        ASSERT_EQ(writer_->command({"SET", "bulk:" + std::to_string(i), "v"}), "OK");
    ASSERT_TRUE(sink_.wait_count(n, milliseconds(30000))) << "got " << sink_.size() << " of " << n;
    std::vector<int> seen(n, 0);
    for (const auto &e : sink_.events()) seen[std::stoi(e.key.substr(5))]++;
    for (int i = 0; i < n; i++) EXPECT_EQ(seen[i], 1) << "bulk:" << i;
}

}  // namespace
}  // namespace kwtest
