// Backoff: the one rule for waiting before trying again, used by every retry in keywatch:
// the loop connections' reconnects (subscriber, sweeper; reconnect.min/max), the
// completions the sweeper must send again, a queue's failing claims and its look-again
// while its slot migrates in, the blocking client's TRYAGAIN/CLUSTERDOWN retries and the
// start-up probe of a server that is not listening yet. (Retries of items after
// KW_RESULT_RETRY are scheduled in Redis by the fail script: retry.base/retry.max.)
// The delay starts at min_ms and doubles each step up to max_ms; jittered() spreads it over
// [d/2, d] so a fleet of watchers does not retry in lockstep after a server restart.
// Two waits are not backed off: a server that cannot serve for now (loading its data set,
// its cluster down) is asked again every kPollMs, and a wait with a deadline behind it
// (completions whose leases run out) is cut by before_deadline().
// A value type with pure functions: thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>

namespace keywatch {

struct Backoff {
    int64_t min_ms;
    int64_t max_ms;

    // The delay after `previous` (0: the first one): min_ms, then doubled, capped at max_ms.
    int64_t after(int64_t previous) const {
        return previous <= 0 ? std::min(min_ms, max_ms) : std::min(previous * 2, max_ms);
    }
    // The delay of retry number `step` (0: the first one).
    int64_t delay(int step) const {
        int64_t d = after(0);
        for (int i = 0; i < step && d < max_ms; i++) d = after(d);
        return d;
    }
    // delay(step) spread uniformly over [d/2, d] by `random` (any 64-bit random number).
    int64_t jittered(int step, uint64_t random) const {
        int64_t d = delay(step);
        return d / 2 + static_cast<int64_t>(random % static_cast<uint64_t>(d / 2 + 1));
    }
};

// The shortest wait between tries that must not be backed off: a server that answers
// -LOADING (or -CLUSTERDOWN for its whole cluster) is asked again this often however long
// it has refused (it serves as soon as that ends, and a backed-off wait would leave
// everything waiting seconds longer than the refusal itself), and a wait cut by
// before_deadline() is no shorter.
constexpr int64_t kPollMs = 100;

// `delay`, cut so that several tries fit before a deadline `left_ms` away: at most a quarter
// of the time left, but not below kPollMs (a deadline already passed gets kPollMs).
inline int64_t before_deadline(int64_t delay, int64_t left_ms) {
    return std::min(delay, std::max(left_ms / 4, kPollMs));
}

}  // namespace keywatch
