// CompletionBatches: completions on their way to Redis, in batches per slot queue (see
// completion_batches.h). Loop thread only.
#include "core/sweeper/completion_batches.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "core/base/clock.h"
#include "core/redis/reply_error.h"

namespace keywatch {
namespace {

// Acks wait while claims are on their way, at most this long (and a quarter of the
// lease), looking again this often.
constexpr int64_t kAckHoldMs = 1000, kAckPollMs = 5;

}  // namespace

CompletionBatches::CompletionBatches(EventLoop &loop, Options opts, NodeLink &link,
                                     SlotQueues &queues, LeaseRenewal &leases,
                                     SweeperCounters &counters, std::function<bool()> claiming,
                                     std::function<bool()> claims_on_their_way, QueueLog log)
    : opts_(std::move(opts)),
      link_(link),
      queues_(queues),
      leases_(leases),
      counters_(counters),
      claiming_(std::move(claiming)),
      claims_on_their_way_(std::move(claims_on_their_way)),
      log_(std::move(log)),
      ack_timer_(loop.base(), [this] { send(); }),
      prune_timer_(loop.base(), [this] { prune_done(); }),
      rng_(std::random_device{}()) {}

void CompletionBatches::resume() {
    completion_backoff_ms_.reset();  // a new connection (or loaded): they go out at once
    ack_timer_.cancel();
}

void CompletionBatches::connection_lost() {
    store_.connection_lost();  // no answer will come: they wait for the next connection
}

void CompletionBatches::shutdown() {
    if (size_t left = store_.take_all().size())
        log_(KW_LOG_WARN,
             std::to_string(left) + " completions for " + link_.endpoint() +
                 " were not confirmed by Redis before the stop; those items will be "
                 "delivered again after their lease",
             nullptr);
    ack_timer_.cancel();
}

void CompletionBatches::complete(std::vector<Completion> &&done) {
    int64_t now = wall_ms();
    if (!store_.has_waiting()) {
        completions_since_ms_ = now;
        oldest_claim_ms_ = now;
    }
    store_.reserve(done.size());
    for (auto &c : done) {
        if (c.done_ms == 0 && leases_.late_after_hold_timeout(c)) continue;
        if (c.done_ms == 0) {
            c.done_ms = now;
            note_completed(c, now);  // once, on intake (a rerouted one was noted before)
        }
        oldest_claim_ms_ = std::min(oldest_claim_ms_, c.claimed_ms > 0 ? c.claimed_ms : 0);
        store_.add(std::move(c));
    }
    send();
    link_.hasten_reconnect();  // if they must wait for the connection
}

void CompletionBatches::note_completed(Completion &c, int64_t now) {
    SlotQueue *qp = queues_.queue_of(c.queue, c.id, c.slot);
    c.leased_ms = std::max(c.claimed_ms, qp ? qp->renewed_ms : 0);
    if (!qp) return;
    SlotQueue &q = *qp;
    auto h = q.marks.find(c.id);
    if (h == q.marks.end() || h->second.held == SlotQueue::Held::Handled) return;
    // Held from a later claim of the same id (tracked or scheduled again): not this one's
    // batch; this one names none and Redis refuses it (its own batch comes back after its
    // lease), rather than completing the later claim.
    if (c.claimed_ms != 0 && h->second.claimed_ms != c.claimed_ms) return;
    // Its acks, fails and releases name its batch.
    c.batch_seq = h->second.batch_seq;
    auto batch = q.batches.find(c.batch_seq);
    if (batch != q.batches.end()) c.batch_b = batch->second.b;
    q.batch_left(c.batch_seq, c.result == KW_RESULT_ACK);
    // A handled key is remembered for a while, so that its late `expired` notification is
    // recognised without asking Redis; not if that already came.
    bool handled = c.result != KW_RESULT_RETRY && c.result != kRelease;
    if (!q.is_keys || !handled || h->second.held != SlotQueue::Held::Claimed) {
        q.marks.erase(h);
        return;
    }
    h->second.held = SlotQueue::Held::Handled;
    h->second.handled_ms = now;
    if (!prune_timer_.pending()) prune_timer_.arm(std::max<int64_t>(opts_.done_window_ms, 1));
}

void CompletionBatches::send() {
    // While the server cannot serve, they wait for resume().
    if (!store_.has_waiting() || !link_.serving()) return;
    if (ack_timer_.pending() && completion_backoff_ms_) return;  // backing off
    // Deliveries first: while claims are on their way (to any master: they share the
    // CPU; not a standalone burst's pipelined claims, see claims_on_their_way_) acks
    // wait, up to kAckHoldMs. Nothing waits on an ack but bookkeeping: the items stay
    // leased to us meanwhile. Not once claiming has stopped, and not for an item claimed
    // half a lease ago or earlier (its ack must beat the lease's end; an unknown claim
    // time counts as long ago).
    int64_t hold = std::min<int64_t>(kAckHoldMs, opts_.lease_ms / 4);
    int64_t t = wall_ms();
    const bool may_wait =
        t - completions_since_ms_ < hold && t - oldest_claim_ms_ < opts_.lease_ms / 2;
    if (claims_on_their_way_() && may_wait) {
        if (!ack_timer_.pending()) ack_timer_.arm(kAckPollMs);
        return;
    }
    ack_timer_.cancel();
    if (size_t late = drop_expired(t)) {
        counters_.late_acks.fetch_add(static_cast<int64_t>(late));
        log_(KW_LOG_WARN,
             std::to_string(late) + " completions for " + link_.endpoint() +
                 " could not be written before their lease ended; those "
                 "items will be delivered again",
             nullptr);
    }
    // Within the same bounds, the acks of a batch that may still be acked whole wait for
    // its other items (the ack of a whole batch writes nothing per item).
    const bool batches_wait = may_wait && claiming_();
    std::map<SlotQueue *, std::vector<Completion>> acks, releases;
    std::vector<Completion> kept;
    for (auto &c : store_.take_waiting()) {
        SlotQueue *qp = queues_.queue_of(c.queue, c.id, c.slot);
        if (!qp) continue;
        if (c.result == kRelease)
            releases[qp].push_back(std::move(c));
        else if (c.result == KW_RESULT_ACK && batches_wait && qp->batch_open(c.batch_seq))
            kept.push_back(std::move(c));
        else if (c.result == KW_RESULT_ACK)
            acks[qp].push_back(std::move(c));
        else
            send_fail(*qp, std::move(c));
    }
    if (!kept.empty()) {
        for (auto &c : kept) store_.add(std::move(c));
        ack_timer_.arm(std::max<int64_t>(hold - (t - completions_since_ms_), 1));
    }
    for (auto &kv : releases) send_ids(scripts::batch::kRelease, *kv.first, std::move(kv.second));
    for (auto &kv : acks) send_ids(scripts::batch::kAck, *kv.first, std::move(kv.second));
}

size_t CompletionBatches::drop_expired(int64_t now) {
    std::vector<Completion> dropped = store_.drop_expired(now, opts_.lease_ms);
    // Their acks will never be sent: their batches no longer wait for them.
    for (const Completion &c : dropped)
        if (SlotQueue *q =
                c.result == KW_RESULT_ACK ? queues_.queue_of(c.queue, c.id, c.slot) : nullptr)
            q->acks_left(c.batch_seq, 1);
    return dropped.size();
}

void CompletionBatches::send_fail(SlotQueue &q, Completion &&c) {
    bool reject = c.result != KW_RESULT_RETRY;
    std::uniform_real_distribution<double> jitter(0.0, 1.0);
    std::vector<std::string> keys = {q.keys.due,
                                     q.keys.inflight,
                                     q.keys.leases,
                                     q.keys.data,
                                     q.keys.dead,
                                     q.keys.done,
                                     q.keys.batch(opts_.owner, c.batch_seq)};
    std::vector<std::string> argv = {
        opts_.owner,
        std::to_string(c.batch_seq),
        std::to_string(c.batch_b),
        q.is_keys ? "1" : "0",
        c.id,
        c.error.empty() ? (reject ? "rejected by the handler" : "the handler asked for a retry")
                        : c.error,
        reject ? "1" : "0",
        std::to_string(opts_.max_attempts),
        std::to_string(opts_.retry_base_ms),
        std::to_string(opts_.retry_max_ms),
        std::to_string(jitter(rng_)),
        std::to_string(c.retry_delay_ms)};
    std::vector<Completion> batch;
    batch.push_back(std::move(c));
    // Queues are never erased: &q outlives the reply.
    const SlotQueue *qp = &q;
    send_batch(scripts::batch::kFail, q, std::move(keys), std::move(argv), std::move(batch),
               [this, qp](redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER) {
                       log_(KW_LOG_ERROR,
                            "fail script: " + reply_to_string(r) +
                                "; the item will come back when its lease ends",
                            qp);
                       return;
                   }
                   if (r->integer == 1) {
                       counters_.retried.fetch_add(1);
                   } else if (r->integer == 2) {
                       counters_.dead.fetch_add(1);
                       if (qp->stats) qp->stats->dead.fetch_add(1, std::memory_order_relaxed);
                   } else {
                       counters_.late_acks.fetch_add(1);
                   }
               });
}

