#include "cli/redact_url.h"

#include <algorithm>

namespace keywatch::cli {

std::string redact_url(const std::string &url) {
    // scheme://[user[:password]@]rest. The password may hold '/' or ':', so take the
    // last '@' and the first ':' after the scheme. Worst case (a socket path holding both
    // ':' and '@') hides part of a path in a message, never shows a password.
    const size_t scheme = url.find("://");
    if (scheme == std::string::npos) return url;
    const size_t auth_start = scheme + 3;
    const size_t at = url.rfind('@');
    if (at == std::string::npos || at < auth_start) return url;
    const size_t colon = url.find(':', auth_start);
    if (colon == std::string::npos || colon > at) return url;  // a user, no password
    return url.substr(0, colon + 1) + "***" + url.substr(at);
}

std::vector<std::string> url_list(const std::string &text) {
    std::vector<std::string> out;
    for (size_t start = 0, end; start <= text.size(); start = end + 1) {
        end = std::min(text.find(',', start), text.size());
        out.push_back(text.substr(start, end - start));
    }
    return out;
}

std::string redact_url_list(const std::string &text) {
    std::string out;
    for (const std::string &url : url_list(text)) out += (out.empty() ? "" : ",") + redact_url(url);
    return out;
}

}  // namespace keywatch::cli
