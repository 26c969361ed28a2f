// Redis Sentinel against a real deployment on loopback (tests/support/redis_sentinel.h: 3
// sentinels, a master, 2 replicas): the engine and the Client find the master through
// redis+sentinel://, and follow it across kill -9 during a burst of tracked keys (nothing
// lost; duplicates only of items the dead master held), a manual SENTINEL FAILOVER (live
// events resume, notify-keyspace-events applied on the new master), a sentinel down, and
// all sentinels down then back.
#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "redis_fixture.h"
#include "tests/support/redis_sentinel.h"

namespace kwtest {
namespace {

using keywatch::RedisSentinels;

// A kw_client_t on the sentinel URL.
class SentinelClient {
  public:
    explicit SentinelClient(const std::string &url) {
        conf_ = kw_conf_new();
        char err[512] = "";
        EXPECT_EQ(kw_conf_set(conf_, "redis.url", url.c_str(), err, sizeof err), KW_OK) << err;
        if (kw_client_new(conf_, &client_, err, sizeof err) != KW_OK)
            throw std::runtime_error(std::string("kw_client_new: ") + err);
    }
    ~SentinelClient() {
        kw_client_free(client_);
        kw_conf_free(conf_);
    }
    std::string error() { return kw_client_last_error(client_); }
    // Tracks keys[i] due ttl_of(i) ms from now, in pipelines of 1000.
    void track_all(const std::vector<std::string> &keys,
                   const std::function<int64_t(size_t)> &ttl_of) {
        for (size_t at = 0; at < keys.size(); at += 1000) {
            ASSERT_EQ(kw_client_pipeline_begin(client_), KW_OK) << error();
            const size_t end = std::min(keys.size(), at + 1000);
            for (size_t i = at; i < end; i++)
                kw_client_track(client_, keys[i].data(), keys[i].size(), "v", 1, ttl_of(i), 0,
                                nullptr);
            size_t n = 0;
            ASSERT_EQ(kw_client_pipeline_end(client_, nullptr, 0, &n), KW_OK) << error();
            ASSERT_EQ(n, end - at);
        }
    }

  private:
    kw_conf_t *conf_ = nullptr;
    kw_client_t *client_ = nullptr;
};

class SentinelTest : public ::testing::Test {
  protected:
    void SetUp() override {
        sentinels_ = std::make_unique<RedisSentinels>();
        sentinels_->start();
    }

    std::string endpoint(int node) {
        return "127.0.0.1:" + std::to_string(sentinels_->node(static_cast<size_t>(node)).port());
    }

    // An engine delivering `events` to sink through the sentinel URL.
    std::unique_ptr<Engine> engine(
        EventSink *sink, const std::string &events,
        const std::vector<std::pair<std::string, std::string>> &settings = {}) {
        auto e = std::make_unique<Engine>(sentinels_->url());
        for (auto &nv : settings) e->set(nv.first, nv.second);
        e->add(sink, {{"events", events}});
        return e;
    }

    // A key set on the current master with a short TTL: its `expired` reaches sink.
    void expire_on_master(const std::string &key) {
        int m = sentinels_->master();
        ASSERT_GE(m, 0);
        sentinels_->node(static_cast<size_t>(m)).command({"SET", key, "v", "PX", "50"});
    }

    // Waits for a replica to replace old_master, then sets "after" on the master until its
    // `expired` reaches sink (the engine may still be moving over), and checks that it came
    // from the new master, whose index goes to *new_master (if given). log (if given) is
    // shown on failure.
    void hear_from_new_master(EventSink &sink, int old_master, int *new_master = nullptr,
                              const FieldsLog *log = nullptr) {
        const int promoted = sentinels_->wait_new_master(old_master);
        if (new_master) *new_master = promoted;
        ASSERT_GE(promoted, 0) << "no replica replaced the master";
        ASSERT_TRUE(wait_until(
            [&] {
                expire_on_master("after");
                return sink.wait_for("expired", "after", -1, milliseconds(500));
            },
            milliseconds(20000)))
            << sink.describe() << (log ? log->describe() : "");
        EXPECT_EQ(sink.events().back().node, endpoint(promoted));
    }

