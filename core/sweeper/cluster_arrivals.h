// ClusterArrivals: what only a Redis Cluster needs of one master's Sweeper - where each
// slot queue is served. Replies that redirect (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) change
// it (redirected()); keyspace notifications on due keys (touched()) and a SCAN every
// sweep.scan_interval (and after every connect) find the slot queues with items on this
// master; a touched queue whose next deadline is known is peeked (ZRANGE) before a claim;
// a slot the topology hands over brings its queues along (take_over()). A slot queue that
// moved away is dropped and Options::on_moved asks for a topology refresh; one migrating
// in is swept again, backing off, until it is served here, for at most
// cluster.migration_wait. Standalone, only redirected() is used (a CLUSTERDOWN never comes).
// Loop thread only (owned by a Sweeper).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/redis/event_loop.h"
#include "core/sweeper/node_link.h"
#include "core/sweeper/slot_queues.h"

namespace keywatch {

// The keyspace events on a due key that tell a cluster's sweeper of items arriving in its
// slot queues (touched()): new items (track, schedule, retry) and a slot migrated in. Its
// subscriber listens for them (the engine's plan, core/engine/plan.h).
inline constexpr const char *kArrivalEvents[] = {"zadd", "restore"};

class ClusterArrivals {
  public:
    struct Options {
        std::string ns;
        bool cluster = false;
        int64_t scan_interval_ms, migration_wait_ms;
        std::function<void()> on_moved;  // a slot is served elsewhere now (may be null)
    };
    // What it asks of its Sweeper: sweep a slot queue; a queue's claims fail (a slot with
    // no master: back off, say so) or work again.
    struct Hooks {
        std::function<void(SlotQueue &)> sweep;
        std::function<void(SlotQueue &, const redisReply *)> claims_failing;
        std::function<void(SlotQueue &)> claims_work;
        QueueLog log;
    };
    ClusterArrivals(EventLoop &loop, Options opts, NodeLink &link, SlotQueues &queues, Hooks hooks);
    ClusterArrivals(const ClusterArrivals &) = delete;
    ClusterArrivals &operator=(const ClusterArrivals &) = delete;

    void start();            // claims begin: touches and scans count from now on
    void stop();             // claims end: no more scans or touched sweeps
    void scan_all();         // a full SCAN (cluster, claiming, serving), as after a connect
    void connection_lost();  // the scan on its way is not answered
    // A reply of a claim on q redirected it (MOVED, ASK, TRYAGAIN, CLUSTERDOWN): true if
    // so (and it was dealt with).
    bool redirected(SlotQueue &q, const redisReply *r);
    // A keyspace notification on a due key of this node (one of kArrivalEvents): sweep
    // that slot queue soon.
    void touched(const std::string &due_key, const std::string &event);
    // The slot queues it knows in `slots` (indexed by slot).
    std::vector<SlotQueueName> queues_in(const std::vector<bool> &slots) const;
    // The topology shows this master serving `slots` that another served before: its
    // queues there that it gave up and those the old master knew (`known`) are swept now,
    // and again, backing off, while it still answers MOVED.
    void take_over(const std::vector<bool> &slots, const std::vector<SlotQueueName> &known);

  private:
    // Keys of q were restored here (or found here by a scan after a MOVED).
    void arriving(SlotQueue &q);
    void sweep_dirty();
    // A touched queue with a known next deadline: sweep only if new items are due earlier.
    void peek(SlotQueue &q);
    void scan(const std::string &cursor);

    Options opts_;
    NodeLink &link_;
    SlotQueues &queues_;
    Hooks hooks_;
    bool active_ = false;  // between start() and stop()
    Timer scan_timer_, dirty_timer_;
    bool scanning_ = false;
    std::vector<SlotQueue *> dirty_;  // touched queues waiting for dirty_timer_
};

}  // namespace keywatch
