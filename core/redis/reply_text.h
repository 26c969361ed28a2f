// A hiredis reply as text: reply_to_string() for messages and logs (arrays as "[a, b]") and
// reply_lines() for test and tool set-up (array elements one per line). Bulk, status and
// error replies give their bytes, integers their decimal, nil "(nil)". Header-only (embedded/
// and the test fixture use it without linking core). Thread-safe: pure functions.
#pragma once

#include <hiredis/hiredis.h>

#include <string>

namespace keywatch {
namespace reply_text_detail {

// Appends r's text to out; an array's elements go between open and close, sep apart.
inline void append(std::string &out, const redisReply *r, const char *open, const char *sep,
                   const char *close) {
    if (!r) {
        out += "(no reply)";
        return;
    }
    switch (r->type) {
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
        case REDIS_REPLY_ERROR:
            out.append(r->str, r->len);
            return;
        case REDIS_REPLY_INTEGER:
            out += std::to_string(r->integer);
            return;
        case REDIS_REPLY_NIL:
            out += "(nil)";
            return;
        case REDIS_REPLY_ARRAY:
            out += open;
            for (size_t i = 0; i < r->elements; i++) {
                if (i) out += sep;
                append(out, r->element[i], open, sep, close);
            }
            out += close;
            return;
        default:
            out += "(unknown reply)";
    }
}

}  // namespace reply_text_detail

// "OK", "42", "(nil)", the error's text; arrays "[a, b]"; "(no reply)" for NULL.
inline std::string reply_to_string(const redisReply *r) {
    std::string out;
    reply_text_detail::append(out, r, "[", ", ", "]");
    return out;
}

// Like reply_to_string, but an array's elements one per line, without brackets.
inline std::string reply_lines(const redisReply *r) {
    std::string out;
    reply_text_detail::append(out, r, "", "\n", "");
    return out;
}

}  // namespace keywatch
