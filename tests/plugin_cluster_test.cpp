// Handler plugins on a real Redis Cluster (3 masters): the host's Redis command is routed
// by key, so session_index reaches an index that lives on another master than the expired
// session, and stream appends (entry and once-per-event marker in one slot) from events of
// every master; both in batches (one SREM per index key, pipelined to every master; one
// script call on the stream's master), following MOVED for the commands it concerns.
#include <set>

#include "tests/support/redis_cluster.h"
#include "core/redis/slots.h"
#include "tests/redis_fixture.h"
#include "tests/server_calls.h"

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
    ServerCalls calls_on(size_t node) {
        return ServerCalls(cluster_->node(node).host(), cluster_->node(node).port());
    }
    // Users whose index (user:<u>:sessions) lives on each master in turn, `per_master` each.
    std::vector<std::string> users_on_every_master(size_t per_master) {
        std::vector<std::string> users;
        for (size_t m : cluster_->masters()) {
            size_t found = 0;
            for (int u = 0; found < per_master; u++)
                if (owner("user:" + std::to_string(u) + ":sessions") == static_cast<int>(m))
                    users.push_back(std::to_string(u)), found++;
        }
        return users;
    }
    // SREM calls on every master (run, or refused by a redirect when `refused`).
    int64_t srem_calls(bool refused = false) {
        int64_t n = 0;
        for (size_t m : cluster_->masters())
            n += refused ? calls_on(m).rejected("srem") : calls_on(m).calls("srem");
        return n;
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

// Sessions on every master, their users' indexes on every master, all due at once: the
// batches span masters, and each index loses exactly its members.
TEST_F(PluginClusterTest, SessionIndexAndStreamBatchesSpanEveryMaster) {
    const int n = 60;
    load("session_index", "sessions", {{"index", "user:{user}:sessions"}});
    load("stream", "out", {{"stream", "events"}, {"maxlen", "0"}});
    const auto users = users_on_every_master(2);
    for (int i = 0; i < n; i++) {
        std::string index = "user:" + users[i % users.size()] + ":sessions";
        on_owner(index, {"SADD", index, "sess:" + std::to_string(i)});
    }
    for (size_t m : cluster_->masters()) calls_on(m).start();
    for (int i = 0; i < n; i++) track("sess:" + std::to_string(i), users[i % users.size()]);
    // All due when the engine starts: it claims them together.
    const std::string last = "sess:" + std::to_string(n - 1);
    ASSERT_TRUE(wait_until([&] { return on_owner(last, {"EXISTS", last}) == "0"; }));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.sessions.removed", n));
    ASSERT_TRUE(engine_->stat_reaches("plugin.out.appended", n));
    EXPECT_TRUE(engine_->stat_reaches("plugin.sessions.absent", 0));
    for (const auto &u : users)
        EXPECT_EQ(on_owner("user:" + u + ":sessions", {"SCARD", "user:" + u + ":sessions"}), "0");
    EXPECT_EQ(on_owner("events", {"XLEN", "events"}), std::to_string(n));
    std::vector<int64_t> calls;
    auto stream_master = calls_on(static_cast<size_t>(owner("events")));
    ASSERT_TRUE(wait_until([&] { return events_in(calls = stream_master.numkeys("events")) == n; }))
        << events_in(calls) << " events in " << calls.size() << " script calls";
    EXPECT_LT(calls.size(), static_cast<size_t>(n)) << "one script call per batch";
    EXPECT_LT(srem_calls(), n) << "one SREM per index key and batch";
}

// The plugin's connection knows the slots; then user A's index moves to another master.
// The next batch's SREM for A is refused (MOVED) by the old owner and sent again to the
// new one; the commands for B and C are not repeated (nothing counted twice).
TEST_F(PluginClusterTest, SessionIndexBatchFollowsMovedForTheMovedIndexOnly) {
    const int n = 60;
    engine_->set("workers", "1");  // one pooled connection, warmed below
    load("session_index", "sessions", {{"index", "user:{user}:sessions"}});
    const auto users = users_on_every_master(1);
    const std::string moved = "user:" + users[0] + ":sessions";
    on_owner(moved, {"SADD", moved, "warm"});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("warm", users[0]);
    ASSERT_TRUE(engine_->stat_reaches("plugin.sessions.removed", 1));
    const int slot = keywatch::key_slot(moved);
    const size_t from = static_cast<size_t>(owner(moved));
    size_t to = from;
    for (size_t m : cluster_->masters())
        if (m != from) to = m;
    cluster_->migrate_slot(slot, to);
    ASSERT_EQ(owner(moved), static_cast<int>(to));
    for (int i = 0; i < n; i++) {
        std::string index = "user:" + users[i % users.size()] + ":sessions";
        on_owner(index, {"SADD", index, "sess:" + std::to_string(i)});
    }
    for (size_t m : cluster_->masters()) calls_on(m).start();
    for (int i = 0; i < n; i++) track("sess:" + std::to_string(i), users[i % users.size()]);
    ASSERT_TRUE(engine_->stat_reaches("plugin.sessions.removed", n + 1));
    EXPECT_TRUE(engine_->stat_reaches("plugin.sessions.absent", 0)) << "nothing applied twice";
    EXPECT_TRUE(engine_->stat_reaches("items.retried", 0));
    for (const auto &u : users)
        EXPECT_EQ(on_owner("user:" + u + ":sessions", {"SCARD", "user:" + u + ":sessions"}), "0");
    EXPECT_GE(calls_on(from).rejected("srem"), 1) << "the old owner answered MOVED";
    EXPECT_LT(srem_calls(), n) << "one SREM per index key and batch";
}

// User A's index key has moved to the new owner while its slot is still migrating: the old
// owner answers ASK, and the batch's SREM for A goes to the new owner after ASKING.
TEST_F(PluginClusterTest, SessionIndexBatchFollowsAskDuringAMigration) {
    const int n = 30;
    load("session_index", "sessions", {{"index", "user:{user}:sessions"}});
    const auto users = users_on_every_master(1);
    const std::string moved = "user:" + users[0] + ":sessions";
    for (int i = 0; i < n; i++) {
        std::string index = "user:" + users[i % users.size()] + ":sessions";
        on_owner(index, {"SADD", index, "sess:" + std::to_string(i)});
    }
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    const size_t from = static_cast<size_t>(owner(moved));
    size_t to = from;
    for (size_t m : cluster_->masters())
        if (m != from) to = m;
    for (size_t m : cluster_->masters()) calls_on(m).start();
    // Every key of the slot has moved when before_handover runs: A's index is on `to`.
    cluster_->migrate_slot(keywatch::key_slot(moved), to, {}, [&] {
        for (int i = 0; i < n; i++) track("sess:" + std::to_string(i), users[i % users.size()]);
        EXPECT_TRUE(engine_->stat_reaches("plugin.sessions.removed", n))
            << engine_->stats_text({"plugin.sessions.removed", "plugin.sessions.absent"});
    });
    EXPECT_TRUE(engine_->stat_reaches("plugin.sessions.absent", 0)) << "nothing applied twice";
    for (const auto &u : users)
        EXPECT_EQ(on_owner("user:" + u + ":sessions", {"SCARD", "user:" + u + ":sessions"}), "0");
    EXPECT_GE(calls_on(to).calls("asking"), 1) << "the new owner was asked";
}

}  // namespace
