// A time in whole milliseconds read from a Redis reply: an integer reply, or text — plain
// digits (a deadline a script hands back as text) or a sorted-set score as Redis prints it
// ("%.17g": plain digits for any deadline keywatch accepts, an exponent beyond). One reader
// for every reply that carries a deadline or a score, so they all accept the same forms.
// Thread-safe: a pure function.
#pragma once

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

namespace keywatch {

// True with *out set for an integer, digits or a whole-number score; false (nothing written)
// for any other reply, text with anything else in it, or a value beyond +-9.2e18.
inline bool reply_ms(const redisReply *r, int64_t *out) {
    if (!r) return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0) return false;
    const char *begin = r->str, *stop = r->str + r->len;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(begin, stop, v);
    if (ec == std::errc() && end == stop) {
        *out = v;  // exact: the common case, no detour through a double
        return true;
    }
    // A score in exponent form ("1e+17"). strtod would skip leading blanks and read text
    // up to an embedded NUL: only text that starts as a number and is all number passes.
    if (*begin != '-' && (*begin < '0' || *begin > '9')) return false;
    const std::string text(begin, stop);
    char *tail = nullptr;
    const double d = std::strtod(text.c_str(), &tail);
    if (tail != text.c_str() + text.size() || !(d > -9.2e18 && d < 9.2e18) ||
        d != static_cast<double>(static_cast<int64_t>(d)))
        return false;
    *out = static_cast<int64_t>(d);
    return true;
}

}  // namespace keywatch
