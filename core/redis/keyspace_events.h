// The keyspace events Redis publishes: each name as its source passes it to
// notifyKeyspaceEvent (Redis 7.0, plus 7.4's hash-field expiry), the notify-keyspace-events
// flag it needs and what it means; and the flag arithmetic on that table. The one list of
// event names: the engine's flags, the filters' "*", `keywatch watch/check --events` and the
// daemon's config all read it. Pure data and functions: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>
#include <vector>

namespace keywatch {

struct EventSpec {
    std::string_view name;     // as published on __keyevent@<db>__:<name>
    char flag;                 // the notify-keyspace-events letter it needs besides 'E'
    std::string_view meaning;  // what Redis did, for messages and docs
    std::string_view since;    // "" (Redis 7.0) or the version that added it ("7.4")
    bool in_star;              // one of the events a filter's "*" means
};

// Every event, in the table's order (the order of flags, subscriptions and ACL rules).
const std::vector<EventSpec> &event_table();
// The event of that name; null for a name Redis does not publish.
const EventSpec *find_event(std::string_view name);
// The table's names, in its order (for "did you mean").
const std::vector<std::string> &event_names();
// What a filter's "*" means: the events marked in_star, in table order.
std::vector<std::string> star_events();
// "E" plus the flag of each known event, each once, in table order; the names the table
// lacks (a newer server's events) go to *unknown (when not null), in the order given.
std::string notify_flags_for(const std::vector<std::string> &events,
                             std::vector<std::string> *unknown);
// The letters in `need` that `have` lacks ('A' counts as g$lshzxetd).
std::string missing_notify_flags(const std::string &have, const std::string &need);
// The flags in a reply to CONFIG GET notify-keyspace-events (["notify-keyspace-events",
// "<flags>"]). False for any other shape (an error, a server that hides the option).
bool notify_flags_from_reply(const redisReply *r, std::string *flags);

}  // namespace keywatch
