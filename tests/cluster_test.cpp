// Redis Cluster fan-out against a real 3-master, 3-replica cluster on loopback: events of
// keys on every master, a master killed with kill -9 and its replica promoted, a manual
// CLUSTER FAILOVER, and a watcher started while a master is down.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/client/client.h"
#include "core/plugins/plugin_host.h"
#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/redis/slots.h"
#include "cluster_support.h"
#include "redis_fixture.h"
#include "tests/support/redis_cluster.h"
#include "worker_process.h"

namespace kwtest {
namespace {

using keywatch::RedisCluster;

// The count of each key among the events.
std::map<std::string, int> tally(const EventSink &sink) {
    std::map<std::string, int> seen;
    for (auto &ev : sink.events()) seen[ev.key]++;
    return seen;
}

class ClusterTest : public ::testing::Test {
  protected:
    virtual RedisCluster::Options cluster_options() { return {}; }
    void SetUp() override {
        cluster_ = std::make_unique<RedisCluster>(cluster_options());
        cluster_->start();
    }
    void TearDown() override { cluster_.reset(); }

    std::string key_on(size_t index, const std::string &prefix) {
        return kwtest::key_on(*cluster_, index, prefix);
    }
    // One key per master, in the order of masters().
    std::vector<std::string> keys_on_masters(const std::string &prefix) {
        std::vector<std::string> keys;
        for (size_t m : cluster_->masters()) keys.push_back(key_on(m, prefix));
        return keys;
    }
    // A configuration with the cluster's seed.
    keywatch::Config seed_config() {
        keywatch::Config conf;
        std::string err;
        EXPECT_EQ(conf.set("redis.url", cluster_->seed_url(), &err), KW_OK) << err;
        return conf;
    }
    void expire_on_owner(const std::string &key) { kwtest::expire_on_owner(*cluster_, key); }
    // Which keys of a slot MIGRATE moves first (redis-cli moves them in batches of
    // GETKEYSINSLOT, in whatever order the node lists them).
    enum class Order { AsListed, TrackedKeysFirst, QueueFirst };

    // Moves `slot` with every key in it to another master (RedisCluster::migrate_slot),
    // running `before_handover` between the last MIGRATE and SETSLOT NODE; returns the new
    // owner's index.
    size_t migrate_slot(int slot, Order order = Order::AsListed,
                        const std::function<void()> &before_handover = {}) {
        size_t from = static_cast<size_t>(cluster_->master_of_slot(slot));
        size_t to = 0;
        for (size_t m : cluster_->masters())
            if (m != from) to = m;
        std::function<bool(const std::string &)> first;
        if (order == Order::TrackedKeysFirst)
            first = [](const std::string &k) { return k.rfind("kw:", 0) != 0; };
        else if (order == Order::QueueFirst)
            first = [](const std::string &k) { return k.rfind("kw:", 0) == 0; };
        cluster_->migrate_slot(slot, to, first, before_handover);
        // Read from the first node that answers, which may be a replica that learns the new
        // owner by gossip a moment after the masters' SETSLOT NODE.
        EXPECT_TRUE(
            wait_until([&] { return cluster_->master_of_slot(slot) == static_cast<int>(to); },
                       milliseconds(10000)))
            << "slot " << slot << " is at node " << cluster_->master_of_slot(slot);
        return to;
    }

    // An engine delivering `expired` to sink, with `settings` (kw_engine_new copies the
    // configuration: what is set after add() does nothing).
    std::unique_ptr<Engine> engine(
        EventSink *sink, const std::vector<std::pair<std::string, std::string>> &settings = {}) {
        auto e = std::make_unique<Engine>(cluster_->seed_url());
        e->set("cluster.refresh", "500ms");
        for (auto &nv : settings) e->set(nv.first, nv.second);
        e->add(sink, {{"events", "expired"}});
        return e;
    }

    // How a migration goes in expect_arrived_queue_swept_by_new_owner.
    struct Migration {
        Order order = Order::AsListed;
        milliseconds stall{1000};     // between the last MIGRATE and SETSLOT NODE
        std::string wait;             // cluster.migration_wait, if set
        bool start_in_stall = false;  // the watcher starts between MIGRATE and SETSLOT NODE
    };

    // A slot queue that migrates in is swept by its new master at its deadline, whatever
    // order MIGRATE moves the queue and the tracked keys in, however long the migration
    // stalls, and when the watcher started in the middle of it. No help from elsewhere:
    // Redis's own expiry is off and the periodic scan is 10 minutes away, so a delivery
    // proves the new owner swept the queue that arrived (it used to hear `restore` while
    // the slot was still importing, get MOVED and forget the queue until the next scan).
    void expect_arrived_queue_swept_by_new_owner(const std::string &tag, const Migration &m) {
        for (size_t i = 0; i < cluster_->size(); i++) {
            if (!cluster_->node(i).running()) continue;
            ASSERT_EQ(cluster_->node(i).command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
        }
        EventSink sink;
        std::vector<std::pair<std::string, std::string>> settings = {
            {"sweep.scan_interval", "10m"}};
        if (!m.wait.empty()) settings.emplace_back("cluster.migration_wait", m.wait);
        auto e = engine(&sink, settings);
        if (!m.start_in_stall) {
            ASSERT_EQ(e->start(), KW_OK) << e->last_error();
        }
        ClusterClient c(cluster_->seed_url());
        std::vector<std::string> keys;
        for (int i = 0; i < 10; i++) keys.push_back("{" + tag + "}:" + std::to_string(i));
        // Due 2 s after the handover.
        c.track_all(keys, m.stall.count() + 2000);
        // The new owner hears `restore` (or, started late, finds the queue by its scan)
        // while the slot is still importing.
        int started = KW_OK;
        size_t to = migrate_slot(keywatch::key_slot(keys[0]), m.order, [&] {
            if (m.start_in_stall) started = e->start();
            std::this_thread::sleep_for(m.stall);
        });
        ASSERT_EQ(started, KW_OK) << e->last_error();
        std::string dst_node = "127.0.0.1:" + std::to_string(cluster_->node(to).port());
        ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(20000))) << sink.describe();
        std::this_thread::sleep_for(milliseconds(500));
        auto seen = tally(sink);
        EXPECT_EQ(seen.size(), keys.size());
        for (auto &kv : seen) EXPECT_EQ(kv.second, 1) << kv.first;
        // By its sweep, or by the `expired` that the sweep's look at the gone key made Redis
        // publish (whichever claims first): either way the new owner's work.
        for (auto &ev : sink.events()) EXPECT_EQ(ev.node, dst_node) << "the new owner delivers";
    }

