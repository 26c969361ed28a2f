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

// What an event about a key that matches an adopt rule (on the tracked db) makes the engine
// do. Every such event is only a hint: the `adopt` script reads the key's TTL and decides.
enum class AdoptUse {
    None,      // not an adoption event (a TTL only removed: the claim checks at the deadline)
    Adopt,     // the TTL may have been set, moved or removed: run `adopt`
    Forget,    // the key left: today's `forget` (ZREM only if the key is really gone)
    Claim,     // delivery: today's `claim_live`
    Snapshot,  // the value changed, the TTL kept: run `adopt` only when a rule snapshots
};

struct EventSpec {
    std::string_view name;            // as published on __keyevent@<db>__:<name>
    char flag;                        // the notify-keyspace-events letter it needs besides 'E'
    std::string_view meaning;         // what Redis did, for messages and docs
    std::string_view since;           // "" (Redis 7.0) or the version that added it ("7.4")
    bool in_star;                     // one of the events a filter's "*" means
    AdoptUse adopt = AdoptUse::None;  // what it means for a key an adopt rule matches
};

// Every event, in the table's order (the order of flags, subscriptions and ACL rules).
const std::vector<EventSpec> &event_table();
// The event of that name; null for a name Redis does not publish.
const EventSpec *find_event(std::string_view name);
// The table's names, in its order (for "did you mean").
const std::vector<std::string> &event_names();
// What a filter's "*" means: the events marked in_star, in table order.
std::vector<std::string> star_events();
// The events adoption subscribes to (Adopt, Forget and Claim; Snapshot too when a rule
// snapshots), in table order.
std::vector<std::string> adopt_events(bool snapshot);
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
