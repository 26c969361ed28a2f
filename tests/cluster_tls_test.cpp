// Redis Cluster over TLS, against real clusters on loopback whose clients, nodes and replicas
// all speak TLS (tls-cluster and tls-replication yes, client certificates required): a
// 3+3 cluster with TLS ports only (port 0) shared by the tests of TlsOnlyCluster, which
// watch live events from every master, deliver tracked keys by sweeping, hand events to a
// plugin that writes to the cluster, and (last) survive a master killed with kill -9; and a
// cluster with both kinds of port, where a rediss:// seed must reach every node at its
// tls-port. One process (ctest runs the binary once): a TLS cluster takes a while to start.
#include <map>
#include <set>

#include "core/redis/slots.h"
#include "cluster_support.h"
#include "redis_fixture.h"
#include "tests/support/redis_cluster.h"

namespace kwtest {
namespace {

using keywatch::RedisCluster;

// What every TLS cluster test does: engines and clients with the cluster's CA and client
// certificate, keys placed on a given master, expiry by Redis on the key's owner.
class TlsClusterTest : public ::testing::Test {
  protected:
    virtual RedisCluster &cluster() = 0;

    // An engine seeded at `seed` (the cluster's seed URL by default) delivering `expired`.
    std::unique_ptr<Engine> engine(EventSink *sink, const std::string &seed = "") {
        auto e = std::make_unique<Engine>(seed.empty() ? cluster().seed_url() : seed);
        e->set("cluster.refresh", "500ms");
        for (auto &nv : cluster().certificates()->client_options()) e->set(nv.first, nv.second);
        if (sink) e->add(sink, {{"events", "expired"}});
        return e;
    }
    std::string key_on(size_t index, const std::string &prefix) {
        return kwtest::key_on(cluster(), index, prefix);
    }
    void expire_on_owner(const std::string &key) { kwtest::expire_on_owner(cluster(), key); }
    // A client of the cluster (seeded at `seed`) with its TLS options.
    std::unique_ptr<ClusterClient> client(const std::string &seed = "") {
        return std::make_unique<ClusterClient>(seed.empty() ? cluster().seed_url() : seed,
                                               cluster().certificates()->client_options());
    }
    // "127.0.0.1:<tls-port>" of node i: how the engine names it when reached over TLS.
    std::string tls_endpoint(size_t i) {
        return "127.0.0.1:" + std::to_string(cluster().tls_port(i));
    }
};

// The 3+3 cluster with TLS ports only, started once for the tests below.
class TlsOnlyCluster : public TlsClusterTest {
  protected:
    static void SetUpTestSuite() {
        RedisCluster::Options o;
        o.tls = RedisCluster::Options::Tls::Only;
        shared_ = new RedisCluster(o);
        shared_->start();
    }
    static void TearDownTestSuite() {
        delete shared_;
        shared_ = nullptr;
    }
    RedisCluster &cluster() override { return *shared_; }
    static RedisCluster *shared_;
};
RedisCluster *TlsOnlyCluster::shared_ = nullptr;

TEST_F(TlsOnlyCluster, WatchHearsLiveEventsFromEveryMasterOverTls) {
    ASSERT_EQ(cluster().seed_url().rfind("rediss://", 0), 0u) << cluster().seed_url();
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3));
    std::set<std::string> nodes;
    for (size_t m : cluster().masters()) {
        std::string key = key_on(m, "live" + std::to_string(m) + ":");
        expire_on_owner(key);
        ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
        for (auto &ev : sink.events())
            if (ev.key == key) nodes.insert(ev.node);
        EXPECT_EQ(nodes.count(tls_endpoint(m)), 1u) << "from the master that expired it";
    }
    EXPECT_EQ(nodes.size(), 3u);
}

// Redis's own expiry is off on every node: the engine's sweepers, over TLS to each master,
// claim the tracked items at their deadlines.
TEST_F(TlsOnlyCluster, TrackedKeysAreSweptFromEveryMasterOverTls) {
    for (size_t i = 0; i < cluster().size(); i++)
        ASSERT_EQ(cluster().node(i).command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    auto c = client();
    const auto keys = many_keys("swept:", 300);
    c->track_all(keys, 1500);
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(30000))) << sink.describe();
    std::map<std::string, int> seen;
    std::set<std::string> nodes;
    for (auto &ev : sink.events()) {
        seen[ev.key]++;
        nodes.insert(ev.node);
    }
    EXPECT_EQ(seen.size(), keys.size());
    EXPECT_EQ(nodes.size(), 3u) << "every master swept its share";
    EXPECT_TRUE(e->stat_reaches("items.acked", static_cast<int64_t>(keys.size())));
    for (size_t i = 0; i < cluster().size(); i++)
        ASSERT_EQ(cluster().node(i).command({"DEBUG", "SET-ACTIVE-EXPIRE", "1"}), "OK");
}