    std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(ClusterTest, EventsFromKeysOnEveryMasterArrive) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3));
    std::set<std::string> nodes;
    for (size_t m : cluster_->masters()) {
        std::string key = key_on(m, "k" + std::to_string(m) + ":");
        expire_on_owner(key);
        ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
        for (auto &ev : sink.events())
            if (ev.key == key) nodes.insert(ev.node);
        EXPECT_TRUE(nodes.count("127.0.0.1:" + std::to_string(cluster_->node(m).port())));
    }
    EXPECT_EQ(nodes.size(), 3u) << "each master's events came from that master";
}

TEST_F(ClusterTest, MasterKilledWithKill9IsReplacedByItsPromotedReplica) {
    EventSink sink;
    StateLog states;
    auto e = engine(&sink);
    e->watch_states(&states);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    int slot = 1000;
    int old_master = cluster_->master_of_slot(slot);
    ASSERT_GE(old_master, 0);
    cluster_->node(static_cast<size_t>(old_master)).kill9();
    ASSERT_TRUE(cluster_->wait_healthy(30000)) << "the replica was not promoted";
    int new_master = cluster_->master_of_slot(slot);
    ASSERT_GE(new_master, 0);
    ASSERT_NE(new_master, old_master);
    std::string new_node =
        "127.0.0.1:" + std::to_string(cluster_->node(static_cast<size_t>(new_master)).port());
    // The engine notices the lost master and subscribes the promoted replica.
    ASSERT_TRUE(states.reached(new_node, KW_CONN_READY, milliseconds(20000))) << states.describe();
    std::string key = key_on(static_cast<size_t>(new_master), "after-failover:");
    expire_on_owner(key);
    ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
    EXPECT_EQ(sink.events().back().node, new_node);
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3))
        << "the dead master is dropped, not kept alongside";
}

// The node.* samples of a snapshot: per node label, row name -> value.
std::map<std::string, std::map<std::string, int64_t>> node_samples(kw_engine_t *e) {
    std::map<std::string, std::map<std::string, int64_t>> out;
    kw_stats_t *s = nullptr;
    EXPECT_EQ(kw_engine_stats(e, &s), KW_OK);
    for (size_t i = 0; i < kw_stats_count(s); i++)
        if (std::string(kw_stats_label_name(s, i)) == "node")
            out[kw_stats_label_value(s, i)][kw_stats_name(s, i)] = kw_stats_value(s, i);
    kw_stats_free(s);
    return out;
}

// What a readiness check sees: every node listed READY and sweeping, as many as
// conn.nodes says, and they are exactly `masters`. One look: poll it with wait_until.
bool all_ready_and_sweeping(Engine &e, const std::set<std::string> &masters) {
    auto nodes = node_samples(e.get());
    std::set<std::string> listed;
    for (auto &kv : nodes) {
        listed.insert(kv.first);
        if (kv.second["node.state.<node>"] != KW_CONN_READY) return false;
        if (kv.second["node.sweeping.<node>"] != 1) return false;
    }
    const milliseconds once(0);
    return listed == masters &&
           e.stat_reaches("conn.nodes", static_cast<int64_t>(masters.size()), nullptr, once) &&
           e.stat_reaches("conn.state", KW_CONN_READY, nullptr, once);
}

TEST_F(ClusterTest, NodeSamplesFollowTheTopologyAcrossAFailover) {
    EventSink sink;
    FieldsLog log;
    auto e = engine(&sink);  // tracked keys: every master has a sweeper
    e->watch_log_fields(&log);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    auto endpoints = [&] {
        std::set<std::string> out;
        for (size_t m : cluster_->masters())
            out.insert("127.0.0.1:" + std::to_string(cluster_->node(m).port()));
        return out;
    };
    const std::set<std::string> before = endpoints();
    ASSERT_EQ(before.size(), 3u);
    ASSERT_TRUE(wait_until([&] { return all_ready_and_sweeping(*e, before); }))
        << node_samples(e->get()).size() << " nodes listed";
    for (auto &kv : node_samples(e->get())) {
        EXPECT_EQ(kv.second.count("node.received.<node>"), 1u) << kv.first;
        EXPECT_EQ(kv.second.count("node.reconnects.<node>"), 1u) << kv.first;
    }
    // Every refresh reads the topology (cluster.refresh is 500ms).
    ASSERT_TRUE(e->stat_reaches("topology.refreshes", at_least(1)));

    int victim = cluster_->master_of_slot(1000);
    ASSERT_GE(victim, 0);
    const std::string dead =
        "127.0.0.1:" + std::to_string(cluster_->node(static_cast<size_t>(victim)).port());
    cluster_->node(static_cast<size_t>(victim)).kill9();
    // Not ready while the master is gone: its node is not READY (or no longer sweeping).
    ASSERT_TRUE(wait_until([&] {
        auto nodes = node_samples(e->get());
        auto it = nodes.find(dead);
        return it != nodes.end() && (it->second["node.state.<node>"] != KW_CONN_READY ||
                                     it->second["node.sweeping.<node>"] != 1);
    })) << "the killed master still looks ready";
    EXPECT_FALSE(all_ready_and_sweeping(*e, before));
    int64_t refreshes = 0;
    ASSERT_TRUE(e->stat_reaches("topology.refreshes", at_least(1), &refreshes));
    ASSERT_TRUE(cluster_->wait_healthy(30000)) << "the replica was not promoted";
    const std::set<std::string> after = endpoints();
    ASSERT_EQ(after.size(), 3u);
    ASSERT_EQ(after.count(dead), 0u);
    // The promoted replica is listed, READY and sweeping; the dead master's samples are gone.
    ASSERT_TRUE(wait_until([&] { return all_ready_and_sweeping(*e, after); }, milliseconds(20000)))
        << node_samples(e->get()).size() << " nodes listed, "
        << e->stats_text({"conn.nodes", "conn.state"});
    EXPECT_EQ(node_samples(e->get()).count(dead), 0u);
    EXPECT_TRUE(e->stat_reaches("node.state." + dead, 0)) << "a node not listed reads 0";
    EXPECT_TRUE(e->stat_reaches("topology.refreshes", at_least(refreshes + 1)));
    // The cluster's lines about one master name it.
    FieldsLog::Line dropped, added;
    ASSERT_TRUE(log.find("no longer serves slots as a master", &dropped)) << log.describe();
    EXPECT_EQ(dropped.fields["node"], dead);
    ASSERT_TRUE(log.find("subscribing to new master", &added)) << log.describe();
    EXPECT_EQ(after.count(added.fields["node"]), 1u) << added.fields["node"];
    FieldsLog::Line lost;
    ASSERT_TRUE(log.find("reconnecting in", &lost)) << log.describe();
    EXPECT_EQ(lost.fields["node"], dead) << lost.message;
    // And it delivers from the new master.
    std::string key = key_on(static_cast<size_t>(cluster_->master_of_slot(1000)), "ready:");
    expire_on_owner(key);
    ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
}

