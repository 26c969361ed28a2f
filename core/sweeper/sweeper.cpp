// Sweeper, part 1 of 6: construction, the slot queues it serves, its connection (start,
// stop, reconnect) and the one place commands and scripts are sent. The other parts:
// sweeper_due.cpp, sweeper_live.cpp, sweeper_completion.cpp, sweeper_cluster.cpp,
// sweeper_waiting.cpp.
// Loop thread only.
#include "core/sweeper/sweeper.h"

#include <algorithm>

#include "core/redis/reply_error.h"
#include "core/redis/slots.h"

namespace keywatch {

Sweeper::Sweeper(EventLoop &loop, RedisUrl url, Options opts, SweeperSink *sink,
                 SweeperCounters *counters)
    : loop_(loop),
      opts_(std::move(opts)),
      sink_(sink),
      counters_(counters),
      conn_(loop.base(), url, "queue", /*select_db=*/true),
      endpoint_(url.endpoint()),
      queues_(
          loop,
          {opts_.ns, opts_.tag, opts_.cluster, opts_.track_keys, opts_.task_queues, opts_.stats},
          [this](Queue &q) { sweep(q); }),
      retry_timer_(loop.base(), [this] { connect(); }),
      scan_timer_(loop.base(), [this] { scan("0"); }),
      dirty_timer_(loop.base(), [this] { sweep_dirty(); }),
      prune_timer_(loop.base(), [this] { prune_done(); }),
      ack_timer_(loop.base(), [this] { send_completions(); }),
      renew_timer_(loop.base(), [this] { renew_leases(); }),
      wait_timer_(loop.base(), [this] { poll_server(); }),
      rng_(std::random_device{}()) {
    if (!opts_.claims_in_flight) opts_.claims_in_flight = &own_claims_in_flight_;
}

Sweeper::~Sweeper() = default;

void Sweeper::start() {
    started_ = true;
    down_ = false;
    claiming_ = true;
    renew_timer_.arm(std::max<int64_t>(opts_.lease_ms / 3, 1));
    connect();
}

void Sweeper::stop_claiming() {
    claiming_ = false;
    set_sweeping(false);
    scan_timer_.cancel();
    dirty_timer_.cancel();
    queues_.for_each([](Queue &q) { q.timer->cancel(); });
    send_completions();  // acks held back for claims go out now
}

void Sweeper::shutdown() {
    down_ = true;
    stop_claiming();
    if (size_t left = store_.take_all().size())
        log(KW_LOG_WARN, std::to_string(left) + " completions for " + endpoint_ +
                             " were not confirmed by Redis before the stop; those "
                             "items will be delivered again after their lease");
    retry_timer_.cancel();
    ack_timer_.cancel();
    renew_timer_.cancel();
    wait_timer_.cancel();
    waiting_for_ = ReplyError::None;
    conn_.close();
    outstanding_ = 0;
    *opts_.claims_in_flight -= claims_out_;
    claims_out_ = 0;
}

void Sweeper::connect() {
    if (down_) return;
    conn_.connect(
        opts_.connect_timeout_ms, [this] { on_ready(); },
        [this](const RedisConn::Failure &f) { on_lost(f); });
}

void Sweeper::retry_now() {
    if (down_ || !retry_timer_.pending() || retry_after_permanent_) return;
    retry_timer_.cancel();
    connect();
}

void Sweeper::on_ready() {
    attempt_ = 0;
    resume();
    // The node's other connections hear of it once the server has answered on this one (a
    // paused server's kernel still accepts connections).
    if (opts_.on_connected) command({"PING"}, [this](redisReply *) { opts_.on_connected(); });
}

void Sweeper::resume() {
    completion_backoff_ms_.reset();  // a new connection (or loaded): completions go out at once
    ack_timer_.cancel();
    // Load our scripts before anything else is sent on this connection, so that the
    // first EVALSHAs find them. Without it, the sweep of a burst sends thousands of
    // EVALSHAs at once that all fail with NOSCRIPT and come back as EVALs, each carrying
    // and hashing the whole body. The EVAL fallback stays for a cache emptied later
    // (SCRIPT FLUSH).
    for (const Script *s :
         {&scripts::kClaimDue, &scripts::kClaimLive, &scripts::kAck, &scripts::kFail,
          &scripts::kRelease, &scripts::kRenew, &scripts::kForget})
        conn_.command({"SCRIPT", "LOAD", s->body}, [](redisReply *) {});
    set_sweeping(claiming_ && !claims_failing_since_ms_);
    if (claiming_) {
        queues_.for_each([this](Queue &q) { sweep(q); });
        // Cluster: what arrived while we were away is found by a full scan.
        if (opts_.cluster) scan("0");
        std::vector<Event> backlog;
        backlog.swap(live_backlog_);
        if (!backlog.empty()) claim_live(std::move(backlog));
    }
    send_completions();
}

void Sweeper::on_lost(const RedisConn::Failure &f) {
    set_sweeping(false);
    outstanding_ = 0;
    waiting_for_ = ReplyError::None;  // the next connection finds out again
    wait_timer_.cancel();
    store_.connection_lost();  // no answer will come: they wait for the next connection
    *opts_.claims_in_flight -= claims_out_;  // their answers will not come
    claims_out_ = 0;
    scanning_ = false;
    queues_.for_each([this](Queue &q) {
        q.sweeping = false;
        q.peeking = false;
        q.timer->cancel();
        for (auto &ev : q.deferred) keep_for_later(std::move(ev));
        q.deferred.clear();
    });
    if (down_) return;
    retry_after_permanent_ = f.permanent;
    const int64_t delay = within_leases(opts_.reconnect.jittered(attempt_++, rng_()));
    log(f.permanent ? KW_LOG_ERROR : KW_LOG_WARN, "queue connection: " + f.message +
                                                      "; reconnecting in " + std::to_string(delay) +
                                                      "ms (tracked items wait safely in Redis)");
    retry_at_ms_ = wall_ms() + delay;
    retry_timer_.arm(delay);
}

void Sweeper::hasten_reconnect() {
    if (!retry_timer_.pending()) return;
    const int64_t left = retry_at_ms_ - wall_ms();
    const int64_t cut = within_leases(left);
    if (cut >= left) return;
    retry_at_ms_ = wall_ms() + cut;
    retry_timer_.arm(cut);
}

bool Sweeper::command(const std::vector<std::string> &args, ReplyFn fn) {
    // The one place that counts replies awaited (outstanding()).
    outstanding_++;
    bool sent = conn_.command(args, [this, fn = std::move(fn)](redisReply *r) {
        outstanding_--;
        fn(r);
    });
    if (!sent) outstanding_--;
    return sent;
}

bool Sweeper::eval(const Script &s, const Queue &q, std::vector<std::string> argv, ReplyFn fn) {
    // Kept for the rare NOSCRIPT retry, shared rather than copied into the callback.
    const QueueKeys &k = q.keys;  // the five KEYS, in QueueKeys::keys() order
    auto args = std::make_shared<std::vector<std::string>>(std::initializer_list<std::string>{
        "EVALSHA", s.sha(), "5", k.due, k.inflight, k.data, k.dead, k.done});
    args->reserve(args->size() + argv.size());
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

}  // namespace keywatch
