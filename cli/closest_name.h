// "Did you mean ...?": the known name closest to a mistyped one (Levenshtein distance), for
// messages about unknown event names and configuration keys. Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace keywatch::cli {

// The entry of known nearest to name, if it is a near miss (at most 2 edits and fewer edits
// than name has characters); else, with abbreviations, the shortest entry that a name of 4
// or more characters abbreviates (its characters in order: "zrembyscore" ->
// "zremrangebyscore"); "" otherwise.
std::string closest_name(std::string_view name, const std::vector<std::string> &known,
                         bool abbreviations = false);

}  // namespace keywatch::cli