TEST_F(ClusterTest, ManualFailoverMovesTheSubscriptionToTheNewMaster) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    int slot = 9000;
    int old_master = cluster_->master_of_slot(slot);
    // Its replica: the node whose INFO replication names the old master's port.
    int replica = -1;
    for (size_t i = 0; i < cluster_->size(); i++) {
        std::string info = cluster_->node(i).command({"INFO", "replication"});
        if (info.find("master_port:" +
                      std::to_string(cluster_->node(static_cast<size_t>(old_master)).port())) !=
            std::string::npos)
            replica = static_cast<int>(i);
    }
    ASSERT_GE(replica, 0);
    ASSERT_TRUE(wait_until([&] {
        return cluster_->node(static_cast<size_t>(replica))
                   .command({"INFO", "replication"})
                   .find("master_link_status:up") != std::string::npos;
    }));
    ASSERT_EQ(cluster_->node(static_cast<size_t>(replica)).command({"CLUSTER", "FAILOVER"}), "OK");
    ASSERT_TRUE(
        wait_until([&] { return cluster_->master_of_slot(slot) == replica; }, milliseconds(20000)));
    std::string new_node =
        "127.0.0.1:" + std::to_string(cluster_->node(static_cast<size_t>(replica)).port());
    // After the refresh the engine hears the new master; the demoted one (still up, now a
    // replica publishing only `del`) is dropped.
    std::string key = key_on(static_cast<size_t>(replica), "manual:");
    ASSERT_TRUE(wait_until(
        [&] {
            expire_on_owner(key);
            return sink.wait_for("expired", key, -1, milliseconds(300));
        },
        milliseconds(20000)))
        << sink.describe();
    EXPECT_EQ(sink.events().back().node, new_node);
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3));
}

TEST_F(ClusterTest, WatcherStartedWhileAMasterIsDownWorksOnTheRestAndCatchesUp) {
    // Take one master and its replica down, so its slots have no master for a while.
    int slot = 15000;
    size_t down = static_cast<size_t>(cluster_->master_of_slot(slot));
    int down_port = cluster_->node(down).port();
    std::vector<size_t> replicas;
    for (size_t i = 0; i < cluster_->size(); i++)
        if (cluster_->node(i)
                .command({"INFO", "replication"})
                .find("master_port:" + std::to_string(down_port)) != std::string::npos)
            replicas.push_back(i);
    for (size_t r : replicas) cluster_->node(r).stop();
    cluster_->node(down).stop();

    EventSink sink;
    LogSink logs;
    auto e = engine(&sink, {{"redis.connect_timeout", "1s"}});
    e->watch_logs(&logs);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    EXPECT_FALSE(
        logs.find(KW_LOG_WARN,
                  [&](const std::string &m) { return contains(m, std::to_string(down_port)); })
            .empty())
        << logs.describe();
    size_t up = cluster_->masters().at(0);
    std::string key = key_on(up, "alive:");
    expire_on_owner(key);
    ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();

    cluster_->node(down).start();  // same port and nodes.conf: it comes back as the master
    for (size_t r : replicas) cluster_->node(r).start();
    ASSERT_TRUE(cluster_->wait_healthy(30000));
    std::string back = key_on(static_cast<size_t>(cluster_->master_of_slot(slot)), "back:");
    ASSERT_TRUE(wait_until(
        [&] {
            expire_on_owner(back);
            return sink.wait_for("expired", back, -1, milliseconds(300));
        },
        milliseconds(20000)))
        << sink.describe();
}

// Issue 10 item 6: a watcher started while every node is down waits for the cluster
// (redis.connect_timeout) instead of failing on the first refused connection.
TEST_F(ClusterTest, StartWaitsForAClusterThatComesUpWithinTheConnectTimeout) {
    const std::string seed = cluster_->seed_url();
    const auto masters = cluster_->masters();
    std::vector<size_t> replicas;
    for (size_t i = 0; i < cluster_->size(); i++)
        if (std::find(masters.begin(), masters.end(), i) == masters.end()) replicas.push_back(i);
    // Replicas first, so that none of them takes over a master being stopped.
    for (size_t r : replicas) cluster_->node(r).stop();
    for (size_t m : masters) cluster_->node(m).stop();

    EventSink sink;
    auto e = std::make_unique<Engine>(seed);  // engine() asks for a running node's URL
    e->set("cluster.refresh", "500ms");
    e->set("redis.connect_timeout", "20s");
    e->add(&sink, {{"events", "expired"}});
    std::atomic<int> rc{-1000};
    std::thread starter([&] { rc = e->start(); });
    std::this_thread::sleep_for(milliseconds(3000));
    EXPECT_EQ(rc.load(), -1000) << "start gave up while the cluster was down: "
                                << kw_err_name(rc.load()) << ": " << e->last_error();
    std::string restart_error;
    try {
        for (size_t m : masters) cluster_->node(m).start();
        for (size_t r : replicas) cluster_->node(r).start();
    } catch (const std::exception &ex) {
        restart_error = ex.what();  // the starter still ends: at its connect timeout
    }
    starter.join();
    ASSERT_EQ(restart_error, "") << "a node did not start again";
    ASSERT_EQ(rc.load(), KW_OK) << kw_err_name(rc.load()) << ": " << e->last_error();
    ASSERT_TRUE(cluster_->wait_healthy(30000));
    for (size_t m : cluster_->masters()) {
        std::string key = key_on(m, "up" + std::to_string(m) + ":");
        ASSERT_TRUE(wait_until(
            [&] {
                expire_on_owner(key);
                return sink.wait_for("expired", key, -1, milliseconds(300));
            },
            milliseconds(30000)))
            << sink.describe();
    }
}

// Issue 20 item 15: every node of the cluster killed at once and restarted a few seconds
// later (AOF: the queues survive). Each master's connections come back as soon as the
// topology refresh reaches the restarted node, not after their own backoff (reconnect.min
// of 30 s stands in for one grown to seconds during an outage: without the fix they would
// be back 15 to 30 s after the kill), so keys due after the cluster is ok again are
// delivered on time. Lateness goes to the log, not into an assertion.
class ClusterRestartTest : public ClusterTest {
  protected:
    RedisCluster::Options cluster_options() override {
        RedisCluster::Options o;
        o.appendonly = true;
        return o;
    }
};

