// Sweeper, part 6 of 6: a server that cannot serve for now. After a restart Redis accepts
// connections at once but answers -LOADING to claims, completions, renewals and SCAN until
// its data is in memory; a cluster node whose cluster is down (a full restart, a shard
// without a master under cluster-require-full-coverage yes) answers -CLUSTERDOWN to every
// key. A backed-off retry of each call would leave them waiting seconds after the server
// serves again (and completions past their leases); instead the first such reply makes the
// sweeper wait as a whole, one cheap command every kPollMs tells when the server serves
// again, and then everything goes at once (resume(): scripts, sweeps, scan, completions).
// Loop thread only.
#include "core/sweeper/sweeper.h"

namespace keywatch {
namespace {

// What the server was doing, for the log lines.
const char *why_waiting(ReplyError why) {
    return why == ReplyError::Loading ? "loading its data set into memory"
                                      : "refusing keys: its cluster is down (CLUSTERDOWN)";
}

}  // namespace

void Sweeper::server_waits(ReplyError why, const std::string &key) {
    if (waiting()) return;
    waiting_for_ = why;
    poll_key_ = key;
    waiting_since_ms_ = wall_ms();
    set_sweeping(false);
    log(KW_LOG_WARN, "Redis at " + endpoint_ + " is " + why_waiting(why) +
                         ": claims and completions wait until it serves again (asked every " +
                         std::to_string(kPollMs) + "ms; tracked items wait safely in Redis)");
    wait_timer_.arm(kPollMs);
}

void Sweeper::poll_server() {
    if (!waiting() || conn_.state() != RedisConn::State::Ready) return;
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
        log(KW_LOG_INFO, "Redis at " + endpoint_ + " serves again after " +
                             std::to_string(wall_ms() - waiting_since_ms_) + "ms of " +
                             why_waiting(waiting_for_) + ": claims resume");
        waiting_for_ = ReplyError::None;
        resume();
    });
}

}  // namespace keywatch
