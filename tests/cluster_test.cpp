// Redis Cluster fan-out against a real 3-master, 3-replica cluster on loopback: events of
// keys on every master, a master killed with kill -9 and its replica promoted, a manual
// CLUSTER FAILOVER, and a watcher started while a master is down.
#include <set>

#include "core/redis_cluster.h"
#include "core/slots.h"
#include "redis_fixture.h"

namespace kwtest {
namespace {

using keywatch::RedisCluster;

class ClusterTest : public ::testing::Test {
  protected:
    void SetUp() override {
        cluster_ = std::make_unique<RedisCluster>();
        cluster_->start();
    }
    void TearDown() override { cluster_.reset(); }

    // A key (with a readable prefix) whose slot the node `index` serves as master now.
    std::string key_on(size_t index, const std::string &prefix) {
        for (int i = 0; i < 100000; i++) {
            std::string key = prefix + std::to_string(i);
            if (cluster_->master_of_slot(keywatch::key_slot(key)) == static_cast<int>(index))
                return key;
        }
        ADD_FAILURE() << "no key found for node " << index;
        return prefix;
    }
    // SET key PX on the master that owns it, then touch it until Redis expires it.
    void expire_on_owner(const std::string &key) {
        int owner = cluster_->master_of_slot(keywatch::key_slot(key));
        ASSERT_GE(owner, 0);
        auto &node = cluster_->node(static_cast<size_t>(owner));
        ASSERT_EQ(node.command({"SET", key, "v", "PX", "30"}), "OK");
        ASSERT_TRUE(wait_until([&] { return node.command({"EXISTS", key}) == "0"; }));
    }
    std::unique_ptr<Engine> engine(EventSink *sink) {
        auto e = std::make_unique<Engine>(cluster_->seed_url());
        e->set("cluster.refresh", "500ms");
        e->add(sink, {{"events", "expired"}});
        return e;
    }

    std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(ClusterTest, EventsFromKeysOnEveryMasterArrive) {
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    EXPECT_EQ(e->stat("conn.nodes"), 3);
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
    ASSERT_TRUE(wait_until(
        [&] {
            for (auto &c : states.changes())
                if (c.node == new_node && c.state == KW_CONN_READY) return true;
            return false;
        },
        milliseconds(20000)))
        << states.describe();
    std::string key = key_on(static_cast<size_t>(new_master), "after-failover:");
    expire_on_owner(key);
    ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
    EXPECT_EQ(sink.events().back().node, new_node);
    EXPECT_TRUE(wait_until([&] { return e->stat("conn.nodes") == 3; }))
        << "the dead master is dropped, not kept alongside";
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
    EXPECT_TRUE(wait_until([&] { return e->stat("conn.nodes") == 3; }));
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
    auto e = engine(&sink);
    e->set("redis.connect_timeout", "1s");
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
