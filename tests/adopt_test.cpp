// Zero-change adoption, the event half (design 24, section 10): keys another program writes
// with a TTL (here raw redis commands, as redis-cli or an app would) are tracked at their own
// deadline as soon as keywatch hears the event, follow every later TTL change by the app,
// and are delivered once across engines. Real redis-server; the catch-up scan's tests are in
// adopt_catchup_test.cpp.
#include <hiredis/hiredis.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis_fixture.h"

namespace kwtest {
namespace {

using std::chrono::milliseconds;

class AdoptTest : public RedisTest {
  protected:
    keywatch::RedisProcess::Options options() override {
        keywatch::RedisProcess::Options o;
        o.extra = {"--enable-debug-command", "local"};  // DEBUG SET-ACTIVE-EXPIRE, SLEEP
        return o;
    }

    // An engine adopting `rules`, its handler taking expired events of `keys` (or `filter`).
    std::unique_ptr<Engine> engine(EventSink *sink, const std::string &rules = "prefix=app:",
                                   std::vector<std::pair<std::string, std::string>> filter = {
                                       {"events", "expired"}}) {
        auto e = std::make_unique<Engine>(redis().url());
        e->set("adopt.rules", rules);
        e->set("lease", "5s");
        e->set("sweep.interval", "100ms");
        e->add(sink, filter);
        return e;
    }

    // Sends every command in one pipeline, then reads every reply.
    void pipeline(const std::vector<std::vector<std::string>> &cmds) {
        redisContext *c = redisConnect(redis().host().c_str(), redis().port());
        ASSERT_TRUE(c && !c->err);
        for (const auto &cmd : cmds) {
            std::vector<const char *> v;
            std::vector<size_t> l;
            for (const auto &a : cmd) {
                v.push_back(a.data());
                l.push_back(a.size());
            }
            redisAppendCommandArgv(c, static_cast<int>(v.size()), v.data(), l.data());
        }
        for (size_t i = 0; i < cmds.size(); i++) {
            void *r = nullptr;
            ASSERT_EQ(redisGetReply(c, &r), REDIS_OK);
            freeReplyObject(r);
        }
        redisFree(c);
    }

