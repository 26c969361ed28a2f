// SlotQueue: what one Sweeper knows of one queue in one slot tag (standalone: the queue's
// one tag) - where it is served, what is on its way, which of its items this engine holds
// - as explicit states rather than sentinel numbers. Counts are derived from the sets
// themselves, never kept beside them by hand.
// Loop thread only (owned by a Sweeper).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/event.h"
#include "core/redis/event_loop.h"
#include "core/queue/queue_keys.h"
#include "core/base/stats.h"

namespace keywatch {

// A slot queue by name: queue name, slot tag and the tag's slot.
struct SlotQueueName {
    std::string name, tag;
    int slot = 0;
};

struct SlotQueue {
    // Cluster: where the slot queue is served, as far as this sweeper knows.
    enum class Where {
        Here,      // by this master
        Arriving,  // its keys were restored here (a slot migrating in), or the topology
                   // shows this master serving its slot now, but this master still
                   // answers MOVED until the migration's last step: sweep again, backing
                   // off, for at most cluster.migration_wait
        Moved,     // by another master: swept again only when touched or found by a scan
    };
    // Where::Arriving: since when, and the wait after the last MOVED (none yet: the first
    // MOVED asks for a topology refresh).
    struct Arrival {
        int64_t since_ms = 0;
        std::optional<int64_t> retry_ms;
    };
    // An item of ours: claimed and not completed; Notified once its `expired` notification
    // came (no other is to be expected); Handled (tracked keys only): completed a moment
    // ago, remembered for track.done_window so that a late notification is recognised
    // without asking Redis.
    enum class Held { Claimed, Notified, Handled };

    std::string name, tag;
    int slot = 0;  // of the tag (standalone: 0)
    QueueKeys keys;
    bool is_keys = false;
    QueueStats *stats = nullptr;   // the engine's record of the queue (null: none)
    std::unique_ptr<Timer> timer;  // its next sweep

    // On their way: claim_due calls (and whether to sweep again at once after them), a
    // cluster peek (ZRANGE).
    bool again = false, peeking = false;
    // The claim_due calls on their way: batch seq -> the most it may claim. One, or a few
    // while claims come back full (bursting): each claims the next items atomically, so
    // that Redis never waits for a round trip during a burst.
    std::map<uint64_t, int64_t> sweeps;
    bool sweeping() const { return !sweeps.empty(); }
    // The last claim_due answered came back full: more was due than it could take.
    bool bursting = false;
    // Whether the claims on their way are taking due items: a burst, or the last claim saw
    // an item due by `now` (local clock; the sweep at that deadline is on its way).
    bool due_now(int64_t now) const { return bursting || (next_due && *next_due <= now); }
    // claim_due calls whose answer the connection lost (seq -> when, local clock): Redis may
    // have run them. For a lease, live claims declare their batch keys (what one took alone
    // has no inflight entry, yet is taken), and the next connection gives them back.
    std::map<uint64_t, int64_t> unanswered;
    // The batch seqs a live claim declares as pending: the claim_due on its way and the
    // unanswered ones of the last lease.
    std::vector<uint64_t> pending_claims(int64_t now, int64_t lease_ms) {
        for (auto it = unanswered.begin(); it != unanswered.end();)
            it = now - it->second > lease_ms ? unanswered.erase(it) : std::next(it);
        std::vector<uint64_t> out;
        for (auto &s : sweeps) out.push_back(s.first);
        for (auto &u : unanswered) out.push_back(u.first);
        return out;
    }
    std::optional<int64_t> next_due;        // the earliest deadline the last claim saw
    std::optional<int64_t> done_pruned_ms;  // keys: when a claim last pruned `done`
    // What the last claim that looked at leases ('L') saw, local clock: when it looked, the
    // earliest lease end then (none: no lease), and whether others held batches. A claim
    // looks again once that lease end has passed, and at least once a second.
    std::optional<int64_t> looked_ms, lease_end_ms;
    bool others_hold = false;
    // Set while its claims fail (CLUSTERDOWN, NOPERM, BUSY, ...): the current back-off.
    std::optional<int64_t> claim_retry_ms;
    // Live events awaiting the claims in flight (the sweeps may take their items), and
    // since when (local clock) the oldest of them waits.
    std::vector<Event> deferred;
    int64_t deferred_since_ms = 0;

