// Adoption: one node's side of zero-change adoption (docs/reliable-delivery.md, "Adopted
// keys"). Keys an event said may have had their TTL set, moved or removed, and keys a
// catch-up scan found, go to the `adopt` script (scripts.h), which makes the queues agree
// with each key's TTL: per slot queue and snapshot flag, de-duplicated, at most kAdoptChunk
// keys a call, on the node's one connection, where NodeIntake sends them after a read's live
// claims and forgets (kept only as first sent: see NodeIntake). Replies are counted
// (adopt.adopted, rescheduled, untracked, late). Keys that cannot go now (no connection,
// LOADING, the whole cluster down) wait here (at most kMaxAdoptWaiting) and go once the node
// serves; beyond that, after a failed reply, or when their slot has no master (CLUSTERDOWN
// for one slot) they are dropped, counted, and on_dropped asks for a catch-up scan. Keys of
// a slot on the move or served elsewhere (cluster: MOVED, ASK, TRYAGAIN) go to on_unrouted,
// to be sent again where the slot is served. Loop thread only (owned by a Sweeper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/queue/adopt_rules.h"
#include "core/sweeper/node_link.h"
#include "core/sweeper/slot_queues.h"
#include "core/sweeper/sweeper_counters.h"

namespace keywatch {

// Keys per adopt call: about 0.5 ms of Redis time, the most one call adds ahead of others.
inline constexpr size_t kAdoptChunk = 100;
// Keys kept while the connection is down; beyond, dropped (a catch-up scan follows).
inline constexpr size_t kMaxAdoptWaiting = 100000;

// One key to adopt, and the rule (index) it matched.
struct AdoptKey {
    std::string key;
    int rule = 0;
    int slot = -1;           // cluster: its slot if known (else worked out)
    bool from_event = true;  // heard of in an event: gone before adoption counts adopt.late
    bool resent = false;     // cluster: refused once, parked and sent again (Fanout)
};

// What became of the keys of one add() call.
struct AdoptTally {
    int64_t adopted = 0;      // a, S: tracked now
    int64_t tracked = 0;      // r, =: tracked already (r: its deadline moved)
    int64_t untracked = 0;    // u
    int64_t gone = 0;         // g
    int64_t not_adopted = 0;  // n, x, or the call failed, waits, was dropped or parked
};

class Adoption {
  public:
    struct Options {
        AdoptRules rules;
        bool cluster = false;
        // Cluster: keys whose call met MOVED/ASK/TRYAGAIN, nothing written, to
        // be sent again to the slot's master (null: dropped, and on_dropped).
        std::function<void(std::vector<AdoptKey> &&)> on_unrouted;
        // Keys were dropped: what they said is lost until a catch-up scan (null: none).
        std::function<void()> on_dropped;
    };
    using Answered = std::function<void(const AdoptTally &)>;

    // Serves each rule's queue in `queues` as a key queue (swept like `keys`).
    Adoption(Options opts, NodeLink &link, SlotQueues &queues, SweeperCounters &counters,
             QueueLog log);
    Adoption(const Adoption &) = delete;
    Adoption &operator=(const Adoption &) = delete;

    const AdoptRules &rules() const { return opts_.rules; }
    // Sends the keys now (or keeps them for the connection). answered (optional) runs once,
    // when every call for them was answered, kept, parked or dropped.
    void add(std::vector<AdoptKey> &&keys, Answered answered = {});
    // The connection serves again: what waited goes out.
    void resume();
    // Keys waiting for the connection.
    size_t waiting() const { return waiting_.size(); }
    // Those keys, taken out (the node is retired: the owner routes them by slot).
    std::vector<AdoptKey> take_waiting();

  private:
    struct Pending;
    void send(SlotQueue &p, SlotQueue *k, bool snapshot, std::vector<AdoptKey> &&keys,
              const std::shared_ptr<Pending> &pending);
    void on_reply(SlotQueue &p, std::vector<AdoptKey> &keys, redisReply *r, AdoptTally *tally);
    void keep(std::vector<AdoptKey> &&keys);
    void drop(size_t count);

    Options opts_;
    NodeLink &link_;
    SlotQueues &queues_;
    SweeperCounters &counters_;
    QueueLog log_;
    std::vector<AdoptKey> waiting_;
};

}  // namespace keywatch
