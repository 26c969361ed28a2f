// Text helpers for JSON output of byte strings: strict UTF-8 validation (RFC 3629 /
// Unicode Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF, NUL is
// valid) and standard base64 (RFC 4648 section 4, '=' padding). Pure: thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace keywatch {

// True when every byte of text belongs to a well-formed UTF-8 sequence.
bool is_valid_utf8(std::string_view text);

std::string base64_encode(std::string_view bytes);

}  // namespace keywatch
