// ClusterRouter: the blocking Client's way to Redis (core/client/client.h). It routes a
// command to the master of its slot: it reads the topology (from the seeds at connect, again
// after MOVED, a lost master or CLUSTERDOWN), keeps one BlockingRedis per node on one shared
// event_base (a pipeline over several masters then moves them together), follows MOVED and
// ASK, backs off on TRYAGAIN and CLUSTERDOWN, waits while a server is LOADING, and answers
// NOSCRIPT by sending the script's body with EVAL (a restarted or failed-over server has an
// empty script cache). A standalone server is the one node every slot maps to.
// Not thread-safe: one owner (a Client) on one thread.
#pragma once

#include <event2/event.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/queue/scripts.h"
#include "core/redis/blocking_redis.h"
#include "core/redis/endpoint.h"
#include "core/redis/reply_error.h"
#include "core/redis/topology.h"
#include "core/redis/url.h"

namespace keywatch {

// The router's slice of the Config (client.h's router_options makes it).
struct RouterOptions {
    std::vector<RedisUrl> seeds;     // redis.url, overrides applied; the first is tried first
    std::string mode;                // redis.mode: auto | standalone | cluster
    int64_t connect_timeout_ms = 0;  // also how long a LOADING server is waited for
    int64_t command_timeout_ms = 0;
};

class ClusterRouter {
  public:
    // One command for a slot. A script call starts as EVALSHA (args: EVALSHA sha nkeys ...).
    struct Call {
        const Script *script = nullptr;  // null: a plain command (no NOSCRIPT fallback)
        std::optional<Endpoint> node;    // where it goes; empty: the slot's master, looked up
        int slot = 0;
        std::vector<std::string> args;
        // A report (inspect): CLUSTERDOWN fails the call at once instead of being waited
        // out, so that the rest can be read and the refusal named. (TRYAGAIN, a slot's
        // keys split by a migration for a moment, is still waited out.)
        bool no_wait = false;
    };

    explicit ClusterRouter(RouterOptions options);
    ~ClusterRouter();
    ClusterRouter(const ClusterRouter &) = delete;
    ClusterRouter &operator=(const ClusterRouter &) = delete;

    // Reads the topology from the seeds (once, until it succeeded); standalone, connects to
    // the one server. Cluster masters are reached when needed.
    int connect();
    // c on its slot's master: follows MOVED/ASK, waits out TRYAGAIN/CLUSTERDOWN (see
    // no_wait) and LOADING, loads the script on NOSCRIPT. A reply other than those, which
    // may be an error reply, is returned; null with status() and error() when none could
    // be had. c.node ends on the node that answered last.
    ReplyPtr exec(Call &c);
    // exec_all's result for one call: the reply (possibly an error reply), or, with the
    // reply null, a KW_ERR_* status and what failed.
    struct Outcome {
        ReplyPtr reply;
        int status = 0;
        std::string error;
    };
    // Every call on its slot's master, the calls for one node sent back to back on its
    // connection and all nodes at once, in rounds (at most kMaxRedirects): a call answered
    // MOVED, ASK, TRYAGAIN, CLUSTERDOWN or LOADING (NOSCRIPT, for a script) goes again in
    // the next round, alone; the topology is read at most once per round and TRYAGAIN/
    // CLUSTERDOWN wait once per round. A call whose node could not be reached is routed
    // again after a refresh; one sent and then lost is not sent again (KW_ERR_CONNECT: it
    // may have run). (*outcomes)[i] is calls[i]'s.
    void exec_all(const std::vector<Call *> &calls, std::vector<Outcome> *outcomes);
    // One command on one node, as it is (no redirects); null with status() and error() when
    // the node cannot be reached or refuses the password.
    ReplyPtr call(const Endpoint &n, const std::vector<std::string> &args);
    // The connection to a node, connected (null with status() and error() set).
    BlockingRedis *node(const Endpoint &n);
    // The connection to a node as it is, without connecting: null if there is none.
    BlockingRedis *connection(const Endpoint &n) const;

    // The master serving slot now; empty when none does. Standalone: the server.
    std::optional<Endpoint> master_for_slot(int slot) const;
    // The masters (standalone: the server).
    std::vector<Endpoint> masters() const { return masters_; }
    // Reads the topology again from any node that answers: the seed, then known masters.
    int refresh_topology();
    // redis+sentinel://: asks the sentinels for the master again (after a lost connection
    // or READONLY: a failover); it becomes the one server.
    int find_sentinel_master();
    bool sentinel() const { return options_.seeds.front().is_sentinel(); }

    // The seed's URL (credentials, TLS) at node n; the seed itself when n is empty.
    RedisUrl url(const std::optional<Endpoint> &n) const {
        return n ? topology_.url_of(seed_, *n) : seed_;
    }
    bool cluster() const { return cluster_; }
    const Topology &topology() const { return topology_; }
    const RouterOptions &options() const { return options_; }
    // Of the last failure: a KW_ERR_* status and what failed and what to do.
    int status() const { return status_; }
    const std::string &error() const { return error_; }

  private:
    int fail(int status, std::string msg);
    // After the seed or topology_ changed: masters_ by index in topology_.masters.
    void index_masters();
    // exec gave up after kMaxRedirects: why, from the last refusal.
    ReplyPtr gave_up(const Call &c, ReplyError kind, const std::string &node,
                     const std::string &reply);
    struct Redo {                            // exec_all: what happened to one call so far
        ReplyError kind = ReplyError::None;  // the last refusal
        std::string node, reply;             // where, and its text
        bool asking = false;                 // ASK: send ASKING first
        bool rerouted = false;               // its node could not be reached once
    };
    struct Round {                                             // one round of exec_all
        std::vector<std::pair<BlockingRedis *, size_t>> sent;  // (connection, call) in order
        std::vector<size_t> again;                             // the calls for the next round
        std::set<BlockingRedis *> used;                        // connections sent on
        bool refresh = false;  // one was MOVED, or a node could not be reached (or READONLY)
        bool wait = false;     // one was TRYAGAIN, CLUSTERDOWN or LOADING
        bool down = false;     // one was CLUSTERDOWN
    };
    // Routes and sends calls[i] for each i in pending, per node in order.
    void send_round(const std::vector<Call *> &calls, const std::vector<size_t> &pending,
                    std::vector<Redo> *redo, std::vector<Outcome> *outcomes, Round *round);
    // Reads the replies of round->sent into outcomes, or marks the calls to send again.
    void receive_round(const std::vector<Call *> &calls, std::vector<Redo> *redo,
                       std::vector<Outcome> *outcomes, Round *round);
    // A refusal that the call is sent again for: where, and what the round must do first.
    void redirect(Call &c, Redo &d, const redisReply *r, ReplyError kind, Round *round);

    RouterOptions options_;
    RedisUrl seed_;  // the seed that answered (before connect: the first)
    bool cluster_ = false, topology_known_ = false;
    Topology topology_;
    std::vector<Endpoint> masters_;  // by index in topology_.masters; standalone: the seed
    event_base *base_;  // shared by the node connections: a pipeline moves them together
    std::map<Endpoint, std::unique_ptr<BlockingRedis>> nodes_;
    int status_ = 0;
    std::string error_;
};

}  // namespace keywatch
