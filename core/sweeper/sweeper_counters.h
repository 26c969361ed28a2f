// SweeperCounters: what the sweepers of one engine count (claims, completions, leases),
// shared by them and read by the engine's stats from any thread. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>

namespace keywatch {

struct SweeperCounters {
    std::atomic<int64_t> claimed{0}, acked{0}, retried{0}, dead{0}, lease_expired{0}, late_acks{0},
        suppressed{0}, sweep_calls{0}, released{0}, unrouted{0};
    // Adoption (adoption.h): keys tracked now, deadlines moved, untracked (TTL gone), gone
    // before their adoption (after an event), dropped (the connection away too long, a
    // failed reply); cluster: parked now for their slot's master, sent again after parking.
    std::atomic<int64_t> adopt_adopted{0}, adopt_rescheduled{0}, adopt_untracked{0}, adopt_late{0},
        adopt_dropped{0}, adopt_parked{0}, adopt_resent{0};
};

}  // namespace keywatch
