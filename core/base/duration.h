// Durations as people write them: "500ms", "30s", "5m", "1h", "2d", or a plain number of
// milliseconds. Pure function: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace keywatch {

// Parses text into milliseconds. On failure returns false and, if err is not null, sets a
// message naming the bad text and the accepted forms. Negative values are refused.
inline bool parse_duration_ms(std::string_view text, int64_t *ms, std::string *err = nullptr) {
    auto fail = [&] {
        if (err)
            *err = "'" + std::string(text) +
                   "' is not a duration: use a whole number with a unit, e.g. 500ms, 30s, 5m, "
                   "1h, 2d (a plain number means milliseconds)";
        return false;
    };
    size_t i = 0;
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (n > (INT64_MAX - 9) / 10) return fail();
        n = n * 10 + (text[i] - '0');
        i++;
    }
    if (i == 0) return fail();
    std::string_view unit = text.substr(i);
    int64_t mult;
    if (unit.empty() || unit == "ms")
        mult = 1;
    else if (unit == "s")
        mult = 1000;
    else if (unit == "m")
        mult = 60 * 1000;
    else if (unit == "h")
        mult = 3600 * 1000;
    else if (unit == "d")
        mult = 24 * 3600 * 1000;
    else
        return fail();
    if (n > INT64_MAX / mult) return fail();
    *ms = n * mult;
    return true;
}

}  // namespace keywatch
