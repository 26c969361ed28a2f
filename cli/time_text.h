// Times and spans on the command line: `--at` takes milliseconds since the Unix epoch or an
// ISO-8601 UTC time (2026-11-21T10:00:00Z, optionally with .250 milliseconds), parsed
// strictly; output shows times in the same ISO form and spans like 850ms, 1.2s, 5m12s.
// Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace keywatch::cli {

// The last millisecond an ISO time can name (9999-12-31T23:59:59.999Z).
constexpr int64_t kMaxTimeMs = 253402300799999;

// Parses "1795241184005" (ms since the epoch) or "2026-11-21T10:00:00Z" /
// "2026-11-21T10:00:00.250Z" (UTC only, 1 to 3 fraction digits, years 1970..9999, real
// calendar dates). False with *err saying what is wrong and which forms are accepted.
bool parse_time_ms(std::string_view text, int64_t *ms, std::string *err);

// "2026-11-21T10:00:00.250Z" for ms since the epoch (0..kMaxTimeMs; others as a number).
std::string format_utc_ms(int64_t ms);

// A span for people: "0ms", "850ms", "1.2s", "12s", "5m12s", "3h05m", "2d03h". Negative
// spans get a leading '-'.
std::string format_span_ms(int64_t ms);

}  // namespace keywatch::cli
