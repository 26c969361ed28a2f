// RedisCluster: a real Redis Cluster on loopback for tests and benchmarks: N masters with
// R replicas each (default 3 x 1), every node a RedisProcess with cluster mode on, created
// with `redis-cli --cluster create`, waited on until every node reports cluster_state:ok
// and agrees on the slots. Stops every node (by pid) when it goes away.
// Not thread-safe: one owner thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_process.h"
#include "tests/support/test_certificates.h"

namespace keywatch {

class RedisCluster {
  public:
    struct Options {
        int masters = 3;
        int replicas_per_master = 1;
        std::string notify = "AKE";
        bool appendonly = false;
        int node_timeout_ms = 2000;      // cluster-node-timeout: how fast failover starts
        std::string host = "127.0.0.1";  // every node binds and announces it: or "::1"
        // TLS between every client and node, nodes and replicas (tls-cluster and
        // tls-replication yes, tls-auth-clients yes), certificates from certificates().
        // Only: each node's port() is its tls-port and it has no plain port (port 0);
        // node(i).command() talks to it over a unix socket. BesidePlain: a tls-port
        // (tls_port(i)) beside each plain port().
        enum class Tls { None, Only, BesidePlain } tls = Tls::None;
    };

    RedisCluster();
    explicit RedisCluster(Options opts);
    ~RedisCluster();
    RedisCluster(const RedisCluster &) = delete;
    RedisCluster &operator=(const RedisCluster &) = delete;

    // Starts the nodes, creates the cluster, waits until it is healthy. Throws
    // std::runtime_error with the nodes' logs when it does not come up.
    void start();
    // Waits until every running node reports cluster_state:ok and all 16384 slots are
    // served by reachable masters. Returns false on timeout.
    bool wait_healthy(int timeout_ms = 30000);

    // Waits until every running master has its replicas connected and caught up with its
    // replication offset (so that a write made before the call survives a failover).
    bool wait_replicated(int timeout_ms = 30000);
    // Waits until every node sees every replica as the replica of its master.
    bool wait_roles_known(int timeout_ms = 30000);

    size_t size() const { return nodes_.size(); }
    RedisProcess &node(size_t i) { return *nodes_[i]; }
    // Indexes of the nodes that are masters now (asks the running nodes).
    std::vector<size_t> masters();
    // Index of the node serving `slot` as master now, or -1.
    int master_of_slot(int slot);
    // Index of a node by port, or -1.
    int index_of_port(int port) const;
    // Moves `slot` with every key in it from its master to master `to`, step by step as
    // `redis-cli --cluster reshard` does: SETSLOT IMPORTING and MIGRATING, MIGRATE in
    // batches (keys for which `first` is true before the others, when given), then
    // `before_handover` if given (a large slot takes a while; an interrupted reshard is
    // finished later), then SETSLOT NODE on every master. Throws std::runtime_error when a
    // step fails.
    void migrate_slot(int slot, size_t to,
                      const std::function<bool(const std::string &)> &first = {},
                      const std::function<void()> &before_handover = {});
    // "redis://127.0.0.1:PORT" (or "redis://[::1]:PORT", "rediss://" with Tls::Only) of a
    // running node, to seed a client.
    std::string seed_url();
    // With TLS: the CA and certificates (client_options() for a keywatch client); else null.
    const TestCertificates *certificates() const { return certs_.get(); }
    // Node i's tls-port (Tls::BesidePlain; with Tls::Only its port()); 0 without TLS.
    int tls_port(size_t i) const { return tls_ports_.empty() ? 0 : tls_ports_[i]; }

  private:
    // The redis-server arguments of node i's TLS (none without it).
    std::vector<std::string> tls_args(size_t i) const;
    // `redis-cli --cluster create` of every node, over TLS when the cluster has it.
    std::string create_command() const;

    Options opts_;
    std::unique_ptr<TestCertificates> certs_;
    std::vector<int> tls_ports_;
    std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace keywatch
