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
#include "redis_fixture.h"
#include "tests/support/redis_cluster.h"

namespace kwtest {
namespace {

using keywatch::RedisCluster;

// A client (kw_client_t) of the cluster with its TLS options.
class TlsClient {
  public:
    TlsClient(const RedisCluster &cluster, const std::string &seed) {
        conf_ = kw_conf_new();
        char err[512] = "";
        EXPECT_EQ(kw_conf_set(conf_, "redis.url", seed.c_str(), err, sizeof err), KW_OK) << err;
        for (auto &nv : cluster.certificates()->client_options())
            EXPECT_EQ(kw_conf_set(conf_, nv.first.c_str(), nv.second.c_str(), err, sizeof err),
                      KW_OK)
                << err;
        if (kw_client_new(conf_, &client_, err, sizeof err) != KW_OK)
            throw std::runtime_error(std::string("kw_client_new: ") + err);
    }
    ~TlsClient() {
        kw_client_free(client_);
        kw_conf_free(conf_);
    }
    TlsClient(const TlsClient &) = delete;
    TlsClient &operator=(const TlsClient &) = delete;

    // Tracks every key in one pipeline; all must succeed.
    void track_all(const std::vector<std::string> &keys, int64_t ttl_ms) {
        ASSERT_EQ(kw_client_pipeline_begin(client_), KW_OK) << kw_client_last_error(client_);
        for (auto &k : keys)
            kw_client_track(client_, k.data(), k.size(), "v", 1, ttl_ms, 0, nullptr);
        size_t n = 0;
        ASSERT_EQ(kw_client_pipeline_end(client_, nullptr, 0, &n), KW_OK)
            << kw_client_last_error(client_);
        ASSERT_EQ(n, keys.size());
    }

  private:
    kw_conf_t *conf_ = nullptr;
    kw_client_t *client_ = nullptr;
};

std::vector<std::string> many_keys(const std::string &prefix, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; i++) keys.push_back(prefix + std::to_string(i));
    return keys;
}

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
    // A key (with a readable prefix) whose slot node `index` serves as master now.
    std::string key_on(size_t index, const std::string &prefix) {
        for (int i = 0; i < 100000; i++) {
            std::string key = prefix + std::to_string(i);
            if (cluster().master_of_slot(keywatch::key_slot(key)) == static_cast<int>(index))
                return key;
        }
        ADD_FAILURE() << "no key found for node " << index;
        return prefix;
    }
    // SET key PX on the master that owns it, then touch it until Redis expires it.
    void expire_on_owner(const std::string &key) {
        int owner = cluster().master_of_slot(keywatch::key_slot(key));
        ASSERT_GE(owner, 0);
        auto &node = cluster().node(static_cast<size_t>(owner));
        ASSERT_EQ(node.command({"SET", key, "v", "PX", "30"}), "OK");
        ASSERT_TRUE(wait_until([&] { return node.command({"EXISTS", key}) == "0"; }));
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
    TlsClient client(cluster(), cluster().seed_url());
    const auto keys = many_keys("swept:", 300);
    client.track_all(keys, 1500);
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
    TlsClient client(cluster(), cluster().seed_url());
    const auto keys = many_keys("run:", 60);
    client.track_all(keys, 1000);
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
    ASSERT_TRUE(wait_until(
        [&] {
            for (auto &c : states.changes())
                if (c.node == new_node && c.state == KW_CONN_READY) return true;
            return false;
        },
        milliseconds(20000)))
        << states.describe();
    TlsClient client(cluster(), cluster().seed_url());
    const auto keys = many_keys("after-failover:", 60);
    client.track_all(keys, 1000);
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
    TlsClient client(cluster(), seed);
    client.track_all(many_keys("both-tracked:", 30), 60000);
    for (size_t m : cluster().masters()) {
        const std::string clients = cluster().node(m).command({"CLIENT", "LIST"});
        EXPECT_NE(clients.find("laddr=" + tls_endpoint(m)), std::string::npos) << clients;
    }
}

}  // namespace
}  // namespace kwtest
