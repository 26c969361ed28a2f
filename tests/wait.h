// Waiting, not timing (docs/testing.md): the bounded waits every test uses - wait_until for
// any condition, and stat_reaches, the one way a test reads an engine statistic, since
// counters move on the engine's thread after the effect a test can see.
// Thread-safety: the functions hold no state; the engine's statistics are thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "keywatch.h"

namespace kwtest {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Generous: a loaded CI machine must not make a correct engine fail. Never a speed claim.
constexpr milliseconds kWait{10000};

// Polls pred every 10 ms until it holds or timeout passes; returns its last value.
inline bool wait_until(const std::function<bool()> &pred, milliseconds timeout = kWait) {
    auto deadline = Clock::now() + timeout;
    while (!pred()) {
        if (Clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(milliseconds(10));
    }
    return true;
}

// What a statistic must come to: a value (the default, from a number), at least or at most
// one, or anything but one.
struct StatWant {
    enum class Op { Equal, AtLeast, AtMost, NotEqual };
    StatWant(int64_t v) : op(Op::Equal), value(v) {}  // NOLINT: implicit, stat_reaches(n, 3)
    StatWant(Op o, int64_t v) : op(o), value(v) {}
    bool holds(int64_t v) const {
        switch (op) {
            case Op::AtLeast:
                return v >= value;
            case Op::AtMost:
                return v <= value;
            case Op::NotEqual:
                return v != value;
            default:
                return v == value;
        }
    }
    std::string text() const {
        static const char *ops[] = {"", "at least ", "at most ", "anything but "};
        return ops[static_cast<int>(op)] + std::to_string(value);
    }
    Op op;
    int64_t value;
};
inline StatWant at_least(int64_t v) {
    return {StatWant::Op::AtLeast, v};
}
inline StatWant at_most(int64_t v) {
    return {StatWant::Op::AtMost, v};
}
inline StatWant other_than(int64_t v) {
    return {StatWant::Op::NotEqual, v};
}

// The one way a test reads a statistic (docs/testing.md, "Waiting, not timing"): counters
// move when a reply reaches the engine's thread, which can be after the test saw the effect
// in Redis or in a handler, so this waits (polling every 10 ms, up to timeout) until the sum
// of the statistics named satisfies `want` (stat_reaches: one statistic). One that must stay
// put (0 lease expiries) passes at once. *seen (if given) gets the last sum read. A timeout
// of 0 reads once: only inside a predicate that wait_until polls, or for a bound that must
// hold at every moment, sampled in a loop. tests/check_stat_reads.cmake refuses
// kw_engine_stat( anywhere else in the test sources.
inline ::testing::AssertionResult stats_reach(kw_engine_t *engine,
                                              const std::vector<std::string> &names, StatWant want,
                                              int64_t *seen = nullptr,
                                              milliseconds timeout = kWait) {
    std::string refused;
    int64_t sum = 0;
    auto read = [&] {
        sum = 0;
        for (const auto &name : names) {
            int64_t v = 0;
            int rc = kw_engine_stat(engine, name.c_str(), &v);
            if (rc != KW_OK) {
                refused = "kw_engine_stat(" + name + ") = " + kw_err_name(rc);
                return true;  // no use waiting
            }
            sum += v;
        }
        return want.holds(sum);
    };
    const bool reached = timeout.count() > 0 ? wait_until(read, timeout) : read();
    if (seen) *seen = sum;
    if (!refused.empty()) return ::testing::AssertionFailure() << refused;
    if (reached) return ::testing::AssertionSuccess();
    std::string what;
    for (const auto &name : names) what += (what.empty() ? "" : " + ") + name;
    return ::testing::AssertionFailure()
           << what << " is " << sum << " after " << timeout.count() << " ms; want " << want.text();
}
inline ::testing::AssertionResult stat_reaches(kw_engine_t *engine, const std::string &name,
                                               StatWant want, int64_t *seen = nullptr,
                                               milliseconds timeout = kWait) {
    return stats_reach(engine, {name}, want, seen, timeout);
}

// "name=value, ..." of the statistics named, for failure messages only (never asserted on).
inline std::string stats_text(kw_engine_t *engine, const std::vector<std::string> &names) {
    std::string out;
    for (const auto &name : names) {
        int64_t v = 0;
        int rc = kw_engine_stat(engine, name.c_str(), &v);
        out += (out.empty() ? "" : ", ") + name + "=" +
               (rc == KW_OK ? std::to_string(v) : std::string(kw_err_name(rc)));
    }
    return out;
}

}  // namespace kwtest
