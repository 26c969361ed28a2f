// The words an option takes for true and false (true/false, yes/no, on/off, 1/0): one list
// for every option parser. Header-only, pure: thread-safe.
#pragma once

#include <string_view>

namespace keywatch {

// True, with *out set, if v is one of the words; false (nothing set) otherwise.
inline bool parse_bool_word(std::string_view v, bool *out) {
    if (v == "true" || v == "yes" || v == "on" || v == "1") {
        *out = true;
        return true;
    }
    if (v == "false" || v == "no" || v == "off" || v == "0") {
        *out = false;
        return true;
    }
    return false;
}

}  // namespace keywatch
