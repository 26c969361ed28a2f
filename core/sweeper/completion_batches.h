// CompletionBatches: what handlers finished for one Sweeper's node, on its way to Redis. A
// completion comes in through complete() (the item is no longer held; a handled key is
// remembered for track.done_window) and waits in the CompletionStore until Redis confirms
// it: acks and releases go out in batches per slot queue (held back briefly while claims
// are on their way, and acks while the rest of their claim batch may still be acked, to
// go out as one whole-batch ack), retries and rejects one by one; transient errors back
// off and send again (within the leases left: within_leases()), MOVED routes them to the
// slot's new master (Options::on_redirect), a server that cannot serve makes the link
// wait. Loop thread only (owned by a Sweeper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/base/backoff.h"
#include "core/redis/event_loop.h"
#include "core/sweeper/completion_store.h"
#include "core/sweeper/lease_renewal.h"
#include "core/sweeper/node_link.h"
#include "core/sweeper/slot_queues.h"
#include "core/sweeper/sweeper_counters.h"

namespace keywatch {

class CompletionBatches {
  public:
    struct Options {
        std::string owner;
        int64_t lease_ms, max_attempts, retry_base_ms, retry_max_ms, done_window_ms;
        Backoff backoff;  // after a transient error
        // Completions refused with MOVED, to be routed to the slot's new master (null:
        // retried here).
        std::function<void(std::vector<Completion> &&)> on_redirect;
    };
    // `claiming`: whether the sweeper claims (acks may wait for the rest of their batch);
    // `claims_on_their_way`: whether acks should wait for claims on their way (the sweeper
    // claims, and some claim of the engine's is unanswered, other than a standalone burst's
    // pipelined claims: Sweeper::acks_wait_for_claims); each asked once per send.
    CompletionBatches(EventLoop &loop, Options opts, NodeLink &link, SlotQueues &queues,
                      LeaseRenewal &leases, SweeperCounters &counters,
                      std::function<bool()> claiming, std::function<bool()> claims_on_their_way,
                      QueueLog log);
    CompletionBatches(const CompletionBatches &) = delete;
    CompletionBatches &operator=(const CompletionBatches &) = delete;

    // Intake: each completion is noted once (the item no longer held) and sent when it can.
    void complete(std::vector<Completion> &&done);
    // Sends what waits, if the link serves and no backoff or claim holds them back.
    void send();
    // A new connection, or the server serves again: no backoff (send() follows).
    void resume();
    // The connection went: what is in flight waits again.
    void connection_lost();
    // Stopping for good: what Redis has not confirmed is given up (and said so).
    void shutdown();
    // Not confirmed yet (waiting or in flight).
    size_t size() const { return store_.size(); }
    // Every completion not confirmed yet, taken out (routed elsewhere by the owner).
    std::vector<Completion> take_all() { return store_.take_all(); }
    // A wait (a reconnect's, a backoff's), cut while completions wait so that several tries
    // fit before the first of their leases may end (before_deadline()).
    int64_t within_leases(int64_t delay) const;

  private:
    using ReplyFn = NodeLink::ReplyFn;
    // The item is no longer held (handled keys are remembered). Sets c.leased_ms.
    void note_completed(Completion &c, int64_t now);
    // Gives up the waiting completions whose lease has surely ended; returns how many.
    size_t drop_expired(int64_t now);
    void send_fail(SlotQueue &q,
                   Completion &&c);  // retry or reject: one call per item
    // Acks or releases (s) of one queue, in calls of at most kChunk ids.
    void send_ids(const Script &s, SlotQueue &q, std::vector<Completion> &&all);
    // all[from, end), of batch (seq, b), in one call of s; `whole`: they are the whole
    // batch, acked as '*' (no ids sent).
    void send_group(const Script &s, SlotQueue &q, uint64_t seq, int64_t b,
                    std::vector<Completion> &all, size_t from, size_t end, bool whole);
    // Sends one script call carrying `batch`, kept in the store until Redis confirms it;
    // `on_done` gets the reply when it is not an error to retry or route elsewhere.
    void send_batch(const Script &s, SlotQueue &q, std::vector<std::string> keys,
                    std::vector<std::string> argv, std::vector<Completion> &&batch,
                    ReplyFn on_done);
    // A completion call met a transient error (or could not be sent): try again later,
    // backing off; logged once per backoff step.
    void completions_wait(const std::string &why);
    // Forgets handled keys older than track.done_window.
    void prune_done();

    Options opts_;
    NodeLink &link_;
    SlotQueues &queues_;
    LeaseRenewal &leases_;
    SweeperCounters &counters_;
    std::function<bool()> claiming_, claims_on_their_way_;
    QueueLog log_;
    CompletionStore store_;                         // completions until Redis confirms them
    std::optional<int64_t> completion_backoff_ms_;  // set after transient errors
    int64_t completions_since_ms_ = 0;              // when the oldest waiting one came
    int64_t oldest_claim_ms_ = 0;                   // the earliest claim among them
    Timer ack_timer_, prune_timer_;
    std::mt19937_64 rng_;  // retry jitter
};

}  // namespace keywatch
