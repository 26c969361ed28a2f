// Byte strings in JSON output (the event's line, the CLI's objects): a JSON string under
// `name` when the bytes are valid UTF-8, else base64 under `name`_b64, so that every key,
// value and id round-trips.
// Pure: thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace keywatch {

void put_bytes(nlohmann::ordered_json &j, const std::string &name, std::string_view bytes);

}  // namespace keywatch