TEST_F(ClusterRestartTest, AfterTheWholeClusterRestartsEveryMasterIsBackAtOnce) {
    EventSink sink;
    auto e = std::make_unique<Engine>(cluster_->seed_url());
    e->set("cluster.refresh", "500ms");
    e->set("reconnect.min", "30s");
    e->set("reconnect.max", "60s");
    e->add(&sink, {{"events", "expired"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    // Due while the cluster is down or settling, and after: every one is delivered once.
    std::vector<std::string> before;
    for (size_t m : cluster_->masters())
        for (int i = 0; i < 4; i++) before.push_back(key_on(m, "before" + std::to_string(i) + ":"));
    for (size_t i = 0; i < before.size(); i++)
        ASSERT_EQ(kw_client_track(c.get(), before[i].data(), before[i].size(), "v", 1,
                                  4000 + 1500 * static_cast<int64_t>(i), 0, nullptr),
                  KW_OK)
            << c.error();
    const auto killed = Clock::now();
    for (size_t i = 0; i < cluster_->size(); i++) cluster_->node(i).kill9();
    std::this_thread::sleep_for(milliseconds(3000));
    for (size_t i = 0; i < cluster_->size(); i++) cluster_->node(i).start();
    ASSERT_TRUE(cluster_->wait_healthy(30000));
    const auto ok = Clock::now();
    // Keys tracked once the cluster is ok, on every master, due 1 s later.
    ClusterClient after_client(cluster_->seed_url());
    std::vector<std::string> after;
    for (size_t m : cluster_->masters()) after.push_back(key_on(m, "after:"));
    for (auto &k : after)
        ASSERT_EQ(kw_client_track(after_client.get(), k.data(), k.size(), "v", 1, 1000, 0, nullptr),
                  KW_OK)
            << after_client.error();
    // Delivered within 5 s of their deadline, whatever the build: the masters' connections
    // are back by then (without the fix they come back 15 to 30 s after the kill).
    for (auto &k : after)
        EXPECT_TRUE(sink.wait_for("expired", k, -1, milliseconds(6000)))
            << k << " not delivered within 5 s of its deadline\n"
            << sink.describe();
    ASSERT_TRUE(sink.wait_count(before.size() + after.size(), milliseconds(30000)))
        << sink.describe();
    auto seen = tally(sink);
    for (auto &k : before) EXPECT_EQ(seen[k], 1) << k;
    for (auto &k : after) EXPECT_EQ(seen[k], 1) << k;
    int64_t worst_after = 0, worst_before_ok = 0;
    const int64_t ok_ms =
        wall_ms() - std::chrono::duration_cast<milliseconds>(Clock::now() - ok).count();
    for (auto &ev : sink.events()) {
        const int64_t late = ev.ts_ms - ev.deadline_ms;
        if (ev.key.rfind("after:", 0) == 0)
            worst_after = std::max(worst_after, late);
        else if (ev.deadline_ms > ok_ms)
            worst_before_ok = std::max(worst_before_ok, late);
    }
    std::cerr << "cluster restart: ok "
              << std::chrono::duration_cast<milliseconds>(ok - killed).count()
              << " ms after the kill; lateness of keys due after ok: tracked after " << worst_after
              << " ms, tracked before " << worst_before_ok << " ms\n";
}

// Issue 20 item 15: a master whose cluster is down answers CLUSTERDOWN to every key; the
// queues whose claims met that are swept the moment it is ok again (it is asked every
// 100 ms), not at their backed-off retry. The cluster goes down on one master at a chosen
// moment (cluster-require-full-coverage yes, one of its slots deleted there) and comes back
// 3.5 s after the first refused claim, when backed-off retries come 3.1 and 6.3 s after it.
TEST_F(ClusterTest, QueuesRefusedWhileTheClusterIsDownAreSweptTheMomentItIsOkAgain) {
    const size_t m = cluster_->masters().at(0);
    auto &node = cluster_->node(m);
    const std::string key = key_on(m, "down:");
    const std::string other = key_on(m, "other:");
    ASSERT_NE(keywatch::key_slot(key), keywatch::key_slot(other));
    const std::string slot = std::to_string(keywatch::key_slot(other));
    // Only the sweep can deliver the key: Redis's own expiry would publish `expired`.
    ASSERT_EQ(node.command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    ASSERT_EQ(node.command({"CONFIG", "SET", "cluster-require-full-coverage", "yes"}), "OK");
    EventSink sink;
    LogSink logs;
    auto e = std::make_unique<Engine>(cluster_->seed_url());
    e->set("reconnect.max", "10s");  // the default: failing claims back off up to it
    e->add(&sink, {{"events", "expired"}});
    e->watch_logs(&logs);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    ASSERT_EQ(kw_client_track(c.get(), key.data(), key.size(), "v", 1, 1500, 0, nullptr), KW_OK)
        << c.error();
    ASSERT_EQ(node.command({"CLUSTER", "DELSLOTS", slot}), "OK");
    ASSERT_TRUE(wait_until(
        [&] {
            return !logs.find(KW_LOG_WARN,
                              [](const std::string &m) { return contains(m, "CLUSTERDOWN"); })
                        .empty();
        },
        milliseconds(15000)))
        << logs.describe();
    std::this_thread::sleep_for(milliseconds(3500));
    ASSERT_EQ(node.command({"CLUSTER", "ADDSLOTS", slot}), "OK");
    EXPECT_TRUE(sink.wait_for("expired", key, -1, milliseconds(1500)))
        << "not delivered within 1.5 s of the cluster being ok again\n"
        << logs.describe();
    EXPECT_TRUE(sink.wait_for("expired", key, -1, milliseconds(20000))) << sink.describe();
}

// A keywatch client on the cluster (routes each call to its slot's master).

TEST_F(ClusterTest, TrackedKeysOnEveryMasterAreDeliveredOnceBySlotLocalQueues) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    auto keys = many_keys("tracked:", 600);
    c.track_all(keys, 300);
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(20000))) << sink.size();
    std::this_thread::sleep_for(milliseconds(500));
    auto seen = tally(sink);
    EXPECT_EQ(seen.size(), keys.size());
    for (auto &kv : seen) EXPECT_EQ(kv.second, 1) << kv.first;
    std::set<std::string> nodes;
    for (auto &ev : sink.events()) {
        EXPECT_EQ(ev.source == KW_SOURCE_SWEEP || ev.source == KW_SOURCE_NOTIFICATION, true);
        nodes.insert(ev.node);
    }
    EXPECT_EQ(nodes.size(), 3u) << "every master's sweeper delivered its own slots";
    // The queues are empty again, on every master.
    std::string json = c.inspect();
    EXPECT_TRUE(contains(json, "\"mode\":\"cluster\"")) << json;
    EXPECT_TRUE(contains(json, "\"queue\":\"keys\"")) << json;
    EXPECT_TRUE(wait_until([&] {
        std::string j = c.inspect();
        return contains(
            j,
            "\"due\":0,\"due_now\":0,\"inflight\":0,\"oldest_overdue_ms\":-1,\"queue\":\"keys\"");
    })) << c.inspect();
}

// A cluster whose nodes announce ::1 (CLUSTER SHARDS and MOVED name them unbracketed):
// the fan-out names each master "[::1]:PORT" as the seed URL does, so every master keeps
// its subscriber and sweeper across refreshes, and the sweepers alone (Redis's own expiry
// off) deliver every tracked key once. Two spellings of one node used to index no sweeper
// (claims unrouted) and drop and re-add every master at each refresh.
class ClusterIpv6Test : public ClusterTest {
  protected:
    RedisCluster::Options cluster_options() override {
        RedisCluster::Options o;
        o.replicas_per_master = 0;
        o.host = "::1";
        return o;
    }
};

TEST_F(ClusterIpv6Test, ClusterAnnouncingIpv6DeliversTrackedKeys) {
    ASSERT_EQ(cluster_->seed_url().rfind("redis://[::1]:", 0), 0u) << cluster_->seed_url();
    std::set<std::string> masters;
    for (size_t i = 0; i < cluster_->size(); i++) {
        ASSERT_EQ(cluster_->node(i).command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
        masters.insert("[::1]:" + std::to_string(cluster_->node(i).port()));
    }
    EventSink sink;
    LogSink logs;
    auto e = engine(&sink, {{"sweep.scan_interval", "10m"}});
    e->watch_logs(&logs);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3));
    ClusterClient c(cluster_->seed_url());
    auto keys = many_keys("v6:", 60);
    c.track_all(keys, 2000);
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(20000)))
        << sink.describe() << logs.describe();
    // Two more refreshes after the last delivery: a master dropped by one would show.
    int64_t refreshes = 0;
    ASSERT_TRUE(e->stat_reaches("topology.refreshes", {StatWant::Op::AtLeast, 1}, &refreshes));
    EXPECT_TRUE(e->stat_reaches("topology.refreshes", {StatWant::Op::AtLeast, refreshes + 2}));
    auto seen = tally(sink);
    EXPECT_EQ(seen.size(), keys.size());
    for (auto &kv : seen) EXPECT_EQ(kv.second, 1) << kv.first;
    std::set<std::string> nodes;
    for (auto &ev : sink.events()) nodes.insert(ev.node);
    EXPECT_EQ(nodes, masters) << "each master's sweeper delivered its slots, named [::1]:PORT";
    EXPECT_EQ(
        logs.find(KW_LOG_DEBUG,
                  [](const std::string &m) { return contains(m, "dropping its subscriber"); }),
        "")
        << logs.describe();
    EXPECT_TRUE(e->stat_reaches("events.unrouted", 0)) << logs.describe();
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3));
}

