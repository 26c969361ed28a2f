// Configuration once: every setting a component uses reaches it from Config (set here to
// values that are no default), and the one backoff rule every retry uses.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/base/backoff.h"
#include "core/config/config.h"
#include "core/engine/config_slices.h"

namespace keywatch {
namespace {

Config odd_config() {
    Config c;
    std::string err;
    for (auto [name, value] :
         {std::pair<const char *, const char *>{"redis.url", "redis://h:7001/0"},
          {"redis.connect_timeout", "1234ms"},
          {"notify.enable", "true"},
          {"reconnect.min", "7ms"},
          {"reconnect.max", "777ms"},
          {"health.interval", "321ms"},
          {"health.timeout", "4321ms"},
          {"cluster.refresh", "2345ms"},
          {"cluster.migration_wait", "8765ms"},
          {"namespace", "ns1"},
          {"lease", "3456ms"},
          {"hold.timeout", "654321ms"},
          {"retry.base", "11ms"},
          {"retry.max", "1111ms"},
          {"max_attempts", "9"},
          {"sweep.batch", "123"},
          {"sweep.interval", "45ms"},
          {"sweep.scan_interval", "56s"},
          {"track.done_window", "6789ms"},
          {"dedupe.enable", "true"},
          {"dedupe.ttl", "9876ms"},
          {"catchup.enable", "false"},
          {"catchup.count", "77"},
          {"catchup.rate", "5432"}})
        EXPECT_EQ(c.set(name, value, &err), 0) << name << ": " << err;
    EXPECT_EQ(c.validate(&err), 0) << err;
    return c;
}

TEST(ConfigSlices, SubscriberGetsEverySettingFromConfig) {
    Subscriber::Options o = subscriber_options(odd_config());
    EXPECT_EQ(o.connect_timeout_ms, 1234);
    EXPECT_EQ(o.reconnect.min_ms, 7);
    EXPECT_EQ(o.reconnect.max_ms, 777);
    EXPECT_EQ(o.health_interval_ms, 321);
    EXPECT_EQ(o.health_timeout_ms, 4321);
    EXPECT_TRUE(o.notify_enable);
    EXPECT_EQ(o.ns, "ns1");
}

TEST(ConfigSlices, SweeperGetsEverySettingFromConfig) {
    Sweeper::Options o = sweeper_options(odd_config(), "me");
    EXPECT_EQ(o.ns, "ns1");
    EXPECT_EQ(o.owner, "me");
    EXPECT_EQ(o.lease_ms, 3456);
    EXPECT_EQ(o.hold_timeout_ms, 654321);
    EXPECT_EQ(o.retry_base_ms, 11);
    EXPECT_EQ(o.retry_max_ms, 1111);
    EXPECT_EQ(o.max_attempts, 9);
    EXPECT_EQ(o.batch, 123);
    EXPECT_EQ(o.interval_ms, 45);
    EXPECT_EQ(o.done_window_ms, 6789);
    EXPECT_TRUE(o.dedupe);
    EXPECT_EQ(o.dedupe_ttl_ms, 9876);
    EXPECT_EQ(o.connect_timeout_ms, 1234);
    EXPECT_EQ(o.reconnect.min_ms, 7);
    EXPECT_EQ(o.reconnect.max_ms, 777);
    EXPECT_EQ(o.scan_interval_ms, 56000);
    EXPECT_EQ(o.migration_wait_ms, 8765);
    EXPECT_FALSE(o.catchup_enable);
    EXPECT_EQ(o.catchup_count, 77);
    EXPECT_EQ(o.catchup_rate, 5432);
}

TEST(ConfigSlices, FanoutGetsItsSettingsAndBothSlices) {
    Fanout::Options o = fanout_options(odd_config(), "me");
    EXPECT_EQ(o.refresh_ms, 2345);
    EXPECT_EQ(o.seed.host, "h");
    EXPECT_EQ(o.seed.port, 7001);
    EXPECT_EQ(o.sub.health_timeout_ms, 4321);
    EXPECT_EQ(o.sweep.lease_ms, 3456);
}

TEST(ConfigSlices, DefaultsAreConfigsOwn) {
    Config c;
    Fanout::Options o = fanout_options(c, "me");
    EXPECT_EQ(o.sub.connect_timeout_ms, c.connect_timeout_ms);
    EXPECT_EQ(o.sub.reconnect.min_ms, c.reconnect_min_ms);
    EXPECT_EQ(o.sub.reconnect.max_ms, c.reconnect_max_ms);
    EXPECT_EQ(o.sweep.lease_ms, c.lease_ms);
    EXPECT_EQ(o.sweep.batch, c.sweep_batch);
    EXPECT_EQ(o.refresh_ms, c.cluster_refresh_ms);
}

// A sentinel URL is one URL, commas and all (it used to be split into "seeds" at its first
// comma and refused as an unknown scheme); redis.url reads it back whole, password hidden,
// and the sentinel.* options reach every URL the engine and the client use.
TEST(ConfigSlices, SentinelUrlPassesThroughWhole) {
    Config c;
    std::string err, got;
    ASSERT_EQ(c.set("redis.url", "redis+sentinel://u:secret@h1:1,h2:2/m/2", &err), KW_OK) << err;
    ASSERT_EQ(c.get("redis.url", &got), KW_OK);
    EXPECT_EQ(got, "redis+sentinel://u:***@h1:1,h2:2/m/2");
    ASSERT_EQ(c.set("sentinel.password", "sp", &err), KW_OK) << err;
    ASSERT_EQ(c.set("sentinel.username", "su", &err), KW_OK) << err;
    ASSERT_EQ(c.set("sentinel.tls", "yes", &err), KW_OK) << err;
    ASSERT_EQ(c.get("sentinel.password", &got), KW_OK);
    EXPECT_EQ(got, "***");
    const RedisUrl u = c.effective_url();
    ASSERT_EQ(u.sentinels.size(), 2u);
    EXPECT_EQ(u.master_name, "m");
    EXPECT_EQ(u.db, 2);
    EXPECT_EQ(u.sentinel_at(0).password, "sp");
    EXPECT_EQ(u.sentinel_at(0).user, "su");
    EXPECT_TRUE(u.sentinel_at(0).tls);
    ASSERT_EQ(c.effective_seeds().size(), 1u);
    EXPECT_EQ(c.effective_seeds()[0].sentinel.password, "sp");
    EXPECT_NE(c.set("sentinel.tls", "maybe", &err), KW_OK);
    EXPECT_NE(err.find("sentinel.tls"), std::string::npos) << err;
    ASSERT_EQ(c.set("redis.mode", "cluster", &err), KW_OK);
    EXPECT_NE(c.validate(&err), KW_OK);
    EXPECT_NE(err.find("sentinel"), std::string::npos) << err;
}

TEST(Backoff, DoublesFromMinUpToMax) {
    Backoff b{100, 1000};
    EXPECT_EQ(b.delay(0), 100);
    EXPECT_EQ(b.delay(1), 200);
    EXPECT_EQ(b.delay(2), 400);
    EXPECT_EQ(b.delay(3), 800);
    EXPECT_EQ(b.delay(4), 1000);
    EXPECT_EQ(b.delay(1000000), 1000);  // no overflow however long it fails
    EXPECT_EQ(b.after(0), 100);
    EXPECT_EQ(b.after(100), 200);
    EXPECT_EQ(b.after(800), 1000);
    EXPECT_EQ(b.after(1000), 1000);
}

TEST(Backoff, JitterStaysWithinHalfToFullDelay) {
    Backoff b{100, 10000};
    for (int step = 0; step < 10; step++) {
        int64_t d = b.delay(step);
        EXPECT_EQ(b.jittered(step, 0), d / 2);
        EXPECT_EQ(b.jittered(step, static_cast<uint64_t>(d / 2)), d);
        for (uint64_t r : {uint64_t{1}, uint64_t{12345}, UINT64_MAX}) {
            int64_t j = b.jittered(step, r);
            EXPECT_GE(j, d / 2);
            EXPECT_LE(j, d);
        }
    }
}

TEST(Backoff, AWaitBeforeADeadlineLeavesRoomForSeveralTries) {
    EXPECT_EQ(before_deadline(30000, 8000), 2000);     // a quarter of the time left
    EXPECT_EQ(before_deadline(1000, 8000), 1000);      // a shorter wait stays
    EXPECT_EQ(before_deadline(30000, 200), kPollMs);   // never below kPollMs
    EXPECT_EQ(before_deadline(30000, -500), kPollMs);  // past the deadline: try now and then
    EXPECT_EQ(before_deadline(50, -500), 50);
}

TEST(Backoff, NeverExceedsItsMaximum) {
    // A minimum above the maximum (Config::validate refuses it) still waits no longer.
    Backoff b{500, 100};
    EXPECT_EQ(b.delay(0), 100);
    EXPECT_EQ(b.after(0), 100);
    EXPECT_LE(b.jittered(0, UINT64_MAX), 100);
}

}  // namespace
}  // namespace keywatch
