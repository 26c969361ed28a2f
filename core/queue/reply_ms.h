// A time in milliseconds read from a Redis reply: an integer reply, or text — plain digits
// (a deadline a script hands back as text) or a sorted-set score as the server prints it
// (Redis 7.0 prints "%.17g", plain digits for a deadline; later versions may print the
// shortest form, "1.7642016e+12"). One reader for every reply that carries a deadline or a
// score, so they all accept the same forms. Thread-safe: a pure function.
#pragma once

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdint>
#include <system_error>

namespace keywatch {

// True with *out set for an integer, or text that is all one decimal number within +-9.2e18
// (a fraction, never written by keywatch, is cut toward zero, as a score always was here);
// false, nothing written, for any other reply or text (blanks, hex, a trailing byte, inf).
// No locale and no detour through a double for plain digits.
inline bool reply_ms(const redisReply *r, int64_t *out) {
    if (!r) return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0) return false;
    const char *begin = r->str, *stop = r->str + r->len;
    int64_t v = 0;
    if (const auto [end, ec] = std::from_chars(begin, stop, v); ec == std::errc() && end == stop) {
        *out = v;
        return true;
    }
    double d = 0;
    const auto [end, ec] = std::from_chars(begin, stop, d, std::chars_format::general);
    if (ec != std::errc() || end != stop || !(d > -9.2e18 && d < 9.2e18)) return false;
    *out = static_cast<int64_t>(d);
    return true;
}

}  // namespace keywatch
