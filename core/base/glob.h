// Redis-style glob patterns on bytes (* ? [abc] [^a-z] \x), as SCAN MATCH, PSUBSCRIBE and
// KEYS read them: matching, escaping a literal, and the literal bytes a pattern starts with.
// Used by handler filters, adopt rules and the scans that narrow by MATCH. Pure: thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace keywatch {

// Redis-style glob match on bytes, binary safe.
bool glob_match(std::string_view pattern, std::string_view subject);
// The pattern that matches exactly `literal`: each of * ? [ ] \ behind a backslash.
std::string glob_escape(std::string_view literal);
// The bytes every subject the pattern matches starts with: the pattern up to its first
// unescaped * ? or [, with its backslash escapes resolved ("sess\*:*" gives "sess*:").
std::string literal_prefix(std::string_view pattern);
// True if the pattern has an unescaped * ? or [ (else it matches one subject only).
bool has_wildcard(std::string_view pattern);

}  // namespace keywatch
