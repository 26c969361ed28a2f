// Sweeper, 2 of 3: due-claim scheduling. Each slot queue is swept (claim_due) at the
// earliest deadline the last claim saw, or after sweep.interval; no more is claimed than
// the dispatch queue has room for; claimed items become events held by this engine and go
// to the node's intake. Failing claims back off and are reported. Loop thread only.
#include "core/sweeper/sweeper.h"

#include <algorithm>
#include <atomic>

#include "core/redis/reply_error.h"
#include "core/redis/url.h"

namespace keywatch {
namespace {

// Failing claims are reported at most this often per sweeper.
constexpr int64_t kClaimWarningMs = 10000;
// A claim looks at leases at least this often (and once the earliest lease end it knows has
// passed): a lease opened since the last look is found at worst this long after it ran out.
constexpr int64_t kLookAtLeasesMs = 1000;

}  // namespace

void Sweeper::sweep(Queue &q) {
    if (!claiming_ || !link_.serving() || q.where == Where::Moved)
        return;  // waiting: resume() sweeps every queue once the server serves
    // One claim on its way; standalone, while claims come back full (a burst), up to
    // kSweepsInFlight, so that the next one runs while the answer of the last travels.
    // (Cluster: a burst is spread over many slot queues, each swept on its own.)
    if (q.sweeping() && (opts_.cluster || !q.bursting || q.sweeps.size() >= kSweepsInFlight)) {
        q.again = true;
        return;
    }
    size_t room = sink_->dispatch_room();
    // What the claims on their way may still add to the dispatch queue.
    size_t asked = *live_asking_;
    for (auto &s : q.sweeps) asked += static_cast<size_t>(s.second);
    if (q.sweeping()) room = room > asked ? room - asked : 0;
    if (room == 0 && q.sweeping()) {
        q.again = true;  // the answer on its way sweeps again
        return;
    }
    if (room == 0) {
        // Workers are behind: the items wait in Redis; look again shortly.
        q.timer->arm(std::min<int64_t>(opts_.interval_ms, 20));
        return;
    }
    int64_t limit = std::min<int64_t>(opts_.batch, static_cast<int64_t>(room));
    q.again = false;
    counters_->sweep_calls.fetch_add(1, std::memory_order_relaxed);
    // The `done` record is pruned by a claim at most once per tenth of its window, not on
    // every claim (it only has to stay near the window's size), and after every
    // kPruneAfterMarkers batches acked whole (their markers are pruned as fast as written).
    bool prune = false;
    if (q.is_keys) {
        int64_t t = wall_ms();
        prune = !q.done_pruned_ms || t - *q.done_pruned_ms >= opts_.done_window_ms / 10 ||
                q.markers >= Queue::kPruneAfterMarkers;
        if (prune) {
            q.done_pruned_ms = t;
            // One prune per kPruneAfterMarkers batches: acks that went out together (after a
            // burst of claims) make the next claims prune again until it has caught up.
            q.markers -= std::min(q.markers, Queue::kPruneAfterMarkers);
        }
    }
    // A claim looks at leases ('L') when one may have run out, and declares the batch keys
    // of the run-out leases the last look named.
    const bool look = must_look(q, wall_ms());
    const uint64_t seq = next_batch_seq();
    std::vector<std::string> keys = q.keys.claim_keys(opts_.owner, seq);
    std::vector<std::string> argv = {
        std::to_string(limit),
        std::to_string(opts_.lease_ms),
        opts_.owner,
        std::to_string(seq),
        q.is_keys ? "1" : "0",
        prune ? std::to_string(std::max<int64_t>(opts_.done_window_ms, 1)) : "0",
        (look ? "L" : "") + shared_flag(),
        "0"};
    size_t stale = 0;
    for (auto &m : q.stale) {
        std::string key = q.keys.batch_of_member(m);
        if (key.empty()) continue;
        keys.push_back(std::move(key));
        argv.push_back(std::move(m));
        stale++;
    }
    argv[7] = std::to_string(stale);
    q.stale.clear();
    argv.push_back(opts_.engines_channel);
    argv.push_back(opts_.own_channel);
    bool sent = link_.eval(scripts::batch::kClaimDue, keys, std::move(argv),
                           [this, &q, limit, seq](redisReply *r) { on_swept(q, r, limit, seq); });
    if (!sent) return;
    q.sweeps[seq] = limit;
    claim_sent();
    if (q.bursting && !opts_.cluster) sweep(q);  // the next one, while there is room
}

bool Sweeper::must_look(const Queue &q, int64_t now) {
    return !q.stale.empty() || !q.looked_ms || now - *q.looked_ms >= kLookAtLeasesMs ||
           (q.lease_end_ms && now >= *q.lease_end_ms);
}

std::string Sweeper::shared_flag() const {
    // While our own subscriber is away, the one listener a claim counts may be another
    // engine; one that was seen may be reconnecting (uncounted) for a while; and an engine
    // of the earlier version is never counted.
    const bool ours = opts_.subscribed && opts_.subscribed();
    return !ours || wall_ms() < shared_until_ms_ || v1_engines_.present() ? "S" : "";
}

void Sweeper::saw_listeners(int64_t listeners) {
    if (listeners > 1) shared_until_ms_ = wall_ms() + opts_.done_window_ms;
}

uint64_t Sweeper::next_batch_seq() {
    static std::atomic<uint64_t> seq{0};
    return ++seq;
}

// The reply of claim_due (ClaimReply): the items claimed, the next deadline and lease end.
void Sweeper::on_swept(Queue &q, redisReply *r, int64_t limit, uint64_t seq) {
    q.sweeps.erase(seq);
    q.bursting = false;  // until this answer shows a full claim
    claim_answered();
    // Live events that came in while claims were on their way: once this answer is in.
    struct Later {
        Sweeper *s;
        Queue &q;
        ~Later() { s->release_deferred(q); }
    } later{this, q};
    if (classify(r) == ReplyError::Loading) {
        link_.server_waits(ReplyError::Loading);  // swept again once the server has loaded
        return;
    }
    if (arrivals_.redirected(q, r)) return;
    q.where = Where::Here;
    ClaimReply c;
    std::string err;
    if (!parse_claim_reply(r, &c, &err)) {
        claims_failing(q, r);
        return;
    }
    claims_work(q);
    int64_t now = c.now, next_due = c.next_due;
    size_t claimed = c.items.size();
    q.bursting = static_cast<int64_t>(claimed) >= limit;
    if (next_due >= 0)
        q.next_due = next_due;
    else
        q.next_due.reset();  // nothing in `due`
    q.stale = std::move(c.stale);
    saw_listeners(c.listeners);
    if (c.b >= 0) q.batches[seq].b = c.b;
    on_claimed(q, c.items, seq);
    const int64_t local = wall_ms();
    if (c.next_lease != -2) {  // it looked at leases
        q.looked_ms = local;
        q.lease_end_ms.reset();
        if (c.next_lease >= 0) q.lease_end_ms = local + (c.next_lease - now);
        // Leases matter only if someone else holds items: ours are acked (or, if we
        // die, found by the others' scans).
        q.others_hold = c.live > static_cast<int64_t>(q.batches.size());
    }
    int64_t next = next_due;
    if (q.lease_end_ms && (q.others_hold || !opts_.cluster)) {
        const int64_t next_lease = now + std::max<int64_t>(*q.lease_end_ms - local, 0);
        if (next < 0 || next_lease < next) next = next_lease;
    }
    // An item is due once now is past its deadline: wake 1 ms after it.
    int64_t delay =
        next < 0 ? opts_.interval_ms : std::clamp<int64_t>(next - now + 1, 0, opts_.interval_ms);
    // Run-out leases named: the next claim declares their batch keys and takes them.
    const bool more = q.again || static_cast<int64_t>(claimed) >= limit || !q.stale.empty();
    if (more && !opts_.cluster) {
        // Standalone: the next claims go now, before the deferred live events are looked
        // at (release_deferred), which keep waiting for them in a burst.
        q.timer->cancel();
        sweep(q);
        if (q.sweeping()) return;
    }
    if (more) delay = 0;
    // Cluster: an idle slot queue waits for a notification or the next scan; one
    // with items waits for its next deadline (new earlier items notify us).
    if (opts_.cluster && !more) {
        if (next < 0) return;
        delay = std::max<int64_t>(next - now + 1, 0);
    }
    q.timer->arm(delay);
}

void Sweeper::release_deferred(Queue &q) {
    if (q.deferred.empty()) return;
    // While more claims of the burst are on their way, the events keep waiting for them
    // (their items are most likely among what the sweeps take next), for a bounded time
    // (waits_for_sweeps); then those about items claimed are ours now (held) and the rest
    // are claimed live.
    if (!opts_.cluster && waits_for_sweeps(q, wall_ms(), q.deferred_since_ms)) return;
    std::vector<Event> deferred;
    deferred.swap(q.deferred);
    claim_live(std::move(deferred));
}

void Sweeper::on_claimed(Queue &q, const std::vector<ClaimedItem> &items, uint64_t seq) {
    std::vector<Event> batch;
    batch.reserve(items.size());
    for (const ClaimedItem &item : items) batch.push_back(hold(q, item, nullptr, seq));
    counters_->claimed.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
    if (q.stats)
        q.stats->claimed.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
    if (!claiming_) {
        give_back(q, batch);
        return;
    }
    if (!batch.empty()) sink_->deliver_tracked(batch);
}

Event Sweeper::hold(Queue &q, const ClaimedItem &item, const Event *live, uint64_t seq) {
    Queue::Held state = live ? Queue::Held::Notified : Queue::Held::Claimed;
    Event ev = make_event(q, item, live);
    Queue::Batch &batch = q.batches[seq];
    batch.held++;
    // An item with records (a payload, a later attempt, a reclaim): its batch is acked item
    // by item, so that its records go with it.
    if (item.has_payload || item.attempt > 1 || item.source == 'L') batch.whole = false;
    auto [it, added] = q.marks.try_emplace(item.id);
    // Held already (a batch of ours whose lease ran out, reclaimed by us): it moved. (One
    // remembered as handled is simply ours again.)
    if (!added && it->second.held != Queue::Held::Handled)
        q.batch_left(it->second.batch_seq, false);
    it->second = {state, seq, ev.ts_ms, 0};
    return ev;
}

Event Sweeper::make_event(const Queue &q, const ClaimedItem &item, const Event *live) {
    Event ev;
    ev.queue = q.name;
    ev.key = item.id;
    ev.slot = q.slot;
    ev.has_value = item.has_payload;
    if (item.has_payload) ev.value = item.payload;
    ev.last_error = item.last_error;
    ev.deadline_ms = item.deadline_ms;
    ev.attempt = item.attempt;
    ev.ts_ms = live ? live->ts_ms : wall_ms();
    ev.db = link_.url().db;
    ev.node = opts_.node_name ? opts_.node_name : &link_.endpoint();
    // A tracked key that is gone at its deadline is "expired" whichever path found it; a
    // live eviction before the deadline keeps its name.
    ev.name = !q.is_keys ? "task" : (live ? live->name : "expired");
    if (item.source == 'L') {
        ev.source = KW_SOURCE_LEASE_EXPIRED;
        counters_->lease_expired.fetch_add(1, std::memory_order_relaxed);
        if (q.stats) q.stats->lease_expired.fetch_add(1, std::memory_order_relaxed);
    } else if (item.source == 'N') {
        ev.source = KW_SOURCE_NOTIFICATION;
    } else {
        ev.source = q.is_keys ? KW_SOURCE_SWEEP : KW_SOURCE_TASK;
    }
    return ev;
}

void Sweeper::give_back(const Queue &q, const std::vector<Event> &items) {
    std::vector<Completion> back;
    for (auto &ev : items) back.push_back({q.name, ev.key, kRelease, "", q.slot});
    if (!back.empty()) complete(std::move(back));
}

void Sweeper::take_back_unanswered(Queue &q) {
    Queue *qp = &q;  // queues are never erased
    for (const auto &u : q.unanswered) {
        const uint64_t seq = u.first;
        std::vector<std::string> keys = {q.keys.due, q.keys.inflight, q.keys.leases, q.keys.data,
                                         q.keys.batch(opts_.owner, seq)};
        link_.eval(scripts::batch::kRelease, keys, {opts_.owner, std::to_string(seq), "-1", "*"},
                   [qp, seq](redisReply *r) {
                       if (r->type == REDIS_REPLY_INTEGER) qp->unanswered.erase(seq);
                   });
    }
}

void Sweeper::claims_failing(Queue &q, const redisReply *r) {
    int64_t now = wall_ms();
    const Backoff claims{opts_.interval_ms, std::max(opts_.interval_ms, opts_.reconnect.max_ms)};
    int64_t retry = claims.after(q.claim_retry_ms.value_or(0));
    q.claim_retry_ms = retry;
    q.timer->arm(retry);
    if (!claims_failing_since_ms_) claims_failing_since_ms_ = now;
    set_sweeping(false);
    if (now - claim_warned_ms_ < kClaimWarningMs) return;
    claim_warned_ms_ = now;
    std::string why = reply_to_string(r), hint;
    switch (classify(r)) {
        case ReplyError::ClusterDown:
            // The whole cluster down is link_.server_waits()'s: here one slot has no master
            // (cluster-require-full-coverage no).
            hint = "no master serves this queue's slot now";
            break;
        case ReplyError::NoPerm:
            hint = scripts_permission_message(link_.url(), opts_.ns, "NOPERM") +
                   " (keywatch check prints the exact rule)";
            break;
        case ReplyError::Busy:
            hint = "the server is busy (a long script) or a replica lost its master";
            break;
        default:
            hint = "see the server's log";
    }
    log(KW_LOG_WARN,
        "claims on " + link_.endpoint() + " fail (" + q.keys.due + ": " + why + "): " + hint +
            "; tracked items wait in Redis; retrying every " + std::to_string(retry) + "ms at most",
        &q);
}

void Sweeper::claims_work(Queue &q) {
    q.claim_retry_ms.reset();
    if (!claims_failing_since_ms_) return;
    set_sweeping(claiming_);
    log(KW_LOG_INFO,
        "claims on " + link_.endpoint() + " work again, after failing for " +
            std::to_string(wall_ms() - *claims_failing_since_ms_) + "ms",
        &q);
    claims_failing_since_ms_.reset();
    claim_warned_ms_ = 0;
}

bool Sweeper::acks_wait_for_claims() const {
    return claiming_ && *opts_.claims_in_flight > 0 && !pipelined();
}

bool Sweeper::pipelined() const {
    bool any = false;
    if (!opts_.cluster)
        queues_.for_each([&](const Queue &q) { any = any || (q.bursting && q.sweeping()); });
    return any;
}

void Sweeper::claim_sent() {
    claims_out_++;
    (*opts_.claims_in_flight)++;
}

void Sweeper::claim_answered() {
    claims_out_--;
    (*opts_.claims_in_flight)--;
}

void Sweeper::log(kw_log_level level, const std::string &message, const Queue *q) {
    sink_->log(level, message, q ? LogFields{{"queue", q->name}} : LogFields{});
}

void Sweeper::set_sweeping(bool on) {
    if (opts_.node_stats) opts_.node_stats->sweeping.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace keywatch