// What `keywatch run` does: a plugin handler (stream) gets the events, and its writes go
// through the host's Redis command, routed by key to the stream's master over TLS.
TEST_F(TlsOnlyCluster, PluginHandlerDeliversAndWritesToTheClusterOverTls) {
    setenv("KEYWATCH_PLUGIN_PATH", KW_HANDLERS_DIR, 1);
    auto e = engine(nullptr);
    const char *argv[] = {"stream", "tls-events", "maxlen", "0", nullptr};
    char err[1024] = "";
    ASSERT_EQ(kw_engine_add_plugin(e->get(), "stream", "out", nullptr, argv, err, sizeof err),
              KW_OK)
        << err;
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    auto c = client();
    const auto keys = many_keys("run:", 60);
    c->track_all(keys, 1000);
    ASSERT_TRUE(e->stat_reaches("items.acked", static_cast<int64_t>(keys.size())));
    const int owner = cluster().master_of_slot(keywatch::key_slot("tls-events"));
    ASSERT_GE(owner, 0);
    EXPECT_EQ(cluster().node(static_cast<size_t>(owner)).command({"XLEN", "tls-events"}),
              std::to_string(keys.size()));
}

// Last: it leaves the cluster with a master killed. Its replica (replicating over TLS)
// takes over; the engine reaches the promoted node at its tls-port and delivers what was
// tracked there.
TEST_F(TlsOnlyCluster, MasterKilledWithKill9IsReplacedAndDeliveriesGoOnOverTls) {
    EventSink sink;
    StateLog states;
    auto e = engine(&sink);
    e->watch_states(&states);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(cluster().wait_replicated(30000));
    const int slot = 1000;
    const int old_master = cluster().master_of_slot(slot);
    ASSERT_GE(old_master, 0);
    cluster().node(static_cast<size_t>(old_master)).kill9();
    ASSERT_TRUE(cluster().wait_healthy(30000)) << "the replica was not promoted";
    const int new_master = cluster().master_of_slot(slot);
    ASSERT_GE(new_master, 0);
    ASSERT_NE(new_master, old_master);
    const std::string new_node = tls_endpoint(static_cast<size_t>(new_master));
    ASSERT_TRUE(states.reached(new_node, KW_CONN_READY, milliseconds(20000))) << states.describe();
    auto c = client();
    const auto keys = many_keys("after-failover:", 60);
    c->track_all(keys, 1000);
    ASSERT_TRUE(sink.wait_count(keys.size(), milliseconds(30000))) << sink.describe();
    std::set<std::string> seen;
    for (auto &ev : sink.events()) seen.insert(ev.key);
    EXPECT_EQ(seen.size(), keys.size());
    EXPECT_TRUE(e->stat_reaches("conn.nodes", 3)) << "the dead master is dropped";
}

// Both ports open (tls-cluster yes: CLUSTER SHARDS lists port and tls-port): a rediss://
// seed reaches every master at its tls-port, the engine and the client alike. Before, they
// took `port` and spoke TLS to a plain port, which says nothing back.
class BothPortsCluster : public TlsClusterTest {
  protected:
    void SetUp() override {
        RedisCluster::Options o;
        o.tls = RedisCluster::Options::Tls::BesidePlain;
        o.replicas_per_master = 0;
        cluster_ = std::make_unique<RedisCluster>(o);
        cluster_->start();
    }
    RedisCluster &cluster() override { return *cluster_; }
    std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(BothPortsCluster, RedissSeedReachesEveryNodeAtItsTlsPort) {
    const std::string seed = "rediss://" + tls_endpoint(0);
    EventSink sink;
    auto e = engine(&sink, seed);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    std::set<std::string> want;
    for (size_t m : cluster().masters()) want.insert(tls_endpoint(m));
    ASSERT_EQ(want.size(), 3u);
    for (size_t m : cluster().masters()) {
        const std::string key = key_on(m, "both" + std::to_string(m) + ":");
        expire_on_owner(key);
        ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
    }
    std::set<std::string> nodes;
    for (auto &ev : sink.events()) nodes.insert(ev.node);
    EXPECT_EQ(nodes, want);
    // The client too: its writes land on each master through the TLS port.
    auto c = client(seed);
    c->track_all(many_keys("both-tracked:", 30), 60000);
    for (size_t m : cluster().masters()) {
        const std::string clients = cluster().node(m).command({"CLIENT", "LIST"});
        EXPECT_NE(clients.find("laddr=" + tls_endpoint(m)), std::string::npos) << clients;
    }
}

}  // namespace
}  // namespace kwtest
