// Fuzz target: keyspace notification channels (parse_channel), binary safe.
// Properties: an accepted channel's remainder is every byte after "__:" (a suffix of the
// input, never cut at a NUL or ':'); the channel rebuilt with its db parses to the same
// parts; the PSUBSCRIBE pattern for a keyevent name ends with that name's bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/redis/channel.h"
#include "fuzz/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    keywatch::ParsedChannel parsed;
    if (!keywatch::parse_channel(text, &parsed)) return 0;
    KW_FUZZ_CHECK(parsed.db >= 0, "db is not negative");
    KW_FUZZ_CHECK(parsed.rest.data() + parsed.rest.size() == text.data() + text.size(),
                  "the remainder runs to the end of the channel");
    const bool keyevent = parsed.kind == keywatch::ChannelKind::Keyevent;
    const std::string rebuilt = std::string(keyevent ? "__keyevent@" : "__keyspace@") +
                                std::to_string(parsed.db) + "__:" + std::string(parsed.rest);
    keywatch::ParsedChannel again;
    KW_FUZZ_CHECK(keywatch::parse_channel(rebuilt, &again), "the rebuilt channel parses");
    KW_FUZZ_CHECK(again.kind == parsed.kind && again.db == parsed.db && again.rest == parsed.rest,
                  "to the same parts");
    if (keyevent) {
        const std::string pattern = keywatch::keyevent_pattern(parsed.rest);
        KW_FUZZ_CHECK(pattern.size() >= parsed.rest.size() &&
                          pattern.compare(pattern.size() - parsed.rest.size(), parsed.rest.size(),
                                          parsed.rest) == 0,
                      "the pattern ends with the event's bytes");
    }
    return 0;
}
