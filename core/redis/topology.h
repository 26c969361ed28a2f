// Redis Cluster topology: which master serves which slot, parsed from CLUSTER SHARDS
// (Redis 7.0+) or CLUSTER SLOTS (older servers). Pure data and functions: thread-safe once
// built.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/redis/endpoint.h"
#include "core/redis/url.h"

namespace keywatch {

struct ClusterNode {
    std::string host;
    int port = 0;
    std::string id;
    std::string hostname;  // CLUSTER SHARDS' `hostname` (cluster-announce-hostname), if any
    Endpoint address() const { return {host, port, ""}; }
    // "host:port" or "[v6]:port": the name RedisUrl::endpoint gives the same node.
    std::string endpoint() const { return address().str(); }
};

// A shard that holds slots but has no working master: its master is marked failed and no
// replica took over (yet). Its slots are uncovered.
struct DownShard {
    ClusterNode master;                       // the failed master as the cluster lists it
    size_t slots = 0;                         // how many slots it holds
    std::vector<std::pair<int, int>> ranges;  // which: first and last slot of each range
};

struct Topology {
    std::vector<ClusterNode> masters;  // masters that serve at least one slot
    std::vector<DownShard> down;       // CLUSTER SHARDS only: shards without a working master
    std::vector<int16_t> slot_owner = std::vector<int16_t>(16384, -1);  // index in masters

    // Slots no master serves.
    size_t uncovered() const;
    // The ranges (first, last) of slots that no shard holds, working or down: unassigned
    // (CLUSTER DELSLOTS, or never added; CLUSTER INFO counts the others in slots_assigned).
    std::vector<std::pair<int, int>> unassigned() const;
    // The master serving `slot`, or null.
    const ClusterNode *master_for_slot(int slot) const;
    // Index of a master by endpoint, or -1.
    int find(const std::string &endpoint) const;
    // The URL of the node at `node`: the seed's settings (credentials, db, TLS options) there.
    // Over TLS the name verified in its certificate and sent as SNI is the master's announced
    // hostname where the cluster gives one (and tls.server_name is not set), else its address.
    RedisUrl url_of(const RedisUrl &seed, const Endpoint &node) const;
};

// Parse the replies. `fallback_host` replaces an empty or "?" address (a node that does
// not know its own IP). False with *err when the reply has an unexpected shape.
// CLUSTER SHARDS lists a node's plain `port` and its `tls-port`: tls (a rediss:// seed) takes
// `tls-port`, otherwise `port`; a node with only the other kind is refused, naming it and
// what to do. CLUSTER SLOTS (and MOVED/ASK) give the port of the asking connection's kind
// (under tls-cluster yes; under no, the plain one): taken as given.
bool parse_cluster_shards(const redisReply *r, const std::string &fallback_host, Topology *out,
                          std::string *err, bool tls = false);
bool parse_cluster_slots(const redisReply *r, const std::string &fallback_host, Topology *out,
                         std::string *err);

}  // namespace keywatch

namespace keywatch {

struct RedisUrl;

// Whether probe_topology asks the seed for the topology (CLUSTER SHARDS / SLOTS): unless
// told standalone; a unix socket is taken as standalone without asking.
bool probes_topology(const std::string &mode, const RedisUrl &seed);

// Asks the seed, over a short blocking connection, whether it is a cluster node and if so
// for the topology. mode: "auto", "standalone" (returns at once: not a cluster) or
// "cluster" (a node without cluster support is an error). Returns a KW status; *err says
// what was wrong and what to do.
// named_timeout_ms: the redis.connect_timeout a message names when nothing answered (the
// part of it left for this attempt is timeout_ms); 0: timeout_ms itself. *unreachable (if
// given) is set when the connection itself could not be made (refused, unreachable: a
// server may still be starting), as opposed to a server that answered wrongly; *loading (if
// given) when the server answered -LOADING (it is loading its data set: KW_ERR_TIMEOUT).
int probe_topology(const RedisUrl &seed, int64_t timeout_ms, const std::string &mode,
                   bool *is_cluster, Topology *out, std::string *err, int64_t named_timeout_ms = 0,
                   bool *unreachable = nullptr, bool *loading = nullptr);

// probe_topology on each seed in turn until one answers; *chosen gets that seed. A refused
// AUTH ends the search at once (the credentials are the same for all). While a seed is
// loading its data set, the seeds are tried again every kPollMs until timeout_ms has
// passed in all (then KW_ERR_TIMEOUT, naming the server still loading); on_loading (if
// given) is told once, when that wait begins. With wait_for_server, while every seed
// refuses the connection (or cannot be reached) the seeds are tried again with capped
// backoff (50 ms doubling to 1 s) until timeout_ms has passed in all: a server or cluster
// that is still starting is waited for (kw_engine_start). Any other answer (AUTH refused,
// not a cluster node, ...) ends the search at once.
int probe_seeds(const std::vector<RedisUrl> &seeds, int64_t timeout_ms, const std::string &mode,
                RedisUrl *chosen, bool *is_cluster, Topology *out, std::string *err,
                bool wait_for_server = false,
                const std::function<void(const std::string &)> &on_loading = {});

}  // namespace keywatch
