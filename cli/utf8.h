// Byte strings for people: the library's strict UTF-8 check and base64 (core/format/text.h), and
// printable bytes for messages. Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/format/text.h"

namespace keywatch::cli {

using keywatch::base64_encode;
using keywatch::is_valid_utf8;

// Bytes for a message to a person: printable ASCII as is, anything else (and a backslash)
// \xHH, so that a binary key never garbles a terminal.
std::string printable(std::string_view bytes);

}  // namespace keywatch::cli
