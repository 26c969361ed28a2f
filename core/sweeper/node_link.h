// NodeLink: a Sweeper's command connection to its node. It connects, and after a loss
// reconnects with capped backoff (cut short while completions wait and their leases run
// out, hasten_reconnect(); ended at once by retry_now() when another connection to the node
// succeeded); it is the one place commands and queue scripts are sent (command(), eval():
// EVALSHA, EVAL after NOSCRIPT) and counts the replies awaited (outstanding()). While the
// server cannot serve (-LOADING, or -CLUSTERDOWN for the whole cluster: server_waits())
// everything waits (waiting()) and one command every kPollMs tells when it serves again.
// Its owner hears of it through Hooks: ready (connected, or serving again: scripts loaded),
// lost, waits.
// Loop thread only (owned by a Sweeper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/base/backoff.h"
#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/redis/event_loop.h"
#include "core/redis/redis_conn.h"
#include "core/redis/reply_error.h"
#include "core/redis/url.h"
#include "keywatch_types.h"

namespace keywatch {

class NodeLink {
  public:
    using ReplyFn = std::function<void(redisReply *)>;
    struct Hooks {
        // Connected, or the server serves again after server_waits(): the queue scripts
        // are loaded (sent first); what waited may go now.
        std::function<void()> ready;
        // The connection went: no reply will come for anything on its way.
        std::function<void()> lost;
        // server_waits() began: nothing is claimed until `ready`.
        std::function<void()> waits;
        // A reconnect's wait, cut while completions wait (see Sweeper's completions).
        std::function<int64_t(int64_t)> within_leases;
        // The server answered on a new connection: evidence that the node is back, for the
        // node's other connections (null: none told).
        std::function<void()> on_connected;
        std::function<void(kw_log_level, const std::string &)> log;
        // A READONLY reply: the node was demoted (a Sentinel failover); null: nobody told.
        std::function<void()> on_readonly;
    };

    NodeLink(EventLoop &loop, const RedisUrl &url, int64_t connect_timeout_ms, Backoff reconnect,
             Hooks hooks);
    NodeLink(const NodeLink &) = delete;
    NodeLink &operator=(const NodeLink &) = delete;

    void start();  // connects, and reconnects after a loss from now on
    void stop();   // no reconnect from now on (what is sent still goes out)
    void close();  // the connection closed, every timer cancelled: nothing follows
    // Evidence that the node is back: a reconnect waiting out its backoff after a failure
    // that was not permanent starts now.
    void retry_now();
    // Completions came while the connection is away: its pending reconnect is brought
    // forward as far as Hooks::within_leases asks.
    void hasten_reconnect();

    // Sends a command, counting it in outstanding() until its reply. False if it could
    // not be sent (fn is not called then).
    bool command(const std::vector<std::string> &args, ReplyFn fn);
    // A queue script on the queue's five keys (EVALSHA, EVAL after NOSCRIPT); as command().
    bool eval(const Script &s, const QueueKeys &keys, std::vector<std::string> argv, ReplyFn fn);
    // A script on the KEYS given (the batch layout's scripts each take their own list).
    bool eval(const Script &s, const std::vector<std::string> &keys, std::vector<std::string> argv,
              ReplyFn fn);

    // A reply said the whole server cannot serve for now: `why` is Loading (its data set is
    // loading) or ClusterDown (whole_cluster_down(); `key` is one of ours to ask about).
    // Everything waits (waiting()) and the server is asked every kPollMs; Hooks::ready
    // runs the moment it serves.
    void server_waits(ReplyError why, const std::string &key = "");
    bool waiting() const { return waiting_for_ != ReplyError::None; }
    bool ready() const { return conn_.state() == RedisConn::State::Ready; }
    // Connected and not waiting: commands may go.
    bool serving() const { return ready() && !waiting(); }
    // Replies still awaited.
    size_t outstanding() const { return outstanding_; }
    const RedisUrl &url() const { return conn_.url(); }
    const std::string &endpoint() const { return endpoint_; }

  private:
    void connect();
    void on_ready();
    void on_lost(const RedisConn::Failure &f);
    void serve_again();  // scripts loaded, then Hooks::ready
    void poll_server();

    RedisConn conn_;
    std::string endpoint_;
    int64_t connect_timeout_ms_;
    Backoff reconnect_;
    Hooks hooks_;
    bool down_ = true;  // before start(), after stop(): no reconnect
    Timer retry_timer_;
    int attempt_ = 0;
    bool retry_after_permanent_ = false;  // the reconnect waiting follows a permanent failure
    int64_t retry_at_ms_ = 0;             // when the pending reconnect fires (wall clock)
    size_t outstanding_ = 0;              // replies awaited: counted by command() alone
    ReplyError waiting_for_ = ReplyError::None;  // see server_waits()
    std::string poll_key_;                       // ClusterDown: the key asked about
    int64_t waiting_since_ms_ = 0;
    Timer wait_timer_;  // the next poll while waiting()
    std::mt19937_64 rng_;
};

}  // namespace keywatch
