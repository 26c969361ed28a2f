// The event handed to handlers. kw_event_t in the C API is this very struct, so the C
// accessors are plain field reads. Not thread-safe: one worker owns an event at a time.
#pragma once

#include <cstdint>
#include <string>

#include "keywatch.h"

struct kw_event_s {
    std::string name;   // "expired", "del", ...
    std::string key;    // bytes
    std::string value;  // bytes, when has_value
    bool has_value = false;
    int db = 0;
    int64_t ts_ms = 0;        // received (local clock)
    int64_t deadline_ms = 0;  // 0: unknown
    int attempt = 1;
    kw_source source = KW_SOURCE_NOTIFICATION;
    const std::string *node = nullptr;  // endpoint, owned by the engine
    std::string queue;                  // "" for untracked live events
    mutable std::string id;             // built on first request
    mutable std::string error;          // kw_event_set_error, for retries and dead letters
    int slot = -1;                      // cluster: the key's slot once computed (-1: not yet)

    bool tracked() const { return !queue.empty(); }
};

namespace keywatch {

using Event = kw_event_s;

// The stable id of an event: "n:<db>:<event>:<hex of key>" for untracked notifications,
// "q:<queue>:<deadline>:<hex of item id>" for queue items (the deadline is kept from the
// first claim, so every redelivery of an item carries the same id).
const std::string &event_id(const Event &ev);

}  // namespace keywatch
