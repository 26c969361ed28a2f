// The event handed to handlers (keywatch::Event). The C API's kw_event_t is this very
// object behind an opaque pointer (capi/), so the C accessors are plain field reads. Not
// thread-safe: one worker owns an event at a time; a held event is copied into its Hold
// (core/engine/hold.h), which makes that copy readable from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "keywatch_types.h"

namespace keywatch {

class Delivery;  // core/engine/hold.h: the handler calls of one event, set while they run

struct Event {
    std::string name;   // "expired", "del", ...
    std::string key;    // bytes
    std::string value;  // bytes, when has_value
    bool has_value = false;
    int db = 0;
    int64_t ts_ms = 0;        // received (local clock); for claimed items, when claimed
    int64_t deadline_ms = 0;  // 0: unknown
    int attempt = 1;
    int max_attempts = 1;  // tracked items: the queue's max_attempts (set on delivery)
    kw_source source = KW_SOURCE_NOTIFICATION;
    const std::string *node = nullptr;  // endpoint, owned by the engine
    std::string queue;                  // "" for untracked live events
    mutable std::string id;             // built on first request
    std::string error;                  // kw_event_set_error, for retries and dead letters
    std::string last_error;             // the previous attempt's error ("" if none)
    int slot = -1;                      // cluster: the key's slot once computed (-1: not yet)
    Delivery *delivery = nullptr;       // while handlers run (Engine::handle): for hold()

    bool tracked() const { return !queue.empty(); }
};

// The stable id of an event: "n:<db>:<event>:<hex of key>" for untracked notifications,
// "q:<queue>:<deadline>:<hex of item id>" for queue items (the deadline is kept from the
// first claim, so every redelivery of an item carries the same id).
const std::string &event_id(const Event &ev);

}  // namespace keywatch