    // What `marks` keeps per item id.
    struct Mark {
        Held held = Held::Claimed;
        uint64_t batch_seq = 0;  // the claim batch it came in (see `batches`)
        int64_t claimed_ms = 0;  // held: when claimed (its Event::ts_ms), for hold.timeout
        int64_t handled_ms = 0;  // Handled: when it was handled
    };
    // The items of ours: held (claimed and not completed: Claimed, Notified) and handled a
    // moment ago (Handled). One map for both, so that an item costs one lookup whichever
    // it is (a burst looks up every item several times) and turns handled in place.
    std::unordered_map<std::string, Mark> marks;
    // The mark of an item held (claimed and not completed), or null.
    Mark *held_mark(const std::string &id) {
        auto it = marks.find(id);
        return it != marks.end() && it->second.held != Held::Handled ? &it->second : nullptr;
    }
    // The claim batches of ours with items still held or acks not sent yet, by seq (the
    // engine-wide counter that names their batch key, QueueKeys::batch): b is the batch
    // number the claim returned (its lease member is "<owner>:<seq>:<b>"), held how many of
    // its items are not completed yet, acks how many were acked and wait to be sent, whole
    // whether the batch can still be acked whole ('*', which acks every item still in the
    // batch key): no item came with records (a payload, a retry's attempt, a reclaim), left
    // any other way than by ACK (retry, reject, release, moved to another batch), and no ack
    // of it went out before (trap T7: an unconfirmed retry must never be acked by '*'). A
    // batch leaves when nothing of it is held or waits.
    struct Batch {
        int64_t b = -1;
        size_t held = 0, acks = 0;
        bool whole = true;
    };
    std::map<uint64_t, Batch> batches;
    // A held item of batch `seq` left: acked (its ack waits to be sent), or otherwise.
    void batch_left(uint64_t seq, bool acked) {
        auto it = batches.find(seq);
        if (it == batches.end()) return;
        Batch &b = it->second;
        if (b.held > 0) b.held--;
        if (acked)
            b.acks++;
        else
            b.whole = false;
        if (b.held == 0 && b.acks == 0) batches.erase(it);
    }
    // Whether the acks of batch `seq` may wait for its other items, to go out as one.
    bool batch_open(uint64_t seq) const {
        auto it = batches.find(seq);
        return it != batches.end() && it->second.whole && it->second.held > 0;
    }
    // `n` acks of batch `seq` go out in one call: whether they are the whole batch (every
    // item acked, all of them in this call, nothing of the batch sent before). An ack sent
    // again (after a transient error) finds its batch gone or no longer whole.
    bool acks_sent(uint64_t seq, size_t n) {
        auto it = batches.find(seq);
        if (it == batches.end()) return false;
        const Batch &b = it->second;
        const bool whole = b.whole && b.held == 0 && b.acks == n;
        if (whole && b.b >= 0) markers++;
        acks_left(seq, n);
        return whole;
    }
    // `n` acks of batch `seq` left: sent, or given up (their lease ended first).
    void acks_left(uint64_t seq, size_t n) {
        auto it = batches.find(seq);
        if (it == batches.end()) return;
        Batch &b = it->second;
        b.acks = b.acks > n ? b.acks - n : 0;
        b.whole = false;
        if (b.held == 0 && b.acks == 0) batches.erase(it);
    }
    // Tracked keys: shared batches acked whole (each leaves a done marker in `leases`) since
    // a claim last pruned; a claim prunes again once there are kPruneAfterMarkers of them.
    size_t markers = 0;
    static constexpr size_t kPruneAfterMarkers = 256;
    // Lease members the last claim named as run out, whose batch keys the next claim
    // declares (and takes).
    std::vector<std::string> stale;
    // When Redis last confirmed a renewal of the leases of the items held here (the renew
    // call's send time, local clock; 0: never): each such lease runs at least lease from it.
    int64_t renewed_ms = 0;
    // Items released at hold.timeout whose completion has not come yet (id -> claim time):
    // that completion is counted late and not written.
    std::unordered_map<std::string, int64_t> timed_out;

    bool dirty = false;  // cluster: touched since the last sweep
    Where where = Where::Here;
    Arrival arrival;  // Where::Arriving only
};

}  // namespace keywatch
