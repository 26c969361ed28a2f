// NodeLink: connecting and reconnecting, sending, and a server that cannot serve for now.
// After a restart Redis accepts connections at once but answers -LOADING to claims,
// completions, renewals and SCAN until its data is in memory; a cluster node whose cluster
// is down (a full restart, a shard without a master under cluster-require-full-coverage
// yes) answers -CLUSTERDOWN to every key. A backed-off retry of each call would leave them
// waiting seconds after the server serves again (and completions past their leases);
// instead the first such reply makes the sweeper wait as a whole, one cheap command every
// kPollMs tells when the server serves again, and then everything goes at once
// (Hooks::ready: scripts, sweeps, scan, completions).
// Loop thread only.
#include "core/sweeper/node_link.h"

#include <initializer_list>
#include <memory>

#include "core/base/clock.h"

namespace keywatch {
namespace {

// What the server was doing, for the log lines.
const char *why_waiting(ReplyError why) {
    return why == ReplyError::Loading ? "loading its data set into memory"
                                      : "refusing keys: its cluster is down (CLUSTERDOWN)";
}

}  // namespace

NodeLink::NodeLink(EventLoop &loop, const RedisUrl &url, int64_t connect_timeout_ms,
                   Backoff reconnect, Hooks hooks)
    : conn_(loop.base(), url, "queue", /*select_db=*/true),
      endpoint_(url.endpoint()),
      connect_timeout_ms_(connect_timeout_ms),
      reconnect_(reconnect),
      hooks_(std::move(hooks)),
      retry_timer_(loop.base(), [this] { connect(); }),
      wait_timer_(loop.base(), [this] { poll_server(); }),
      rng_(std::random_device{}()) {}

void NodeLink::start() {
    down_ = false;
    connect();
}

void NodeLink::stop() {
    down_ = true;
}

void NodeLink::close() {
    down_ = true;
    retry_timer_.cancel();
    wait_timer_.cancel();
    waiting_for_ = ReplyError::None;
    conn_.close();
    outstanding_ = 0;
}

void NodeLink::connect() {
    if (down_) return;
    conn_.connect(
        connect_timeout_ms_, [this] { on_ready(); },
        [this](const RedisConn::Failure &f) { on_lost(f); });
}

void NodeLink::retry_now() {
    if (down_ || !retry_timer_.pending() || retry_after_permanent_) return;
    retry_timer_.cancel();
    connect();
}

void NodeLink::on_ready() {
    attempt_ = 0;
    serve_again();
    // The node's other connections hear of it once the server has answered on this one (a
    // paused server's kernel still accepts connections).
    if (hooks_.on_connected) command({"PING"}, [this](redisReply *) { hooks_.on_connected(); });
}

void NodeLink::serve_again() {
    // Load our scripts before anything else is sent on this connection, so that the
    // first EVALSHAs find them. Without it, the sweep of a burst sends thousands of
    // EVALSHAs at once that all fail with NOSCRIPT and come back as EVALs, each carrying
    // and hashing the whole body. The EVAL fallback stays for a cache emptied later
    // (SCRIPT FLUSH).
    for (const Script *s : {&scripts::batch::kClaimDue, &scripts::batch::kClaimLive,
                            &scripts::batch::kAck, &scripts::batch::kFail,
                            &scripts::batch::kRelease, &scripts::batch::kRenew, &scripts::kForget})
        conn_.command({"SCRIPT", "LOAD", s->body}, [](redisReply *) {});
    hooks_.ready();
}

void NodeLink::on_lost(const RedisConn::Failure &f) {
    outstanding_ = 0;
    waiting_for_ = ReplyError::None;  // the next connection finds out again
    wait_timer_.cancel();
    hooks_.lost();
    if (down_) return;
    retry_after_permanent_ = f.permanent;
    const int64_t delay = hooks_.within_leases(reconnect_.jittered(attempt_++, rng_()));
    hooks_.log(f.permanent ? KW_LOG_ERROR : KW_LOG_WARN,
               "queue connection: " + f.message + "; reconnecting in " + std::to_string(delay) +
                   "ms (tracked items wait safely in Redis)");
    retry_at_ms_ = wall_ms() + delay;
    retry_timer_.arm(delay);
}

void NodeLink::hasten_reconnect() {
    if (!retry_timer_.pending()) return;
    const int64_t left = retry_at_ms_ - wall_ms();
    const int64_t cut = hooks_.within_leases(left);
    if (cut >= left) return;
    retry_at_ms_ = wall_ms() + cut;
    retry_timer_.arm(cut);
}

bool NodeLink::command(const std::vector<std::string> &args, ReplyFn fn) {
    // The one place that counts replies awaited (outstanding()).
    outstanding_++;
    bool sent = conn_.command(args, [this, fn = std::move(fn)](redisReply *r) {
        outstanding_--;
        if (hooks_.on_readonly && classify(r) == ReplyError::ReadOnly) hooks_.on_readonly();
        fn(r);
    });
    if (!sent) outstanding_--;
    return sent;
}

bool NodeLink::eval(const Script &s, const QueueKeys &k, std::vector<std::string> argv,
                    ReplyFn fn) {
    return eval(s, k.keys(), std::move(argv), std::move(fn));
}

bool NodeLink::eval(const Script &s, const std::vector<std::string> &keys,
                    std::vector<std::string> argv, ReplyFn fn) {
    // Kept for the rare NOSCRIPT retry, shared rather than copied into the callback.
    auto args = std::make_shared<std::vector<std::string>>();
    args->reserve(3 + keys.size() + argv.size());
    args->insert(args->end(), {"EVALSHA", s.sha(), std::to_string(keys.size())});
    args->insert(args->end(), keys.begin(), keys.end());
    for (auto &a : argv) args->push_back(std::move(a));
    const Script *script = &s;
    return command(*args, [this, script, args, fn = std::move(fn)](redisReply *r) {
        if (classify(r) == ReplyError::NoScript) {
            // Empty script cache (restart, failover): EVAL loads it for next time.
            (*args)[0] = "EVAL";
            (*args)[1] = script->body;
            command(*args, fn);  // not sent: the connection is lost, on_lost() follows
            return;
        }
        fn(r);
    });
}

void NodeLink::server_waits(ReplyError why, const std::string &key) {
    if (waiting()) return;
    waiting_for_ = why;
    poll_key_ = key;
    waiting_since_ms_ = wall_ms();
    hooks_.waits();
    hooks_.log(KW_LOG_WARN, "Redis at " + endpoint_ + " is " + why_waiting(why) +
                                ": claims and completions wait until it serves again (asked "
                                "every " +
                                std::to_string(kPollMs) +
                                "ms; tracked items wait safely in Redis)");
    wait_timer_.arm(kPollMs);
}

void NodeLink::poll_server() {
    if (!waiting() || !ready()) return;
    // A PING while loading; a key of ours while the cluster is down (a PING has no key,
    // and a cluster node serves it either way).
    std::vector<std::string> ask = {"PING"};
    if (waiting_for_ == ReplyError::ClusterDown) ask = {"EXISTS", poll_key_};
    // Not sent: the connection is gone, and on_lost() starts over.
    command(ask, [this](redisReply *r) {
        if (!waiting()) return;
        if (classify(r) == ReplyError::Loading || whole_cluster_down(r)) {
            waiting_for_ = classify(r);
            wait_timer_.arm(kPollMs);
            return;
        }
        hooks_.log(KW_LOG_INFO, "Redis at " + endpoint_ + " serves again after " +
                                    std::to_string(wall_ms() - waiting_since_ms_) + "ms of " +
                                    why_waiting(waiting_for_) + ": claims resume");
        waiting_for_ = ReplyError::None;
        serve_again();
    });
}

}  // namespace keywatch