    // A manual SENTINEL FAILOVER, followed as hear_from_new_master says.
    void fail_over_and_hear(EventSink &sink, int *new_master = nullptr) {
        const int old_master = sentinels_->master();
        ASSERT_EQ(sentinels_->sentinel(0).command({"SENTINEL", "FAILOVER", "mymaster"}), "OK");
        hear_from_new_master(sink, old_master, new_master);
    }

    std::unique_ptr<RedisSentinels> sentinels_;
};

// Issue 25: kill -9 of the master during a burst of 20k due tracked keys. Nothing is lost;
// a key is delivered twice only if the dead master held it (its first delivery came from
// there: a claim or an ack that had not reached the replica), never twice by the new one.
TEST_F(SentinelTest, MasterKilledDuringABurstLosesNoTrackedKey) {
    const int old_master = sentinels_->master();
    ASSERT_EQ(old_master, 0);
    const std::string old_node = endpoint(old_master);
    EventSink sink;
    std::atomic<int64_t> killed_ms{0}, first_after_ms{0};
    sink.hook = [&](const Event &e) {
        int64_t zero = 0;
        if (killed_ms.load() > 0 && e.node != old_node)
            first_after_ms.compare_exchange_strong(zero, wall_ms());
    };
    FieldsLog log;
    auto e = engine(&sink, "expired", {{"lease", "3s"}});
    e->watch_log_fields(&log);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    FieldsLog::Line found;
    ASSERT_TRUE(log.find("names " + old_node + " as master", &found)) << log.describe();

    const size_t n = 20000;
    std::vector<std::string> keys;
    for (size_t i = 0; i < n; i++) keys.push_back("burst:" + std::to_string(i));
    SentinelClient c(sentinels_->url());
    c.track_all(keys, [](size_t i) { return 1500 + static_cast<int64_t>(i % 3000); });
    ASSERT_TRUE(sink.wait_count(n / 5, milliseconds(20000))) << sink.size();
    killed_ms = wall_ms();
    sentinels_->node(static_cast<size_t>(old_master)).kill9();
    const int new_master = sentinels_->wait_new_master(old_master);
    ASSERT_GE(new_master, 0) << "no replica was promoted";
    ASSERT_TRUE(wait_until(
        [&] {
            std::set<std::string> unique;
            for (auto &ev : sink.events()) unique.insert(ev.key);
            return unique.size() == n;
        },
        milliseconds(30000)))
        << sink.size() << " deliveries";
    std::map<std::string, std::vector<std::string>> by_key;  // the nodes that delivered each
    for (auto &ev : sink.events()) by_key[ev.key].push_back(ev.node);
    size_t duplicates = 0;
    for (auto &kv : by_key) {
        if (kv.second.size() == 1) continue;
        duplicates += kv.second.size() - 1;
        EXPECT_EQ(kv.second.size(), 2u) << kv.first << " delivered more than twice";
        EXPECT_EQ(kv.second.front(), old_node) << kv.first
                                               << ": a duplicate the dead master "
                                                  "did not hold";
        EXPECT_NE(kv.second.back(), old_node) << kv.first;
    }
    const int64_t recovery = first_after_ms.load() - killed_ms.load();
    std::printf(
        "[ sentinel ] kill -9 to first delivery from the new master: %lld ms; "
        "%zu duplicates of %zu items\n",
        static_cast<long long>(recovery), duplicates, n);
    EXPECT_GT(first_after_ms.load(), 0);
    FieldsLog::Line moved;
    EXPECT_TRUE(
        log.find("the master moved from " + old_node + " to " + endpoint(new_master), &moved))
        << log.describe();
}

// Issue 25: a manual SENTINEL FAILOVER; live events resume from the new master, whose
// notify-keyspace-events the engine sets (notify.enable) as it does on a plain URL.
TEST_F(SentinelTest, ManualFailoverResumesLiveEventsOnTheNewMaster) {
    for (size_t i = 1; i < sentinels_->nodes(); i++)
        ASSERT_EQ(sentinels_->node(i).command({"CONFIG", "SET", "notify-keyspace-events", ""}),
                  "OK");
    EventSink sink;
    auto e = engine(&sink, "expired", {{"notify.enable", "true"}, {"track.enable", "false"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    expire_on_master("before");
    ASSERT_TRUE(sink.wait_for("expired", "before")) << sink.describe();
    int new_master = -1;
    ASSERT_NO_FATAL_FAILURE(fail_over_and_hear(sink, &new_master));
    EXPECT_NE(sentinels_->node(static_cast<size_t>(new_master))
                  .command({"CONFIG", "GET", "notify-keyspace-events"})
                  .find('x'),
              std::string::npos)
        << "the engine set the flags on the new master";
}

// Issue 25: the first sentinel of the URL is down: the next one answers (and the log says
// which), and a failover is still followed.
TEST_F(SentinelTest, OneSentinelDownTheNextAnswers) {
    sentinels_->sentinel(0).stop();
    EventSink sink;
    FieldsLog log;
    auto e = engine(&sink, "expired", {{"track.enable", "false"}});
    e->watch_log_fields(&log);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    const std::string second = "127.0.0.1:" + std::to_string(sentinels_->sentinel(1).port());
    FieldsLog::Line found;
    ASSERT_TRUE(log.find("sentinel " + second + " names", &found)) << log.describe();
    const int old_master = sentinels_->master();
    sentinels_->node(static_cast<size_t>(old_master)).kill9();
    hear_from_new_master(sink, old_master, nullptr, &log);
}

// Issue 25: every sentinel down, then back: the engine keeps hearing the master meanwhile,
// and follows the next failover once the sentinels are back.
TEST_F(SentinelTest, AllSentinelsDownThenBackFailoverIsFollowed) {
    EventSink sink;
    auto e = engine(&sink, "expired", {{"track.enable", "false"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    for (int i = 0; i < 3; i++) sentinels_->sentinel(static_cast<size_t>(i)).stop();
    expire_on_master("while-down");
    ASSERT_TRUE(sink.wait_for("expired", "while-down")) << sink.describe();
    for (int i = 0; i < 3; i++) sentinels_->sentinel(static_cast<size_t>(i)).start();
    // The sentinels must see the master as up again before they can fail it over.
    ASSERT_TRUE(wait_until([&] {
        return sentinels_->sentinel(0)
                   .command({"SENTINEL", "MASTER", "mymaster"})
                   .find("\nmaster\n") != std::string::npos;
    }));
    fail_over_and_hear(sink);
}

// A start with no sentinel answering fails with a message naming each sentinel.
TEST(SentinelStart, NoSentinelAnsweringNamesEachOne) {
    const int a = keywatch::RedisProcess::free_port(), b = keywatch::RedisProcess::free_port();
    const std::string url = "redis+sentinel://127.0.0.1:" + std::to_string(a) +
                            ",127.0.0.1:" + std::to_string(b) + "/mymaster";
    Engine e(url);
    e.set("redis.connect_timeout", "1s");
    EventSink sink;
    e.add(&sink, {{"events", "expired"}});
    ASSERT_NE(e.start(), KW_OK);
    const std::string err = e.last_error();
    EXPECT_TRUE(contains(err, "no sentinel gave a working master for 'mymaster'")) << err;
    EXPECT_TRUE(contains(err, "127.0.0.1:" + std::to_string(a))) << err;
    EXPECT_TRUE(contains(err, "127.0.0.1:" + std::to_string(b))) << err;
}

}  // namespace
}  // namespace kwtest
