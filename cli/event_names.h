// The --events option: a comma-separated list of event names Redis publishes, checked
// against the event table (core/redis/keyspace_events.h) so that a typo is an error, not a
// silent watch on a channel that never fires. Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace keywatch::cli {

// Parses "expired, del,set" or "*" into the canonical text for kw_filter_set("events").
// Spaces around names are ignored and duplicates dropped; allow_task also takes "task"
// (the items of task queues). On failure returns false and sets *err to a message naming
// the bad entry (with the closest known name, if any).
bool parse_event_list(std::string_view text, bool allow_task, std::string *canonical,
                      std::string *err);

}  // namespace keywatch::cli
