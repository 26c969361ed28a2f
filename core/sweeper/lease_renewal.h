// LeaseRenewal: the leases of the items one Sweeper holds (claimed, not completed: queued,
// running or held). Every lease/3 it renews them, up to hold.timeout after their claim; an
// item held longer is released for redelivery (through `release`, as a completion) and the
// completion that comes for it later is counted late and not written
// (late_after_hold_timeout()). The rule: docs/reliable-delivery.md, "Handlers and leases".
// Loop thread only (owned by a Sweeper).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/redis/event_loop.h"
#include "core/sweeper/completion_store.h"
#include "core/sweeper/node_link.h"
#include "core/sweeper/slot_queues.h"

namespace keywatch {

class LeaseRenewal {
  public:
    struct Options {
        std::string owner;
        int64_t lease_ms, hold_timeout_ms;
    };
    // `release`: items held past hold.timeout, as kRelease completions. `late_acks`: where
    // a completion that came after such a release is counted.
    LeaseRenewal(EventLoop &loop, Options opts, NodeLink &link, SlotQueues &queues,
                 std::atomic<int64_t> &late_acks,
                 std::function<void(std::vector<Completion> &&)> release, QueueLog log);
    LeaseRenewal(const LeaseRenewal &) = delete;
    LeaseRenewal &operator=(const LeaseRenewal &) = delete;

    void start();  // renews every lease/3 from now on
    void stop();
    // A completion for a claim released at hold.timeout: to be dropped; counted late,
    // unless it is a release (a Hold ended without completing, a parked event given back).
    bool late_after_hold_timeout(const Completion &c);

  private:
    void renew_leases();
    void renew_queue(SlotQueue &q, std::vector<std::string> &&members);

    Options opts_;
    NodeLink &link_;
    SlotQueues &queues_;
    std::atomic<int64_t> &late_acks_;
    std::function<void(std::vector<Completion> &&)> release_;
    QueueLog log_;
    Timer renew_timer_;
};

}  // namespace keywatch
