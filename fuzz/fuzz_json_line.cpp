// Fuzz target: the event's JSON line (core/format/json_line.h: what `keywatch watch` prints,
// kw_event_json returns and plugins get), with the strict UTF-8 check and base64 behind it.
// Properties: every line is one line of valid JSON; the key and value read back from it
// ("key" as text, or "key_b64" decoded) are the input's bytes; a byte string goes out as
// text exactly when it is valid UTF-8 (checked against nlohmann's own UTF-8 validation); an
// event name reads back when it is UTF-8.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/format/json_line.h"
#include "core/format/text.h"
#include "fuzz/check.h"

namespace {

std::string base64_decode(const std::string &in) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    KW_FUZZ_CHECK(in.size() % 4 == 0, "base64 comes in groups of four");
    std::string out;
    for (size_t i = 0; i < in.size(); i += 4) {
        uint32_t n = 0;
        int pad = 0;
        for (size_t j = 0; j < 4; j++) {
            const char c = in[i + j];
            if (c == '=') {
                pad++;
                n <<= 6;
                continue;
            }
            KW_FUZZ_CHECK(pad == 0 && value(c) >= 0, "only the alphabet, '=' only at the end");
            n = (n << 6) | static_cast<uint32_t>(value(c));
        }
        KW_FUZZ_CHECK(pad <= 2 && (pad == 0 || i + 4 == in.size()), "padding only at the end");
        out += static_cast<char>(n >> 16);
        if (pad < 2) out += static_cast<char>(n >> 8 & 0xFF);
        if (pad < 1) out += static_cast<char>(n & 0xFF);
    }
    return out;
}

std::string read_bytes(const nlohmann::json &j, const std::string &name) {
    const bool text = j.contains(name), b64 = j.contains(name + "_b64");
    KW_FUZZ_CHECK(text != b64, "a byte string comes as text or as base64, not both");
    return text ? j[name].get<std::string>() : base64_decode(j[name + "_b64"].get<std::string>());
}

bool nlohmann_accepts(const std::string &s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::type_error &) {
        return false;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    const std::string key = in.ConsumeRandomLengthString(4096);
    const std::string value = in.ConsumeRandomLengthString(4096);
    const std::string event = in.ConsumeRandomLengthString(64);
    keywatch::EventRecord rec;
    rec.key = key;
    rec.value = value;
    rec.event = event;
    rec.has_value = in.ConsumeBool();
    rec.db = in.ConsumeIntegral<int>();
    rec.ts_ms = in.ConsumeIntegral<int64_t>();
    rec.deadline_ms = in.ConsumeIntegral<int64_t>();
    rec.attempt = in.ConsumeIntegral<int>();
    rec.source = "sweep";
    rec.queue = in.ConsumeBool() ? "keys" : "";
    rec.id = "q:keys:1:00";
    rec.node = "127.0.0.1:6379";

    KW_FUZZ_CHECK(keywatch::is_valid_utf8(key) == nlohmann_accepts(key),
                  "our UTF-8 check agrees with nlohmann's");
    const std::string line = keywatch::event_json(rec);
    KW_FUZZ_CHECK(!line.empty() && line.find('\n') == std::string::npos, "one line, no newline");
    const auto j = nlohmann::json::parse(line);  // throws (and so crashes) on invalid JSON
    KW_FUZZ_CHECK(read_bytes(j, "key") == key, "the key's bytes read back");
    KW_FUZZ_CHECK(j.contains("key") == keywatch::is_valid_utf8(key), "text iff UTF-8");
    if (rec.has_value)
        KW_FUZZ_CHECK(read_bytes(j, "value") == value, "the value's bytes read back");
    else
        KW_FUZZ_CHECK(!j.contains("value") && !j.contains("value_b64"), "no value, no field");
    // Event names are text; bytes that are not UTF-8 are replaced (U+FFFD), never thrown on.
    if (keywatch::is_valid_utf8(event))
        KW_FUZZ_CHECK(j["event"].get<std::string>() == event, "the event name reads back");
    KW_FUZZ_CHECK(j["db"].get<int>() == rec.db && j["attempt"].get<int>() == rec.attempt,
                  "numbers read back");
    return 0;
}
