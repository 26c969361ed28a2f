// What the cluster tests share (cluster_test.cpp, cluster_tls_test.cpp): a kw_client_t of
// the cluster (ClusterClient), keys spread over every master, a key a given master serves,
// and a key expired by Redis on its owner. Header-only; gtest assertions; one thread.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/redis/slots.h"
#include "redis_fixture.h"
#include "tests/support/redis_cluster.h"

namespace kwtest {

class ClusterClient {
  public:
    // A client seeded at url, with more options (the tls.* ones, say).
    explicit ClusterClient(const std::string &url,
                           const std::vector<std::pair<std::string, std::string>> &options = {}) {
        conf_ = kw_conf_new();
        char err[512] = "";
        EXPECT_EQ(kw_conf_set(conf_, "redis.url", url.c_str(), err, sizeof err), KW_OK) << err;
        for (auto &nv : options)
            EXPECT_EQ(kw_conf_set(conf_, nv.first.c_str(), nv.second.c_str(), err, sizeof err),
                      KW_OK)
                << err;
        if (kw_client_new(conf_, &client_, err, sizeof err) != KW_OK)
            throw std::runtime_error(std::string("kw_client_new: ") + err);
    }
    ~ClusterClient() {
        kw_client_free(client_);
        kw_conf_free(conf_);
    }
    ClusterClient(const ClusterClient &) = delete;
    ClusterClient &operator=(const ClusterClient &) = delete;

    kw_client_t *get() { return client_; }
    std::string error() { return kw_client_last_error(client_); }
    // Tracks every key in one pipeline; all must succeed.
    void track_all(const std::vector<std::string> &keys, int64_t ttl_ms) {
        ASSERT_EQ(kw_client_pipeline_begin(client_), KW_OK) << error();
        for (auto &k : keys)
            kw_client_track(client_, k.data(), k.size(), "v", 1, ttl_ms, 0, nullptr);
        size_t n = 0;
        ASSERT_EQ(kw_client_pipeline_end(client_, nullptr, 0, &n), KW_OK) << error();
        ASSERT_EQ(n, keys.size());
    }
    std::string inspect() {
        char *json = nullptr;
        EXPECT_EQ(kw_client_inspect_json(client_, &json), KW_OK) << error();
        std::string out = json ? json : "";
        kw_free(json);
        return out;
    }

  private:
    kw_conf_t *conf_ = nullptr;
    kw_client_t *client_ = nullptr;
};

// Keys spread over every master.
inline std::vector<std::string> many_keys(const std::string &prefix, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; i++) keys.push_back(prefix + std::to_string(i));
    return keys;
}

// A key (with a readable prefix) whose slot the node `index` serves as master now.
inline std::string key_on(keywatch::RedisCluster &cluster, size_t index,
                          const std::string &prefix) {
    for (int i = 0; i < 100000; i++) {
        std::string key = prefix + std::to_string(i);
        if (cluster.master_of_slot(keywatch::key_slot(key)) == static_cast<int>(index)) return key;
    }
    ADD_FAILURE() << "no key found for node " << index;
    return prefix;
}

// SET key PX on the master that owns it, then touch it until Redis expires it.
inline void expire_on_owner(keywatch::RedisCluster &cluster, const std::string &key) {
    int owner = cluster.master_of_slot(keywatch::key_slot(key));
    ASSERT_GE(owner, 0);
    auto &node = cluster.node(static_cast<size_t>(owner));
    ASSERT_EQ(node.command({"SET", key, "v", "PX", "30"}), "OK");
    ASSERT_TRUE(wait_until([&] { return node.command({"EXISTS", key}) == "0"; }));
}

}  // namespace kwtest
