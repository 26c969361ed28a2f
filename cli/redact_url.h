// Redis URLs in messages: the password, if any, replaced by "***". Pure function:
// thread-safe.
#pragma once

#include <string>
#include <vector>

namespace keywatch::cli {

// The URL with its password (if any) replaced by "***", for messages.
std::string redact_url(const std::string &url);

// The URLs of a redis.url list ("url1,url2,..."), each as written.
std::vector<std::string> url_list(const std::string &text);

// The list with each URL's password (if any) replaced by "***".
std::string redact_url_list(const std::string &text);

}  // namespace keywatch::cli