// A TTL shortened outside keywatch on each master: the slot queue's live claim on that
// master finds the key gone although its score is an hour ahead, and claims it now.
TEST_F(ClusterTest, TtlShortenedOutsideKeywatchIsDeliveredWhenTheKeyExpires) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    std::vector<std::string> keys;
    for (size_t m : cluster_->masters())
        keys.push_back(key_on(m, "shortened" + std::to_string(m) + ":"));
    c.track_all(keys, 3600 * 1000);
    for (auto &key : keys) {
        auto &owner =
            cluster_->node(static_cast<size_t>(cluster_->master_of_slot(keywatch::key_slot(key))));
        ASSERT_EQ(owner.command({"PEXPIRE", key, "1000"}), "1");
    }
    for (auto &key : keys) {
        auto &owner =
            cluster_->node(static_cast<size_t>(cluster_->master_of_slot(keywatch::key_slot(key))));
        // Touching the overdue key makes its master delete it and publish `expired`.
        ASSERT_TRUE(wait_until(
            [&] {
                return owner.command({"EXISTS", key}) == "0";
            },
            milliseconds(30000)));
        ASSERT_TRUE(sink.wait_for("expired", key, -1, milliseconds(30000))) << sink.describe();
    }
    int64_t soon = wall_ms() + 600 * 1000;
    for (auto &ev : sink.events()) {
        EXPECT_EQ(ev.attempt, 1) << ev.key;
        EXPECT_LT(ev.deadline_ms, soon) << ev.key << ": due when it expired, not in an hour";
        EXPECT_TRUE(contains(ev.id, "q:keys:" + std::to_string(ev.deadline_ms) + ":")) << ev.id;
    }
    EXPECT_TRUE(e->stat_reaches("items.acked", 3));
    EXPECT_EQ(sink.size(), 3u) << sink.describe();
}

