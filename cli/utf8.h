// Strict UTF-8 validation (RFC 3629 / Unicode Table 3-7): no overlong forms, no UTF-16
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequences. NUL is
// valid (U+0000). Also printable bytes for messages. Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace keywatch::cli {

// True when every byte of text belongs to a well-formed UTF-8 sequence.
bool is_valid_utf8(std::string_view text);

// Bytes for a message to a person: printable ASCII as is, anything else (and a backslash)
// \xHH, so that a binary key never garbles a terminal.
std::string printable(std::string_view bytes);

}  // namespace keywatch::cli
