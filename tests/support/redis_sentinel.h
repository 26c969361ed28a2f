// RedisSentinels: a real Sentinel deployment on loopback for tests and benchmarks: a master,
// R replicas of it and N sentinels (`redis-server FILE --sentinel`) monitoring it, each a
// RedisProcess on a free port with its own directory (a sentinel rewrites its FILE there).
// start() waits until every sentinel knows the replicas and the other sentinels, so a
// failover can be started at once. Stops every process (by pid) when it goes away.
// Not thread-safe: one owner thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_process.h"

namespace keywatch {

class RedisSentinels {
  public:
    struct Options {
        int sentinels = 3;
        int replicas = 2;
        std::string name = "mymaster";
        std::string notify = "AKE";  // on the master and the replicas
        // How fast a dead master is failed over. Redis itself is not sanitized, so these
        // hold on a loaded machine; failover_timeout also spaces retried failovers.
        int down_after_ms = 1000;
        int failover_timeout_ms = 4000;
    };

    RedisSentinels();
    explicit RedisSentinels(Options opts);
    ~RedisSentinels();
    RedisSentinels(const RedisSentinels &) = delete;
    RedisSentinels &operator=(const RedisSentinels &) = delete;

    // Starts the master, the replicas (waits until they are in sync) and the sentinels (waits
    // until each sees every replica and every other sentinel). Throws std::runtime_error with
    // the logs when something does not come up.
    void start();

    // redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,.../NAME
    std::string url() const;
    // The data nodes: 0 is the first master, 1.. the replicas.
    size_t nodes() const { return nodes_.size(); }
    RedisProcess &node(size_t i) { return *nodes_[i]; }
    size_t sentinels() const { return sentinels_.size(); }
    RedisProcess &sentinel(size_t i) { return *sentinels_[i]; }
    // Index of the running data node that answers ROLE as master, or -1.
    int master();
    // Waits until a running node other than `old_master` is master and every running
    // sentinel names it; returns its index, or -1 on timeout.
    int wait_new_master(int old_master, int timeout_ms = 30000);
    // Waits until every running replica of the current master is connected and caught up.
    bool wait_replicated(int timeout_ms = 30000);

  private:
    bool wait_sentinels_ready(int timeout_ms);

    Options opts_;
    std::vector<std::unique_ptr<RedisProcess>> nodes_, sentinels_;
};

}  // namespace keywatch