void CompletionBatches::send_ids(const Script &s, SlotQueue &q, std::vector<Completion> &&all) {
    // One call per claim batch (and per kChunk ids of it), naming the batch; the acks of a
    // whole batch in one call naming none ('*').
    const bool ack = &s == &scripts::batch::kAck;
    std::map<std::pair<uint64_t, int64_t>, std::vector<Completion>> by_batch;
    for (auto &c : all) by_batch[{c.batch_seq, c.batch_b}].push_back(std::move(c));
    for (auto &group : by_batch) {
        const uint64_t seq = group.first.first;
        const int64_t b = group.first.second;
        std::vector<Completion> &items = group.second;
        if (ack && q.acks_sent(seq, items.size())) {
            send_group(s, q, seq, b, items, 0, items.size(), true);
            // Enough done markers to prune: a claim soon, even if none is due.
            if (q.markers >= SlotQueue::kPruneAfterMarkers && q.timer) q.timer->arm(0);
            continue;
        }
        for (size_t i = 0; i < items.size(); i += kChunk)
            send_group(s, q, seq, b, items, i, std::min(items.size(), i + kChunk), false);
    }
}

void CompletionBatches::send_group(const Script &s, SlotQueue &q, uint64_t seq, int64_t b,
                                   std::vector<Completion> &all, size_t from, size_t end,
                                   bool whole) {
    const bool ack = &s == &scripts::batch::kAck;
    std::vector<std::string> keys = {q.keys.due, q.keys.inflight, q.keys.leases, q.keys.data};
    if (ack) keys.push_back(q.keys.done);
    keys.push_back(q.keys.batch(opts_.owner, seq));
    std::vector<std::string> argv = {opts_.owner};
    if (ack) argv.push_back(q.is_keys ? "1" : "0");
    argv.insert(argv.end(), {std::to_string(seq), std::to_string(b), whole ? "*" : "i"});
    if (!whole) argv.push_back(std::to_string(end - from));
    std::vector<Completion> batch;
    batch.reserve(end - from);
    for (size_t j = from; j < end; j++) {
        if (!whole) argv.push_back(all[j].id);
        batch.push_back(std::move(all[j]));
    }
    {
        int64_t sent = static_cast<int64_t>(end - from);
        const SlotQueue *qp = &q;
        send_batch(s, q, std::move(keys), std::move(argv), std::move(batch),
                   [this, ack, sent, qp](redisReply *r) {
                       // ack: the count per batch (one here); release: the count.
                       if (ack && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
                           r->element[0]->type == REDIS_REPLY_INTEGER) {
                           counters_.acked.fetch_add(r->element[0]->integer);
                           // An ack for an item whose lease passed to another holder is refused.
                           counters_.late_acks.fetch_add(
                               std::max<int64_t>(sent - r->element[0]->integer, 0));
                           return;
                       }
                       if (ack || r->type != REDIS_REPLY_INTEGER) {
                           log_(KW_LOG_ERROR,
                                std::string(ack ? "ack" : "release") +
                                    " failed: " + reply_to_string(r) +
                                    "; the items will be redelivered after their lease",
                                qp);
                           return;
                       }
                       counters_.released.fetch_add(r->integer);
                   });
    }
}

