// Byte strings in JSON output (the event's line, the C API's and the CLI's objects): a JSON
// string under `name` when the bytes are valid UTF-8, else base64 under `name`_b64, so that
// every key, value and id round-trips. For nlohmann::json and nlohmann::ordered_json alike.
// Pure: thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/format/text.h"

namespace keywatch {

template <typename Json>
void put_bytes(Json &j, const std::string &name, std::string_view bytes) {
    if (is_valid_utf8(bytes))
        j[name] = std::string(bytes);
    else
        j[name + "_b64"] = base64_encode(bytes);
}

}  // namespace keywatch
