// CompletionStore: what handlers finished (ack, retry, reject, release) for the queues of
// one node, kept until Redis has confirmed it. A completion waits (for the connection, or
// while claims are on their way), goes out in a script call (in flight, under a ticket),
// and is forgotten only when Redis answered that call. A call that met a transient error
// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, ASK) or whose connection was lost waits again,
// so the item this engine handled is not redelivered after its lease. A completion whose
// lease has surely ended (done + lease is past: the lease is never renewed after the
// item was completed) is given up and counted as late: Redis would refuse it anyway.
// Loop thread only. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace keywatch {

// What became of a claimed item: a handler's kw_result, or kRelease.
struct Completion {
    std::string queue, id;
    int result;
    std::string error;
    int slot = -1;           // cluster: the id's slot if known
    int64_t claimed_ms = 0;  // when the item was claimed (local clock; 0: unknown)
    int64_t done_ms = 0;     // when the handler finished (local clock; set on intake)
    // When its lease was last set, as far as this engine knows: the claim, or a renewal
    // Redis confirmed (local clock; set on intake; 0: unknown). The lease runs at least
    // until leased_ms + lease.
    int64_t leased_ms = 0;
    int64_t retry_delay_ms = -1;  // RETRY: when due again (<0: the usual backoff)
    // The claim batch the item came in (set on intake from the queue's record; carried when
    // rerouted): its acks, fails and releases name it. 0/-1: unknown (Redis refuses them).
    uint64_t batch_seq = 0;
    int64_t batch_b = -1;
};
// A claimed item this engine will not handle (it is stopping): due again for anyone.
inline constexpr int kRelease = -2;

class CompletionStore {
  public:
    using Ticket = uint64_t;

    void add(Completion &&c) { waiting_.push_back(std::move(c)); }
    // Room for `n` about to be added, when none waits (else the vector grows as usual).
    void reserve(size_t n) {
        if (waiting_.empty()) waiting_.reserve(n);
    }
    bool has_waiting() const { return !waiting_.empty(); }
    // Waiting and in flight: what Redis has not confirmed yet.
    size_t size() const { return waiting_.size() + in_flight_count_; }

    // Every waiting completion, to be sent; each call that carries some of them registers
    // them with sent().
    std::vector<Completion> take_waiting();
    // A script call carrying `batch` went out: it is in flight under the ticket returned.
    Ticket sent(std::vector<Completion> &&batch);
    // Redis answered the call: its completions are done.
    void confirmed(Ticket t);
    // The call met a transient error or could not be sent: its completions wait again.
    void retry_later(Ticket t);
    // The call's completions, taken out of the store (to be routed elsewhere).
    std::vector<Completion> take(Ticket t);
    // The connection went away: no answer will come for anything in flight.
    void connection_lost();
    // Everything, waiting or in flight (a node is retired: route them elsewhere).
    std::vector<Completion> take_all();
    // Gives up waiting completions whose lease has surely ended; returns them.
    std::vector<Completion> drop_expired(int64_t now_ms, int64_t lease_ms);
    // The earliest time a lease of those waiting or in flight may end (the first leased_ms
    // + lease_ms); none when the store is empty or no lease time is known.
    std::optional<int64_t> first_lease_end(int64_t lease_ms) const;

  private:
    std::vector<Completion> waiting_;
    std::unordered_map<Ticket, std::vector<Completion>> in_flight_;
    size_t in_flight_count_ = 0;
    Ticket next_ = 1;
};

// True when a completion done at done_ms can no longer be confirmed: its lease (at most
// lease_ms after the item was completed, as nothing renews it then) has run out.
inline bool lease_surely_ended(const Completion &c, int64_t now_ms, int64_t lease_ms) {
    return c.done_ms > 0 && now_ms > c.done_ms + lease_ms;
}

}  // namespace keywatch