void CompletionBatches::send_batch(const Script &s, SlotQueue &q, std::vector<std::string> keys,
                                   std::vector<std::string> argv, std::vector<Completion> &&batch,
                                   ReplyFn on_done) {
    CompletionStore::Ticket ticket = store_.sent(std::move(batch));
    const std::string &key = q.keys.due;  // queues are never erased
    bool sent = link_.eval(s, keys, std::move(argv), [this, ticket, on_done, &key](redisReply *r) {
        const ReplyError kind = classify(r);
        if (kind == ReplyError::Loading || whole_cluster_down(r)) {
            // Redis did nothing: sent again as soon as it serves.
            store_.retry_later(ticket);
            link_.server_waits(kind, key);
            return;
        }
        if (is_transient(kind) || kind == ReplyError::Ask ||
            (kind == ReplyError::Moved && !opts_.on_redirect)) {
            // Loading, busy, a slot on the move: Redis did nothing; send it again.
            store_.retry_later(ticket);
            completions_wait(reply_to_string(r));
            return;
        }
        if (kind == ReplyError::Moved) {
            // The slot is served by another master now: route them there.
            opts_.on_redirect(store_.take(ticket));
            return;
        }
        store_.confirmed(ticket);
        completion_backoff_ms_.reset();
        on_done(r);
    });
    if (!sent) store_.retry_later(ticket);  // the connection is down: on_ready sends them
}

