// Times and spans on the command line: `--at` takes milliseconds since the Unix epoch or an
// ISO-8601 UTC time (2026-11-21T10:00:00Z, optionally with .250 milliseconds), parsed
// strictly; output shows times in the same ISO form and spans like 850ms, 1.2s, 5m12s.
// Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/time_limit.h"

namespace keywatch::cli {

// The last millisecond an ISO time can name (9999-12-31T23:59:59.999Z): the library's
// limit on every deadline.
using keywatch::kMaxTimeMs;

// Parses "1795241184005" (ms since the epoch) or "2026-11-21T10:00:00Z" /
// "2026-11-21T10:00:00.250Z" (UTC only, 1 to 3 fraction digits, years 1970..9999, real
// calendar dates). False with *err saying what is wrong and which forms are accepted.
bool parse_time_ms(std::string_view text, int64_t *ms, std::string *err);

// The value of a duration option (--ttl, --in, --duration, --timeout): a duration that is not
// negative and whose deadline, now + it, is not later than kMaxTimeMs. False with *err
// naming the option (and, for a negative value, saying what to give instead: negative_hint).
bool parse_duration_option(const std::string &option, const std::string &text,
                           const std::string &negative_hint, int64_t *ms, std::string *err);

// "2026-11-21T10:00:00.250Z" for ms since the epoch (0..kMaxTimeMs; others as a number).
std::string format_utc_ms(int64_t ms);

// A span for people: "0ms", "850ms", "1.2s", "12s", "5m12s", "3h05m", "2d03h". Negative
// spans get a leading '-'.
std::string format_span_ms(int64_t ms);

}  // namespace keywatch::cli
