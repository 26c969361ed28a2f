// SweeperCounters: what the sweepers of one engine count (claims, completions, leases),
// shared by them and read by the engine's stats from any thread. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>

namespace keywatch {

struct SweeperCounters {
    std::atomic<int64_t> claimed{0}, acked{0}, retried{0}, dead{0}, lease_expired{0}, late_acks{0},
        suppressed{0}, sweep_calls{0}, released{0}, unrouted{0};
};

}  // namespace keywatch
