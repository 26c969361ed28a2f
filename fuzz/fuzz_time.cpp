// Fuzz target: durations ("500ms", "30s", ...; parse_duration_ms) and times (milliseconds
// or ISO-8601 UTC; the CLI's parse_time_ms), with the spans printed for people.
// Properties: a refusal says why; an accepted duration is not negative and reads back from
// its number of milliseconds; an accepted time is within 1970..9999 and its ISO form parses
// back to the same millisecond; formatting never fails for any number.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "cli/time_text.h"
#include "core/base/duration.h"
#include "fuzz/check.h"

namespace {

void check_duration(const std::string &text) {
    int64_t ms = -1;
    std::string err;
    if (!keywatch::parse_duration_ms(text, &ms, &err)) {
        KW_FUZZ_CHECK(!err.empty(), "a refused duration says why");
        return;
    }
    KW_FUZZ_CHECK(ms >= 0, "durations are not negative");
    int64_t again = -1;
    KW_FUZZ_CHECK(keywatch::parse_duration_ms(std::to_string(ms) + "ms", &again, &err),
                  "a duration's milliseconds parse");
    KW_FUZZ_CHECK(again == ms, "and give the same duration");
}

void check_time(const std::string &text) {
    int64_t ms = -1;
    std::string err;
    if (!keywatch::cli::parse_time_ms(text, &ms, &err)) {
        KW_FUZZ_CHECK(!err.empty(), "a refused time says why");
        return;
    }
    KW_FUZZ_CHECK(ms >= 0 && ms <= keywatch::cli::kMaxTimeMs, "a time is within 1970..9999");
    const std::string iso = keywatch::cli::format_utc_ms(ms);
    int64_t again = -1;
    KW_FUZZ_CHECK(keywatch::cli::parse_time_ms(iso, &again, &err), iso.c_str());
    KW_FUZZ_CHECK(again == ms, "the ISO form gives the same millisecond");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    check_duration(text);
    check_time(text);
    if (size >= sizeof(int64_t)) {
        int64_t any;
        std::memcpy(&any, data, sizeof any);
        KW_FUZZ_CHECK(!keywatch::cli::format_span_ms(any).empty(), "every span prints");
        KW_FUZZ_CHECK(!keywatch::cli::format_utc_ms(any).empty(), "every time prints");
    }
    return 0;
}
