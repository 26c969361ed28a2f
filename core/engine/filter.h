// Handler filters: which events (by name), which keys (prefix, Redis-style glob), which db.
// A Filter is immutable once the engine starts; matches() is thread-safe.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "core/base/glob.h"

namespace keywatch {

struct Filter {
    std::set<std::string, std::less<>> events{
        "expired"};  // empty set never happens; "*" = all default
    bool all_events = false;
    bool has_prefix = false;
    std::string prefix;
    bool has_glob = false;
    std::string glob;
    int db = -1;  // -1: any
    bool has_queue = false;
    std::string queue;  // "keys" or a task queue; live untracked events have none

    bool matches(std::string_view event, int event_db, std::string_view key,
                 std::string_view item_queue = {}) const;
    // The filter can match queue q's items ("task" events for task queues, "expired" for
    // the key-tracking queue).
    bool wants_queue(const std::string &q, bool is_keys) const;
    // Sets a field by name ("events", "db", "prefix", "glob", "queue"); false + *err on
    // bad input.
    bool set(std::string_view name, std::string_view value, bool binary, std::string *err);
};

}  // namespace keywatch
