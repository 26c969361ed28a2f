// The event's one JSON format: the line `keywatch watch` prints, what kw_event_json returns
// and what a plugin's host->event_json gives. Byte strings (key, value) become a JSON string
// when they are valid UTF-8 and a base64 field ("key_b64", "value_b64") otherwise, so every
// key and value round-trips. Pure: thread-safe (an Event is read, never written).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "keywatch_types.h"

namespace keywatch {

struct Event;  // core/base/event.h

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

// The one mapping from an Event to its record; views into ev (and its id, built here).
EventRecord event_record(const Event &ev);

// {"event":..,"key":..|"key_b64":..,["value":..|"value_b64":..,]"db":..,"ts_ms":..,
// ["deadline_ms":..,]"attempt":..,"source":..,["queue":..,]"id":..,"node":..}: value only
// when a snapshot or payload exists, deadline_ms only when known, queue only when there is
// one.
nlohmann::ordered_json event_object(const EventRecord &record);
// The same fields, in the same order, as name and text: strings as they are, numbers in
// decimal (what the object's values dump to). The plugin host hands these to plugins one
// by one; built without a JSON object.
std::vector<std::pair<std::string, std::string>> event_fields(const EventRecord &record);
// The object's line, without a newline: bytes that are not UTF-8 in a field that cannot
// take base64 (event, source, queue, id, node, e.g. a socket path) are replaced, never
// thrown on.
std::string event_json(const nlohmann::ordered_json &object);
std::string event_json(const EventRecord &record);
std::string event_json(const Event &ev);

// "notification", "sweep", "lease_expired", "task"; "unknown" for any other value.
const char *source_name(kw_source source);

}  // namespace keywatch
