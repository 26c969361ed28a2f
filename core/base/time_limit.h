// The latest deadline keywatch accepts: 9999-12-31T23:59:59.999Z (253402300799999 ms since
// the Unix epoch). Every time and duration of the C API, the configuration and the CLI is
// checked against it here, and the Lua scripts refuse a deadline past it (they get the
// number as KW_MAX_TIME_MS_TEXT). Why a limit at all: a ZSET score is a double, exact only
// up to 2^53 ms, and the deadline is part of an item's event id; an int64 deadline past
// that would lose milliseconds, and one near INT64_MAX would overflow. The ISO-8601 form
// people read ends at year 9999, so that is the limit.
// A duration is checked as the deadline it makes: now (local clock) + duration. The client
// cannot know Redis's clock exactly, so the scripts check again on Redis's.
// Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/clock.h"

// The limit as text, for the Lua scripts' source.
#define KW_MAX_TIME_MS_TEXT "253402300799999"
#define KW_MAX_TIME_ISO "9999-12-31T23:59:59.999Z"

namespace keywatch {

namespace detail {
constexpr int64_t decimal(const char *s) {
    int64_t n = 0;
    for (; *s; ++s) n = n * 10 + (*s - '0');
    return n;
}
}  // namespace detail

// The last millisecond of year 9999 (UTC), in ms since the Unix epoch.
constexpr int64_t kMaxTimeMs = detail::decimal(KW_MAX_TIME_MS_TEXT);
static_assert(kMaxTimeMs < (int64_t{1} << 53), "scores must stay exact in a double");

// True when the time at_ms is not later than kMaxTimeMs.
inline bool time_within_max(int64_t at_ms) {
    return at_ms <= kMaxTimeMs;
}

// True when now_ms + duration_ms is not later than kMaxTimeMs (computed without overflow;
// a negative duration is the caller's business).
inline bool duration_within_max(int64_t duration_ms, int64_t now_ms = wall_ms()) {
    return duration_ms <= kMaxTimeMs - (now_ms < 0 ? 0 : now_ms);
}

// Messages naming the value (as the caller shows it) and the limit.
inline std::string time_after_max(const std::string &value) {
    return value + " is later than " KW_MAX_TIME_ISO ", the latest time keywatch accepts";
}
inline std::string duration_after_max(const std::string &value) {
    return value + " from now ends after " KW_MAX_TIME_ISO
                   ", the latest deadline keywatch accepts: give a shorter duration";
}

}  // namespace keywatch
