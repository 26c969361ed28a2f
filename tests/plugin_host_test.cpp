// The plugin host seen from inside (core/plugins/plugin_set.h), on a real redis-server: a
// plugin with handle_batch on a host that emulates an older keywatch (a host table that
// ends before event_set_error, as 0.2's did) is called per event and still gets its
// reasons recorded, through err.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/client/client.h"
#include "core/engine/engine.h"
#include "core/plugins/plugin_set.h"
#include "embedded/redis_process.h"
#include "tests/wait.h"

namespace {

using kwtest::wait_until;

class PluginHostTest : public ::testing::Test {
  protected:
    void SetUp() override {
        redis_ = std::make_unique<keywatch::RedisProcess>(keywatch::RedisProcess::Options{});
        redis_->start();
        std::string err;
        ASSERT_EQ(config_.set("redis.url", redis_->url(), &err), KW_OK) << err;
        ASSERT_EQ(config_.set("retry.base", "50ms", &err), KW_OK) << err;
        ASSERT_EQ(config_.set("max_attempts", "2", &err), KW_OK) << err;
    }
    // A plugin counter, 0 until the plugin first adds to it.
    int64_t counter(const keywatch::PluginSet &set, const std::string &name) {
        int64_t v = 0;
        return set.stat(name, &v) == KW_OK ? v : -1;
    }

    keywatch::Config config_;
    std::unique_ptr<keywatch::RedisProcess> redis_;
};

TEST_F(PluginHostTest, ABatchPluginOnAnOlderHostIsCalledPerEventWithItsReasons) {
    keywatch::Engine engine(config_);
    keywatch::PluginSet set(config_, nullptr);
    set.emulate_host_table_size(offsetof(kw_plugin_host_t, event_set_error));
    keywatch::PluginSpec spec;
    spec.plugin = std::string(KW_TEST_PLUGIN_DIR) + "/batcher.so";
    spec.instance = "b";
    std::string err;
    ASSERT_EQ(set.add(engine, spec, &err), KW_OK) << err;
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    keywatch::Client client(config_);
    // minus:1's handle returns -1: not a kw_result, rejected as always (handle_batch's
    // KW_PLUGIN_NO_RESULT has that value, but means nothing from handle).
    std::vector<std::string> keys = {"reject:1", "minus:1"};
    for (int i = 1; i <= 20; i++) keys.push_back("ack:" + std::to_string(i));
    for (auto &k : keys) ASSERT_EQ(client.track(k, "v", 100, 0, nullptr), KW_OK) << k;
    ASSERT_TRUE(wait_until([&] { return counter(set, "plugin.b.single") == 22; }))
        << counter(set, "plugin.b.single");
    EXPECT_EQ(counter(set, "plugin.b.batches"), 0) << "an older host never calls handle_batch";
    std::vector<keywatch::DeadLetter> dead;
    ASSERT_TRUE(wait_until([&] {
        return client.dead_list("keys", 10, &dead) == KW_OK && dead.size() == 2;
    })) << client.last_error();
    std::map<std::string, keywatch::DeadLetter> by_id;
    for (auto &d : dead) by_id[d.id] = d;
    EXPECT_EQ(by_id["reject:1"].error, "b: reject reject:1:1");
    EXPECT_EQ(by_id["minus:1"].error, "b: returned -1, not a kw_result (rejected)");
    EXPECT_EQ(by_id["minus:1"].attempts, 1);
    EXPECT_EQ(engine.stop(5000), KW_OK) << engine.last_error();
}

}  // namespace