TEST_F(ClusterTest, TasksRetriesAndDeadLettersWorkAcrossSlots) {
    EventSink sink;
    sink.decide = [](const Event &ev) {
        return ev.key.rfind("bad", 0) == 0 ? KW_RESULT_REJECT : KW_RESULT_ACK;
    };
    auto e = std::make_unique<Engine>(cluster_->seed_url());
    e->add(&sink, {{"events", "task"}, {"queue", "jobs"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    for (int i = 0; i < 50; i++) {
        std::string id = (i % 10 == 0 ? "bad" : "job") + std::to_string(i);
        ASSERT_EQ(
            kw_client_schedule(c.get(), "jobs", id.data(), id.size(), "p", 1, 0, 200, 0, nullptr),
            KW_OK)
            << c.error();
    }
    ASSERT_TRUE(sink.wait_count(50, milliseconds(20000))) << sink.size();
    ASSERT_TRUE(wait_until([&] { return contains(c.inspect(), "\"dead\":5,"); })) << c.inspect();
    char *dead = nullptr;
    ASSERT_EQ(kw_client_dead_list_json(c.get(), "jobs", 100, &dead), KW_OK) << c.error();
    ASSERT_NE(dead, nullptr) << c.error();
    std::string list = dead;
    kw_free(dead);
    for (int i = 0; i < 50; i += 10)
        EXPECT_TRUE(contains(list, "\"bad" + std::to_string(i) + "\""));
    EXPECT_TRUE(contains(list, "slot_tag")) << list;
    int64_t n = 0;
    ASSERT_EQ(kw_client_dead_purge(c.get(), "jobs", nullptr, &n), KW_OK) << c.error();
    EXPECT_EQ(n, 5);
}

TEST_F(ClusterTest, MasterKilledDuringAnExpiryBurstLosesNoTrackedKey) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    auto keys = many_keys("burst:", 3000);
    c.track_all(keys, 1500);
    // Replication is asynchronous: make sure the replicas have every write before the
    // crash (what is not replicated when a master dies is lost, by Redis' design).
    ASSERT_TRUE(cluster_->wait_replicated(10000));
    int victim = cluster_->master_of_slot(keywatch::key_slot(keys[0]));
    std::this_thread::sleep_for(milliseconds(1500));  // the burst is under way
    cluster_->node(static_cast<size_t>(victim)).kill9();
    ASSERT_TRUE(cluster_->wait_healthy(30000));
    ASSERT_TRUE(wait_until([&] { return tally(sink).size() >= keys.size(); }, milliseconds(60000)))
        << tally(sink).size() << " of " << keys.size();
    std::this_thread::sleep_for(milliseconds(1000));
    auto seen = tally(sink);
    int duplicates = 0;
    for (auto &kv : seen) duplicates += kv.second - 1;
    EXPECT_EQ(seen.size(), keys.size()) << "none lost";
    // A promoted replica may redeliver what its dead master handed out but could not
    // replicate the ack of: at-least-once. Reported, not hidden.
    std::cerr << "[ info ] duplicates after the failover: " << duplicates << " of " << keys.size()
              << "\n";
    RecordProperty("duplicates", duplicates);
}

TEST_F(ClusterTest, ReshardedSlotIsDeliveredByItsNewOwner) {
    EventSink sink;
    auto e = engine(&sink, {{"sweep.scan_interval", "1s"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    // Twenty keys in one slot (one hash tag).
    std::vector<std::string> keys;
    for (int i = 0; i < 20; i++) keys.push_back("{reshard}:" + std::to_string(i));
    int slot = keywatch::key_slot(keys[0]);
    c.track_all(keys, 4000);
    size_t to = migrate_slot(slot);
    std::string dst_node = "127.0.0.1:" + std::to_string(cluster_->node(to).port());
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(20000))) << sink.describe();
    auto seen = tally(sink);
    EXPECT_EQ(seen.size(), keys.size());
    for (auto &ev : sink.events()) EXPECT_EQ(ev.node, dst_node) << "the new owner delivers";
}

// Acks of items whose slot moved to another master while their handlers ran are refused
// with MOVED by the old owner; they go to the new owner while the lease lasts, so nothing
// is delivered twice (with the old code they were dropped and came back as attempt 2).
TEST_F(ClusterTest, AcksRefusedWithMovedAfterAReshardAreRoutedToTheNewOwner) {
    EventSink sink;
    std::vector<std::string> keys;
    for (int i = 0; i < 10; i++) keys.push_back("{ackmove}:" + std::to_string(i));
    const int slot = keywatch::key_slot(keys[0]);
    std::atomic<bool> moved{false};
    // The first handler moves the slot (items, queue and all) before it returns.
    sink.hook = [&](const Event &) {
        if (!moved.exchange(true)) migrate_slot(slot);
    };
    // A redelivery would show within the wait below.
    auto e = engine(&sink, {{"lease", "4s"}, {"sweep.scan_interval", "1s"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ClusterClient c(cluster_->seed_url());
    c.track_all(keys, 300);
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(20000))) << sink.describe();
    std::this_thread::sleep_for(milliseconds(8000));  // lease + scan: room for a redelivery
    auto seen = tally(sink);
    EXPECT_EQ(seen.size(), keys.size());
    for (auto &kv : seen) EXPECT_EQ(kv.second, 1) << kv.first << " delivered twice";
    for (auto &ev : sink.events()) EXPECT_EQ(ev.attempt, 1) << ev.key;
    EXPECT_TRUE(wait_until([&] {
        return contains(c.inspect(),
                        "\"due\":0,\"due_now\":0,\"inflight\":0,"
                        "\"oldest_overdue_ms\":-1,\"queue\":\"keys\"");
    })) << c.inspect()
        << "\n"
        << e->stats_text({"items.claimed", "items.acked", "items.late_acks", "items.released",
                          "items.lease_expired"});
}

// The client's command routed by key (what the plugin host will use) reaches each key's
// master, and after a reshard its stale map meets MOVED and follows it to the new owner.
TEST_F(ClusterTest, CommandRoutedByKeyFollowsMovedToTheNewOwner) {
    keywatch::Config conf;
    std::string err;
    ASSERT_EQ(conf.set("redis.url", cluster_->seed_url(), &err), KW_OK) << err;
    keywatch::Client client(conf);
    std::vector<std::string> keys;
    for (size_t m : cluster_->masters()) keys.push_back(key_on(m, "routed-"));
    for (auto &key : keys) {
        keywatch::ReplyPtr r = client.command_for_key(key, {"SET", key, "v1"});
        ASSERT_TRUE(r) << client.last_error();
        EXPECT_EQ(keywatch::reply_to_string(r.get()), "OK");
    }
    const size_t to = migrate_slot(keywatch::key_slot(keys[0]));
    keywatch::ReplyPtr r = client.command_for_key(keys[0], {"GET", keys[0]});
    ASSERT_TRUE(r) << client.last_error();
    EXPECT_EQ(keywatch::reply_to_string(r.get()), "v1");
    r = client.command_for_key(keys[0], {"SET", keys[0], "v2"});
    ASSERT_TRUE(r) << client.last_error();
    EXPECT_EQ(cluster_->node(to).command({"GET", keys[0]}), "v2");
}

// RedisPool::commands (the plugin host's redis_pipeline) over one key per master.
struct PipelineKeys {
    PipelineKeys(const keywatch::Config &config, std::vector<std::string> k)
        : pool(config), keys(std::move(k)) {}
    // INCR of every key, `rounds` times over, in one call.
    void incr_all(int rounds, std::vector<keywatch::ClusterRouter::Outcome> *out) {
        std::vector<std::vector<std::string>> cmds;
        for (int round = 0; round < rounds; round++)
            for (auto &key : keys) cmds.push_back({"INCR", key});
        pool.commands(std::move(cmds), out);
    }
    keywatch::RedisPool pool;
    std::vector<std::string> keys;
};

// The plugin host's redis_pipeline (RedisPool::commands): many commands routed by key,
// pipelined per master. After a reshard the pool's client has a stale map: the commands of
// the moved slot meet MOVED and run on the new owner, once each; the others keep their
// replies.
TEST_F(ClusterTest, PipelinedCommandsFollowMovedForTheMovedSlotOnlyAndRunOnce) {
    PipelineKeys p(seed_config(), keys_on_masters("piped-"));
    std::vector<std::string> &keys = p.keys;
    std::vector<keywatch::ClusterRouter::Outcome> out;
    p.incr_all(10, &out);  // the pool's client learns the topology
    ASSERT_EQ(out.size(), 10 * keys.size());
    for (auto &o : out) ASSERT_TRUE(o.reply) << o.error;
    const int slot = keywatch::key_slot(keys[0]);
    const size_t from = static_cast<size_t>(cluster_->master_of_slot(slot));
    const size_t to = migrate_slot(slot);
    p.incr_all(10, &out);
    for (size_t i = 0; i < out.size(); i++) {
        ASSERT_TRUE(out[i].reply) << i << ": " << out[i].error;
        // Each INCR ran exactly once, in the order given per key.
        EXPECT_EQ(keywatch::reply_to_string(out[i].reply.get()),
                  std::to_string(10 + i / keys.size() + 1))
            << i;
    }
    EXPECT_EQ(cluster_->node(to).command({"GET", keys[0]}), "20");
    EXPECT_TRUE(contains(cluster_->node(from).command({"INFO", "errorstats"}), "errorstat_MOVED"))
        << "the stale map was used first";
}

// During a slot's migration, commands for its keys already moved get ASK: ASKING and the
// command go to the importing master; the rest of the pipeline is unaffected.
TEST_F(ClusterTest, PipelinedCommandsFollowAskDuringAMigration) {
    PipelineKeys p(seed_config(), keys_on_masters("asked-"));
    std::vector<std::string> &keys = p.keys;
    std::vector<keywatch::ClusterRouter::Outcome> out;
    p.incr_all(1, &out);
    for (auto &o : out) ASSERT_TRUE(o.reply) << o.error;
    const int slot = keywatch::key_slot(keys[0]);
    size_t to = migrate_slot(slot, Order::AsListed, [&] { p.incr_all(1, &out); });
    ASSERT_EQ(out.size(), keys.size());
    for (auto &o : out) {
        ASSERT_TRUE(o.reply) << o.error;
        EXPECT_EQ(keywatch::reply_to_string(o.reply.get()), "2");
    }
    EXPECT_EQ(cluster_->node(to).command({"GET", keys[0]}), "2");
    EXPECT_TRUE(contains(cluster_->node(to).command({"INFO", "commandstats"}), "cmdstat_asking"));
}

TEST_F(ClusterTest, QueueMigratedAfterItsTrackedKeysIsSweptByItsNewOwner) {
    expect_arrived_queue_swept_by_new_owner(
        "keysfirst", {Order::TrackedKeysFirst, milliseconds(1000), "", false});
}

TEST_F(ClusterTest, QueueMigratedBeforeItsTrackedKeysIsSweptByItsNewOwner) {
    expect_arrived_queue_swept_by_new_owner("queuefirst",
                                            {Order::QueueFirst, milliseconds(1000), "", false});
}

// A migration that stalls past cluster.migration_wait (an interrupted `redis-cli --cluster
// reshard` finished later: MIGRATE done, SETSLOT NODE a minute after): the new owner stops
// sweeping the queue that arrived, and the topology that shows the slot's new master hands
// the queue over; it used to wait for the scan (30 s by default). The 65 s stall seen in
// the field, made short: a 1 s wait and a 3 s stall.
TEST_F(ClusterTest, QueueOfAMigrationStalledPastTheWaitIsSweptByItsNewOwner) {
    expect_arrived_queue_swept_by_new_owner("stalled",
                                            {Order::AsListed, milliseconds(3000), "1s", false});
}

// A watcher started while a migration stalls finds the queue on the new owner by its scan,
// is answered MOVED, and sweeps it there once the slot is handed over.
TEST_F(ClusterTest, QueueOfAMigrationUnderWayWhenTheWatcherStartsIsSweptByItsNewOwner) {
    expect_arrived_queue_swept_by_new_owner("midway",
                                            {Order::AsListed, milliseconds(3000), "", true});
}

// A claim whose tracked keys already went to the slot's new master (MIGRATE moved them
// first; the queue's keys are still here) writes nothing half-way: the due items and a
// run-out batch it was to reclaim stay as they were, no batch key or lease is made. As the
// engine sends it (its new batch key missing) Redis refuses it before it runs (TRYAGAIN);
// with every declared key present it runs, and its look at the tracked keys (EXISTS of
// undeclared keys missing in a MIGRATING slot) fails before its first write (trap T4).
TEST_F(ClusterTest, AClaimThatMeetsAMigratingSlotWritesNothing) {
    ClusterClient c(cluster_->seed_url());
    const std::vector<std::string> keys = {"{mig}:1", "{mig}:2", "{mig}:3"};
    c.track_all(keys, 60000);
    const int slot = keywatch::key_slot(keys[0]);
    const size_t from = static_cast<size_t>(cluster_->master_of_slot(slot));
    size_t to = 0;
    for (size_t m : cluster_->masters())
        if (m != from) to = m;
    keywatch::RedisProcess &src = cluster_->node(from), &dst = cluster_->node(to);
    const auto q =
        keywatch::QueueKeys::make("kw", "keys", keywatch::SlotTags::instance().tag(slot));
    // Due now (their keys still live), and a crashed engine's batch whose lease ran out.
    for (auto &k : keys) ASSERT_EQ(src.command({"ZADD", q.due, "XX", "CH", "1", k}), "1");
    const std::string stale_member = keywatch::lease_member("dead", 7, -1);
    ASSERT_EQ(src.command({"ZADD", q.batch("dead", 7), "5", "held"}), "1");
    ASSERT_EQ(src.command({"ZADD", q.leases, "1", stale_member}), "1");
    // Every other key the first claim declares, present (no key may be made in a MIGRATING
    // slot once it migrates).
    ASSERT_EQ(src.command({"ZADD", q.batch("new", 1), "1", "placeholder"}), "1");
    ASSERT_EQ(src.command({"ZADD", q.inflight, "1", "placeholder"}), "1");
    ASSERT_EQ(src.command({"ZADD", q.done, "1", "placeholder"}), "1");
    ASSERT_EQ(src.command({"HSET", q.data, "~", "placeholder"}), "1");
    ASSERT_EQ(src.command({"SET", q.seq, "0"}), "OK");
    // The tracked keys go first; the queue's keys stay behind.
    const std::string s = std::to_string(slot);
    ASSERT_EQ(dst.command({"CLUSTER", "SETSLOT", s, "IMPORTING", src.command({"CLUSTER", "MYID"})}),
              "OK");
    ASSERT_EQ(src.command({"CLUSTER", "SETSLOT", s, "MIGRATING", dst.command({"CLUSTER", "MYID"})}),
              "OK");
    std::vector<std::string> migrate = {"MIGRATE", dst.host(), std::to_string(dst.port()), "", "0",
                                        "5000",    "KEYS"};
    migrate.insert(migrate.end(), keys.begin(), keys.end());
    ASSERT_EQ(src.command(migrate), "OK");
    const auto state = [&] {
        return src.command({"ZRANGE", q.due, "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"ZRANGE", q.leases, "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"ZRANGE", q.batch("dead", 7), "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"ZRANGE", q.batch("new", 1), "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"ZRANGE", q.inflight, "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"ZRANGE", q.done, "0", "-1", "WITHSCORES"}) + "|" +
               src.command({"HGETALL", q.data}) + "|" + src.command({"GET", q.seq});
    };
    const std::string before = state();
    const auto claim = [&](uint64_t seq) {
        std::vector<std::string> args = {"EVAL", keywatch::scripts::batch::kClaimDue.body, "8"};
        for (auto &k : q.claim_keys("new", seq)) args.push_back(k);
        args.push_back(q.batch("dead", 7));
        for (const char *a : {"10", "30000", "new"}) args.push_back(a);
        args.push_back(std::to_string(seq));
        for (const char *a : {"1", "0", "LS", "1"}) args.push_back(a);
        args.push_back(stale_member);
        args.push_back("__keywatch:heartbeat:engines:kw");
        return src.command(args);
    };
    // Every declared key present: it runs, and fails at its look at the tracked keys.
    std::string reply = claim(1);
    EXPECT_TRUE(contains(reply, "ERR")) << reply;
    EXPECT_EQ(state(), before) << "the claim wrote before it failed: " << reply;
    // As the engine sends it (a new batch key): refused before it runs.
    reply = claim(2);
    EXPECT_TRUE(contains(reply, "TRYAGAIN")) << reply;
    EXPECT_EQ(state(), before) << reply;
    // The migration ends as usual.
    cluster_->migrate_slot(slot, to);
}

// A watcher process killed with claims in hand: on a cluster its slot queues hold only
// in-flight items, and a new watcher must still find them (SCAN of in-flight sets) and
// redeliver them when the lease runs out.
TEST_F(ClusterTest, KilledWatcherClaimsAreRedeliveredByANewWatcher) {
    char tmpl[] = "/tmp/kw-cluster-worker-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string dir = tmpl, url = cluster_->seed_url();
    Worker holder(url, dir + "/a", {"--lease", "1s", "--sleep-ms", "60000", "--workers", "8"});
    ClusterClient c(url);
    auto keys = many_keys("held:", 8);
    c.track_all(keys, 100);
    ASSERT_TRUE(wait_until([&] { return contains(c.inspect(), "\"inflight\":8,"); }))
        << c.inspect();
    holder.kill9();  // a crash with claims in hand
    Worker rescuer(url, dir + "/b", {"--lease", "1s"});
    auto delivered = [&] { return read_lines(dir + "/b").size(); };
    EXPECT_TRUE(wait_until([&] { return delivered() >= keys.size(); }, milliseconds(20000)))
        << delivered() << " of " << keys.size() << "; " << c.inspect();
    for (auto &l : read_lines(dir + "/b")) EXPECT_EQ(l.source, KW_SOURCE_LEASE_EXPIRED);
    rescuer.stop();
    (void)std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_F(ClusterTest, AnUnreachableSeedIsSkippedAndAllUnreachableIsAClearError) {
    std::string dead = "redis://127.0.0.1:" + std::to_string(keywatch::RedisProcess::free_port());
    EventSink sink;
    Engine e(dead + "," + cluster_->seed_url());
    e.add(&sink, {{"events", "expired"}});
    ASSERT_EQ(e.start(), KW_OK) << e.last_error();
    EXPECT_TRUE(e.stat_reaches("conn.nodes", 3));
    ClusterClient c(dead + "," + cluster_->seed_url());
    c.track_all({"seeded:1", "seeded:2"}, 100);
    EXPECT_TRUE(sink.wait_count(2)) << sink.describe();

    EventSink none;
    Engine lost(dead + "," + dead);
    lost.add(&none, {{"events", "expired"}});
    EXPECT_EQ(lost.start(), KW_ERR_CONNECT);
    EXPECT_TRUE(contains(lost.last_error(), "none of the 2 seeds answered")) << lost.last_error();
}

// With a slot without a master and cluster-require-full-coverage yes (Redis's default),
// every node answers CLUSTERDOWN: the client says so, naming the node and its answer,
// instead of "too many cluster redirections".
TEST_F(ClusterTest, ACallWhileTheClusterIsDownNamesTheRealState) {
    ClusterClient c(cluster_->seed_url());
    const int uncovered = 100;
    for (size_t i = 0; i < cluster_->size(); i++) {
        // Redis's default (the test cluster turns it off so that failover tests go on).
        cluster_->node(i).command({"CONFIG", "SET", "cluster-require-full-coverage", "yes"});
        cluster_->node(i).command({"CLUSTER", "DELSLOTS", std::to_string(uncovered)});
    }
    ASSERT_TRUE(wait_until([&] {
        for (size_t m : cluster_->masters())
            if (!contains(cluster_->node(m).command({"CLUSTER", "INFO"}), "cluster_state:fail"))
                return false;
        return true;
    }));
    std::string key = "down:elsewhere";
    ASSERT_NE(keywatch::key_slot(key), uncovered);
    int rc = kw_client_track(c.get(), key.data(), key.size(), "v", 1, 60000, 0, nullptr);
    EXPECT_EQ(rc, KW_ERR_REDIS);
    EXPECT_TRUE(contains(c.error(), "the cluster refuses commands")) << c.error();
    EXPECT_TRUE(contains(c.error(), "CLUSTERDOWN")) << c.error();
    EXPECT_FALSE(contains(c.error(), "too many cluster redirections")) << c.error();
}

// redis.mode=standalone against a cluster node used to run on that one node (CROSSSLOT
// from track, a watcher seeing one master's slots, inspect reporting 0): refused, naming
// the fix, by the client and the engine alike.
TEST_F(ClusterTest, StandaloneModeAgainstAClusterNodeIsRefusedNamingTheFix) {
    kw_conf_t *conf = kw_conf_new();
    char err[512] = "";
    ASSERT_EQ(kw_conf_set(conf, "redis.url", cluster_->seed_url().c_str(), err, sizeof err), KW_OK);
    ASSERT_EQ(kw_conf_set(conf, "redis.mode", "standalone", err, sizeof err), KW_OK);
    kw_client_t *client = nullptr;
    EXPECT_EQ(kw_client_new(conf, &client, err, sizeof err), KW_ERR_INVALID_ARG);
    EXPECT_TRUE(contains(err, "is a node of a Redis Cluster")) << err;
    EXPECT_TRUE(contains(err, "redis.mode=auto")) << err;
    kw_client_free(client);
    kw_conf_free(conf);

    EventSink sink;
    Engine e(cluster_->seed_url());
    e.set("redis.mode", "standalone");
    e.add(&sink, {{"events", "expired"}});
    EXPECT_NE(e.start(), KW_OK);
    EXPECT_TRUE(contains(e.last_error(), "redis.mode=auto")) << e.last_error();
}

TEST(ClusterModeTest, ForcedClusterModeOnAStandaloneServerIsAClearError) {
    keywatch::RedisProcess redis;
    redis.start();
    EventSink sink;
    Engine e(redis.url());
    e.set("redis.mode", "cluster");
    e.add(&sink, {{"events", "expired"}});
    EXPECT_EQ(e.start(), KW_ERR_REDIS);
    EXPECT_TRUE(contains(e.last_error(), "not a cluster node")) << e.last_error();
}

}  // namespace
}  // namespace kwtest
