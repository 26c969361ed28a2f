// One event as one line of JSON, the format of `keywatch watch` and `keywatch demo`.
// Byte strings (key, value) become a JSON string when they are valid UTF-8 and a base64
// field ("key_b64", "value_b64") otherwise, so every key and value round-trips.
// Pure: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keywatch_types.h"

namespace keywatch::cli {

// The fields of a delivered event, as plain data (views stay valid for the call only).
struct EventRecord {
    std::string_view event;  // "expired", "del", ...
    std::string_view key;    // raw bytes, may hold NUL
    bool has_value = false;  // a value snapshot was kept
    std::string_view value;  // raw bytes when has_value
    int db = 0;
    int64_t ts_ms = 0;        // when keywatch received it (ms since the epoch)
    std::string_view source;  // "notification", "sweep", "lease_expired", "task"
    std::string_view queue;   // "keys", a task queue, or empty for untracked live events
    std::string_view id;      // stable event id
    std::string_view node;    // "host:port" or a socket path
    int attempt = 1;
    int64_t deadline_ms = 0;  // 0: unknown
};

// {"event":..,"key":..|"key_b64":..,["value":..|"value_b64":..,]"db":..,"ts_ms":..,
// ["deadline_ms":..,]"attempt":..,"source":..,["queue":..,]"id":..,"node":..}: value only
// when a snapshot or payload exists, deadline_ms only when known, queue only when there is
// one. Ends with '\n'.
std::string json_line(const EventRecord &record);
// The same fields as an ordered JSON object (json_line is its dump plus '\n'); the plugin
// host hands them to plugins one by one.
nlohmann::ordered_json json_object(const EventRecord &record);

// "notification", "sweep", "lease_expired", "task".
const char *source_name(kw_source source);

}  // namespace keywatch::cli
