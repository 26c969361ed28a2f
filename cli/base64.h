// Standard base64 (RFC 4648 section 4: alphabet A-Z a-z 0-9 + /, '=' padding, no line
// breaks). Pure function: thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace keywatch::cli {

std::string base64_encode(std::string_view bytes);

}  // namespace keywatch::cli
