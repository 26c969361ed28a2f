// Handler plugins on a real Redis Cluster (3 masters): the host's Redis command is routed
// by key, so session_index reaches an index that lives on another master than the expired
// session, and stream appends (entry and once-per-event marker in one slot) from events of
// every master.
#include <set>

#include "tests/support/redis_cluster.h"
#include "core/redis/slots.h"
#include "tests/redis_fixture.h"

namespace {

using namespace kwtest;
using keywatch::RedisCluster;

class PluginClusterTest : public ::testing::Test {
  protected:
    void SetUp() override {
        RedisCluster::Options opts;
        opts.replicas_per_master = 0;
        cluster_ = std::make_unique<RedisCluster>(opts);
        cluster_->start();
        setenv("KEYWATCH_PLUGIN_PATH", KW_HANDLERS_DIR, 1);
        engine_ = std::make_unique<Engine>(cluster_->seed_url());
        kw_conf_t *conf = kw_conf_new();
        char err[256];
        ASSERT_EQ(kw_conf_set(conf, "redis.url", cluster_->seed_url().c_str(), err, sizeof err),
                  KW_OK);
        ASSERT_EQ(kw_client_new(conf, &client_, err, sizeof err), KW_OK) << err;
        kw_conf_free(conf);
    }
    void TearDown() override {
        engine_.reset();
        kw_client_free(client_);
        cluster_.reset();
    }

    int owner(const std::string &key) { return cluster_->master_of_slot(keywatch::key_slot(key)); }
    // A command on the master that serves key.
    std::string on_owner(const std::string &key, const std::vector<std::string> &args) {
        return cluster_->node(static_cast<size_t>(owner(key))).command(args);
    }
    void load(const char *plugin, const char *instance,
              const std::vector<std::pair<std::string, std::string>> &options) {
        std::vector<const char *> argv;
        for (const auto &nv : options) {
            argv.push_back(nv.first.c_str());
            argv.push_back(nv.second.c_str());
        }
        argv.push_back(nullptr);
        char err[1024] = "";
        ASSERT_EQ(kw_engine_add_plugin(engine_->get(), plugin, instance, nullptr, argv.data(), err,
                                       sizeof err),
                  KW_OK)
            << err;
    }
    void track(const std::string &key, const std::string &value) {
        ASSERT_EQ(kw_client_track(client_, key.data(), key.size(), value.data(), value.size(), 100,
                                  KW_TRACK_SNAPSHOT, nullptr),
                  KW_OK)
            << kw_client_last_error(client_);
    }

    std::unique_ptr<RedisCluster> cluster_;
    std::unique_ptr<Engine> engine_;
    kw_client_t *client_ = nullptr;
};

TEST_F(PluginClusterTest, SessionIndexAndStreamReachKeysOnOtherMasters) {
    load("session_index", "sessions", {{"index", "user:{user}:sessions"}, {"pattern", "sess:*"}});
    load("stream", "out", {{"stream", "events"}, {"maxlen", "0"}});
    // One session per master; each user's index on another master than the session.
    std::vector<std::pair<std::string, std::string>> sessions;  // key, user
    std::set<int> masters;
    for (int i = 0; masters.size() < 3 && i < 10000; i++) {
        std::string key = "sess:" + std::to_string(i);
        if (masters.count(owner(key))) continue;
        for (int u = static_cast<int>(sessions.size()) * 10000;; u++) {  // distinct users
            std::string user = std::to_string(u);
            if (owner("user:" + user + ":sessions") == owner(key)) continue;
            sessions.emplace_back(key, user);
            masters.insert(owner(key));
            break;
        }
    }
    ASSERT_EQ(sessions.size(), 3u);
    for (auto &s : sessions) {
        std::string index = "user:" + s.second + ":sessions";
        ASSERT_EQ(on_owner(index, {"SADD", index, s.first, "keep"}), "2");
    }
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (auto &s : sessions) track(s.first, s.second);
    for (auto &s : sessions) {
        std::string index = "user:" + s.second + ":sessions";
        EXPECT_TRUE(wait_until([&] {
            return on_owner(index, {"SMEMBERS", index}) == "keep";
        })) << index
            << " still holds " << s.first;
    }
    EXPECT_TRUE(wait_until([&] { return on_owner("events", {"XLEN", "events"}) == "3"; }));
    // The plugins count a write once its reply reached their thread, which may be after
    // this client saw it.
    EXPECT_TRUE(engine_->stat_reaches("plugin.sessions.removed", 3));
    EXPECT_TRUE(engine_->stat_reaches("plugin.out.appended", 3));
}

}  // namespace