void CompletionBatches::completions_wait(const std::string &why) {
    std::optional<int64_t> previous = completion_backoff_ms_;
    int64_t next = opts_.backoff.after(previous.value_or(0));
    completion_backoff_ms_ = next;
    const int64_t delay = within_leases(next);
    if (next != previous)
        log_(KW_LOG_WARN,
             "completions for " + link_.endpoint() + " must wait: " + why +
                 "; sending them again in " + std::to_string(delay) +
                 "ms (the items stay leased to us)",
             nullptr);
    ack_timer_.arm(delay);
}

int64_t CompletionBatches::within_leases(int64_t delay) const {
    // A backoff grown while Redis was away or refusing must not sleep through the little
    // lease the waiting completions have left: their items would be delivered again.
    const std::optional<int64_t> end = store_.first_lease_end(opts_.lease_ms);
    return end ? before_deadline(delay, *end - wall_ms()) : delay;
}

void CompletionBatches::prune_done() {
    int64_t oldest = wall_ms() - opts_.done_window_ms;
    bool left = false;
    queues_.for_each([&](SlotQueue &q) {
        for (auto it = q.marks.begin(); it != q.marks.end();) {
            const bool handled = it->second.held == SlotQueue::Held::Handled;
            if (handled && it->second.handled_ms < oldest) {
                it = q.marks.erase(it);
                continue;
            }
            left = left || handled;
            ++it;
        }
    });
    if (left) prune_timer_.arm(std::max<int64_t>(opts_.done_window_ms, 1));
}

}  // namespace keywatch
