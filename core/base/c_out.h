// Text handed across a C boundary: an error copied into the caller's buffer, and a string
// copied into memory the caller releases with free() (kw_free). Used by the C API and by
// the host functions given to plugins.
// Thread-safety: pure functions.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace keywatch {

// Copies msg into buf (size bytes), truncated and always NUL-terminated; nothing when buf is
// NULL or size is 0.
inline void write_err(char *buf, size_t size, std::string_view msg) {
    if (!buf || size == 0) return;
    size_t n = size - 1 < msg.size() ? size - 1 : msg.size();
    if (n) memcpy(buf, msg.data(), n);
    buf[n] = '\0';
}

// A NUL-terminated malloc'd copy of s, or NULL when out of memory.
inline char *malloc_copy(std::string_view s) {
    char *out = static_cast<char *>(malloc(s.size() + 1));
    if (!out) return nullptr;
    if (!s.empty()) memcpy(out, s.data(), s.size());
    out[s.size()] = '\0';
    return out;
}

}  // namespace keywatch
