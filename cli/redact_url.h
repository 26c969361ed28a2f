// Redis URLs in messages: the password, if any, replaced by "***". Pure function:
// thread-safe.
#pragma once

#include <string>

namespace keywatch::cli {

// The URL with its password (if any) replaced by "***", for messages.
std::string redact_url(const std::string &url);

}  // namespace keywatch::cli
