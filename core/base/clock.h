// The local wall clock in ms since the Unix epoch: event times, leases and deadlines as
// this process sees them (Redis's own clock is read with TIME where it matters).
// Header-only, so that the CLI's pieces and the tests share it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace keywatch {

inline int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace keywatch