    // Waits until the engine's sweeper of the one node serves.
    ::testing::AssertionResult sweeping(Engine &e) {
        return e.stat_reaches(
            "node.sweeping." + redis().host() + ":" + std::to_string(redis().port()), 1);
    }
    int64_t expire_time(RedisClient &c, const std::string &key) {
        return std::stoll(c.command({"PEXPIRETIME", key}));
    }
    // Waits until the `due` of `queue` holds key at its PEXPIRETIME (adopted).
    bool adopted(RedisClient &c, const std::string &key, const std::string &queue = "keys") {
        const std::string due = "kw:" + queue + ":{0}:due";
        return wait_until([&] {
            return c.command({"ZSCORE", due, key}) == c.command({"PEXPIRETIME", key});
        });
    }
    bool untracked(RedisClient &c, const std::string &key, const std::string &queue = "keys") {
        const std::string due = "kw:" + queue + ":{0}:due";
        return wait_until([&] { return c.command({"ZSCORE", due, key}) == "(nil)"; });
    }
    // How many times each key was delivered.
    static std::map<std::string, int> counts(const std::vector<Event> &events) {
        std::map<std::string, int> out;
        for (const Event &e : events) out[e.key]++;
        return out;
    }
};

// Two engines, one rule; an app writes keys with SET EX, SETEX, SET + EXPIRE and GETEX.
// Every key is delivered once over both, attempt 1, near its deadline, from the sweep or
// the notification; nothing is left in `due`. Run with active expiry on and off (off: only
// the sweep can deliver, so a key adopted without its deadline is never delivered).
class AdoptDelivery : public AdoptTest, public ::testing::WithParamInterface<bool> {};

TEST_P(AdoptDelivery, KeysAnAppWritesWithSetExAreDeliveredOnceAtTheirDeadlineAcrossTwoEngines) {
    auto raw = client();
    if (!GetParam()) {
        ASSERT_EQ(raw->command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    }
    EventSink a, b;
    auto ea = engine(&a), eb = engine(&b);
    ASSERT_EQ(ea->start(), KW_OK) << ea->last_error();
    ASSERT_EQ(eb->start(), KW_OK) << eb->last_error();
    ASSERT_TRUE(sweeping(*ea));
    ASSERT_TRUE(sweeping(*eb));
    const int n = 800;
    std::vector<std::vector<std::string>> cmds;
    for (int i = 0; i < n; i++) {
        const std::string k = "app:" + std::to_string(i), ttl = std::to_string(2 + i % 4);
        switch (i % 4) {
            case 0:
                cmds.push_back({"SET", k, "v", "EX", ttl});
                break;
            case 1:
                cmds.push_back({"SETEX", k, ttl, "v"});
                break;
            case 2:
                cmds.push_back({"SET", k, "v"});
                cmds.push_back({"EXPIRE", k, ttl});
                break;
            default:
                cmds.push_back({"SET", k, "v"});
                cmds.push_back({"GETEX", k, "EX", ttl});
        }
        cmds.push_back({"SET", "other:" + std::to_string(i), "v", "EX", "2"});  // no rule
    }
    pipeline(cmds);
    std::map<std::string, int64_t> deadline;
    for (int i = 0; i < n; i++) {
        const std::string k = "app:" + std::to_string(i);
        deadline[k] = expire_time(*raw, k);
    }
    // The app's keys only: the others come as untracked live events (active expiry on).
    auto app = [&] {
        std::vector<Event> out;
        for (EventSink *s : {&a, &b})
            for (const Event &e : s->events())
                if (e.key.rfind("app:", 0) == 0) out.push_back(e);
        return out;
    };
    ASSERT_TRUE(
        wait_until([&] { return app().size() >= static_cast<size_t>(n); }, milliseconds(30000)))
        << app().size();
    std::this_thread::sleep_for(milliseconds(500));  // a second delivery would show by now
    std::vector<Event> all = app();
    std::map<std::string, int> seen = counts(all);
    EXPECT_EQ(seen.size(), static_cast<size_t>(n));
    for (const Event &e : all) {
        EXPECT_EQ(seen[e.key], 1) << e.key;
        EXPECT_EQ(e.attempt, 1) << e.key;
        EXPECT_TRUE(e.source == KW_SOURCE_SWEEP || e.source == KW_SOURCE_NOTIFICATION) << e.key;
        EXPECT_EQ(e.deadline_ms, deadline[e.key]) << e.key << ": tracked at its own deadline";
        EXPECT_LE(e.ts_ms - deadline[e.key], 3000) << e.key;
    }
    EXPECT_EQ(raw->command({"ZCARD", "kw:keys:{0}:due"}), "0");
}

INSTANTIATE_TEST_SUITE_P(ActiveExpiry, AdoptDelivery, ::testing::Values(true, false),
                         [](const auto &info) { return info.param ? "On" : "Off"; });

// The app changes a key's TTL after it was adopted; active expiry is off, so only the sweep
// delivers: what it delivers, and when, is what the queue made of the change.
struct TtlCase {
    const char *name;
    // The change, made once `app:k` (TTL 3 s) is adopted.
    std::vector<std::vector<std::string>> change;
    // Keys delivered (from the sweep), each at its PEXPIRETIME after the change; none else.
    std::vector<std::string> delivered;
    // Keys that must leave `due` (untracked) right after the change.
    std::vector<std::string> untracked;
};

// gtest shows a case by its name (--gtest_list_tests, "where GetParam() = ..."), not as the
// struct's raw bytes.
void PrintTo(const TtlCase &c, std::ostream *os) {
    *os << c.name;
}

class TtlChangesByTheAppAreHonoured : public AdoptTest,
                                      public ::testing::WithParamInterface<TtlCase> {};

TEST_P(TtlChangesByTheAppAreHonoured, Case) {
    const TtlCase &c = GetParam();
    auto raw = client();
    ASSERT_EQ(raw->command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    raw->command({"SET", "app:k", "v", "EX", "3"});
    ASSERT_TRUE(adopted(*raw, "app:k"));
    std::string blob;
    for (auto cmd : c.change) {
        if (cmd[0] == "RESTORE") {
            raw->command({"SET", "dump:src", "v"});
            cmd.push_back("dummy");
            // DUMP is binary: restored through EVAL so the blob never leaves Redis.
            ASSERT_EQ(raw->command({"EVAL",
                                    "return redis.call('RESTORE', KEYS[1], ARGV[1], "
                                    "redis.call('DUMP', KEYS[2]))",
                                    "2", cmd[1], "dump:src", cmd[2]}),
                      "OK");
            continue;
        }
        raw->command(cmd);
    }
    std::map<std::string, int64_t> deadline;
    for (const std::string &k : c.delivered) {
        ASSERT_TRUE(adopted(*raw, k)) << k;
        deadline[k] = expire_time(*raw, k);
    }
    for (const std::string &k : c.untracked) EXPECT_TRUE(untracked(*raw, k)) << k;
    int64_t last = 0;
    for (auto &kv : deadline) last = std::max(last, kv.second);
    // Every deadline passed, plus room for the sweep: then what was delivered is all there is.
    const int64_t until = std::max<int64_t>(last, keywatch::wall_ms() + 3500) + 1500;
    for (const std::string &k : c.delivered)
        EXPECT_TRUE(sink.wait_for("expired", k, -1, milliseconds(15000))) << k << sink.describe();
    std::this_thread::sleep_for(milliseconds(std::max<int64_t>(0, until - keywatch::wall_ms())));
    std::map<std::string, int> seen = counts(sink.events());
    EXPECT_EQ(seen.size(), c.delivered.size()) << sink.describe();
    for (const Event &ev : sink.events()) {
        ASSERT_TRUE(deadline.count(ev.key)) << ev.key << " delivered: " << sink.describe();
        EXPECT_EQ(seen[ev.key], 1) << ev.key;
        EXPECT_EQ(ev.deadline_ms, deadline[ev.key]) << ev.key << ": at its new deadline";
        EXPECT_GE(ev.ts_ms, deadline[ev.key]) << ev.key;
        EXPECT_EQ(ev.source, KW_SOURCE_SWEEP) << ev.key;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Adopt, TtlChangesByTheAppAreHonoured,
    ::testing::Values(TtlCase{"ExpireLater", {{"PEXPIRE", "app:k", "5000"}}, {"app:k"}, {}},
                      TtlCase{"ExpireEarlier", {{"PEXPIRE", "app:k", "1000"}}, {"app:k"}, {}},
                      TtlCase{"Persist", {{"PERSIST", "app:k"}}, {}, {"app:k"}},
                      TtlCase{"SetWithoutTtl", {{"SET", "app:k", "v2"}}, {}, {"app:k"}},
                      TtlCase{"SetKeepTtl", {{"SET", "app:k", "v2", "KEEPTTL"}}, {"app:k"}, {}},
                      TtlCase{"Del", {{"DEL", "app:k"}}, {}, {"app:k"}},
                      TtlCase{"Rename", {{"RENAME", "app:k", "app:r"}}, {"app:r"}, {"app:k"}},
                      TtlCase{"RenameOutOfRule", {{"RENAME", "app:k", "other:r"}}, {}, {"app:k"}},
                      TtlCase{"Copy", {{"COPY", "app:k", "app:c"}}, {"app:k", "app:c"}, {}},
                      TtlCase{"Restore", {{"RESTORE", "app:x", "2000"}}, {"app:k", "app:x"}, {}},
                      TtlCase{"Move", {{"MOVE", "app:k", "1"}}, {}, {"app:k"}},
                      TtlCase{"ExpireInThePast", {{"EXPIRE", "app:k", "0"}}, {}, {"app:k"}}),
    [](const auto &info) { return std::string(info.param.name); });

// A key tracked with kw_client_track (snapshot) that a rule with its own queue matches: the
// app's EXPIRE moves its deadline in `keys`, where it keeps its record and snapshot.
TEST_F(AdoptTest, ATrackedKeyKeepsItsQueueRecordAndSnapshot) {
    auto raw = client();
    ASSERT_EQ(raw->command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    EventSink keys, sessions;
    auto e =
        engine(&keys, "prefix=sess: queue=sessions", {{"events", "expired"}, {"queue", "keys"}});
    e->add(&sessions, {{"events", "expired"}, {"queue", "sessions"}});
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    kw_client_t *client = nullptr;
    kw_conf_t *conf = kw_conf_new();
    char err[256] = "";
    ASSERT_EQ(kw_conf_set(conf, "redis.url", redis().url().c_str(), err, sizeof err), KW_OK);
    ASSERT_EQ(kw_client_new(conf, &client, err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_client_track(client, "sess:t", 6, "tracked", 7, 60000, KW_TRACK_SNAPSHOT, nullptr),
              KW_OK);
    kw_client_free(client);
    kw_conf_free(conf);
    raw->command({"SET", "sess:a", "app", "PX", "2500"});  // adopted into `sessions`
    raw->command({"PEXPIRE", "sess:t", "2000"});           // the app shortens the tracked one
    ASSERT_TRUE(adopted(*raw, "sess:t", "keys"))
        << raw->command({"ZRANGE", "kw:keys:{0}:due", "0", "-1", "WITHSCORES"});
    ASSERT_TRUE(adopted(*raw, "sess:a", "sessions"));
    EXPECT_EQ(raw->command({"ZSCORE", "kw:sessions:{0}:due", "sess:t"}), "(nil)");
    ASSERT_TRUE(keys.wait_for("expired", "sess:t")) << keys.describe();
    ASSERT_TRUE(sessions.wait_for("expired", "sess:a")) << sessions.describe();
    std::this_thread::sleep_for(milliseconds(500));
    ASSERT_EQ(keys.size(), 1u) << keys.describe();
    ASSERT_EQ(sessions.size(), 1u) << sessions.describe();
    const Event t = keys.events()[0];
    EXPECT_TRUE(t.has_value);
    EXPECT_EQ(t.value, "tracked") << "the snapshot kept, restamped for the new deadline";
    EXPECT_FALSE(sessions.events()[0].has_value) << "no snapshot rule";
}

// A snapshot rule: the app rewrites an adopted key's value with SET KEEPTTL, which
// publishes `set` only (the TTL stays). The adopt script finds the key already tracked at
// its deadline and must still store the new value: the event delivers v2, not v1.
TEST_F(AdoptTest, ASetKeepTtlRefreshesTheSnapshot) {
    auto raw = client();
    ASSERT_EQ(raw->command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    EventSink sink;
    auto e = engine(&sink, "prefix=app: snapshot=true");
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    raw->command({"SET", "app:k", "v1", "EX", "3"});
    ASSERT_TRUE(adopted(*raw, "app:k"));
    const std::string deadline = std::to_string(expire_time(*raw, "app:k"));
    auto snapshot = [&] { return raw->command({"HGET", "kw:keys:{0}:data", "p:app:k"}); };
    ASSERT_TRUE(wait_until([&] { return snapshot() == deadline + "|v1"; })) << snapshot();
    raw->command({"SET", "app:k", "v2", "KEEPTTL"});
    ASSERT_EQ(std::to_string(expire_time(*raw, "app:k")), deadline) << "KEEPTTL kept it";
    EXPECT_TRUE(wait_until([&] { return snapshot() == deadline + "|v2"; })) << snapshot();
    ASSERT_TRUE(sink.wait_for("expired", "app:k", -1, milliseconds(15000))) << sink.describe();
    const Event ev = sink.events()[0];
    EXPECT_TRUE(ev.has_value);
    EXPECT_EQ(ev.value, "v2") << "the value the key had when it expired";
    EXPECT_EQ(ev.source, KW_SOURCE_SWEEP);
}

// Events subscribed only for adoption (here `set` and `expire`: the handler takes `expired`)
// are subscribed in the rule's database alone: another database's SET EX traffic never
// reaches the engine (with every database's channels it was read and dropped).
TEST_F(AdoptTest, AdoptionEventsOfAnotherDatabaseNeverReachTheEngine) {
    auto raw = client();
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    std::vector<std::vector<std::string>> cmds = {{"SELECT", "1"}};
    for (int i = 0; i < 200; i++)
        cmds.push_back({"SET", "app:" + std::to_string(i), "v", "EX", "600"});
    pipeline(cmds);
    raw->command({"SET", "app:db0", "v", "EX", "600"});  // after them on the server
    ASSERT_TRUE(adopted(*raw, "app:db0"));
    EXPECT_TRUE(e->stat_reaches("events.received", at_most(2))) << "app:db0's set and expire only";
    EXPECT_EQ(raw->command({"ZCARD", "kw:keys:{0}:due"}), "1");
}

// 10 000 keys in one pipeline: adopt calls carry many keys each, not one per event.
TEST_F(AdoptTest, AdoptionsAreBatchedPerLoopIteration) {
    auto raw = client();
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    raw->command({"CONFIG", "RESETSTAT"});
    const int n = 10000;
    std::vector<std::vector<std::string>> cmds;
    for (int i = 0; i < n; i++)
        cmds.push_back({"SET", "app:" + std::to_string(i), "v", "EX", "600"});
    pipeline(cmds);
    ASSERT_TRUE(wait_until([&] {
        return raw->command({"ZCARD", "kw:keys:{0}:due"}) == std::to_string(n);
    })) << raw->command({"ZCARD", "kw:keys:{0}:due"});
    std::string stats = raw->command({"INFO", "commandstats"});
    size_t at = stats.find("cmdstat_evalsha:calls=");
    ASSERT_NE(at, std::string::npos) << stats;
    int64_t calls = std::stoll(stats.substr(at + 22));
    // One call per 100 keys, give or take the sweeps and reads cut short; one per event
    // would be 20 000.
    EXPECT_LE(calls, n / 100 * 3) << stats;
}

// A TTL shorter than the way to the adopt script: the key is gone when it runs. It is not
// tracked (nothing to adopt), counted in adopt.late (what an event said could have set a TTL,
// found gone), and delivered once from its live notification. A key adopted in time is not
// late.
TEST_F(AdoptTest, AKeyWhoseTtlEndsBeforeItsAdoptionIsCountedLate) {
    auto raw = client();
    EventSink sink;
    auto e = engine(&sink);
    ASSERT_EQ(e->start(), KW_OK) << e->last_error();
    ASSERT_TRUE(sweeping(*e));
    raw->command({"SET", "app:in-time", "v", "EX", "600"});
    ASSERT_TRUE(adopted(*raw, "app:in-time"));
    ASSERT_TRUE(e->stat_reaches("adopt.adopted", 1));
    EXPECT_TRUE(e->stat_reaches("adopt.late", at_most(0)));
    raw->command({"MULTI"});
    raw->command({"SET", "app:short", "v", "PX", "1"});
    raw->command({"DEBUG", "SLEEP", "0.01"});
    raw->command({"EXEC"});
    ASSERT_TRUE(wait_until([&] { return raw->command({"EXISTS", "app:short"}) == "0"; }));
    ASSERT_TRUE(sink.wait_for("expired", "app:short")) << sink.describe();
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_EQ(sink.size(), 1u) << sink.describe();
    EXPECT_EQ(sink.events()[0].source, KW_SOURCE_NOTIFICATION);
    // Its `set` and `expire` events, in one adopt call or two.
    EXPECT_TRUE(e->stat_reaches("adopt.late", at_least(1)));
    EXPECT_EQ(raw->command({"ZRANGE", "kw:keys:{0}:due", "0", "-1"}), "app:in-time");
    // A marker adopted after them on the same connection: their replies are all in.
    raw->command({"SET", "app:marker", "v", "EX", "100"});
    ASSERT_TRUE(e->stat_reaches("adopt.adopted", 2));
    EXPECT_TRUE(e->stat_reaches("adopt.late", at_most(2)));
}

}  // namespace
}  // namespace kwtest
