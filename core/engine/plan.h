// The engine's plan: from the configuration and what its handlers take, what it needs from
// Redis - the events and channel patterns it subscribes to, the notify-keyspace-events
// flags, the queues it serves and their keys, the commands it sends and the ACL rule that
// grants all of it. The one place these are worked out: kw_engine_start and
// kw_engine_check wire a Subscriber and Sweepers from it, and `keywatch check` probes and
// advises from it. Two phases, because whether the deployment is a cluster is known only
// after probing it, and what needs no server must be refused before any connection.
// Pure functions: thread-safe.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/engine/filter.h"
#include "core/queue/adopt_rules.h"

namespace keywatch {

// One handler's filter, as the plan sees it.
struct HandlerNeeds {
    std::set<std::string, std::less<>> events;  // "task" included
    bool has_queue = false;
    std::string queue;
    bool wants_keys = false;  // it takes the key-tracking queue's items (expired)
    std::string label;        // how a message names it ("handler 2 (mail)"); "" for "a handler"
    static HandlerNeeds of(const Filter &f, std::string label = "");
};

// The configuration the plan reads.
struct PlanConfig {
    std::string ns = "kw";
    bool track_enable = true;
    bool dedupe = false;
    bool alone_claims = true;            // queue.done_mode=auto (the engine asks PUBSUB CHANNELS)
    std::vector<std::string> queues;     // the `queues` option
    std::vector<AdoptRule> adopt_rules;  // the `adopt.rules` option
};                                       // from a Config: plan_config() (config_slices.h)

// Phase 1, needing no server: what the handlers ask for.
struct Demand {
    bool track_keys = false;               // serve the key-tracking queue
    bool dedupe = false;                   // claim live events with dedupe keys
    std::vector<std::string> task_queues;  // sorted
    // Keyevents to subscribe to: the table's in its order (with del and rename_from while
    // tracking), then the names it lacks, sorted.
    std::vector<std::string> events;
    std::vector<std::string> unknown_events;  // those of events the table lacks
    // The adopt rules' queues other than "keys", in rule order, each once.
    std::vector<std::string> adopt_queues;
    // Events subscribed only for the queues' bookkeeping: tracking's del and rename_from,
    // adoption's events, when no handler takes them. About tracked keys alone: subscribed
    // in the tracked db alone, and never dispatched. In the order of `events`.
    std::vector<std::string> bookkeeping_events;
    // The engine runs sweepers (queues, dedupe or adoption).
    bool sweeps() const {
        return track_keys || !task_queues.empty() || dedupe || !adopt_queues.empty();
    }
    // The queues served: "keys" (when tracking), the adopt queues, then the task queues.
    std::vector<std::string> queues() const;
};
// KW_ERR_STATE (*err says why) when a handler takes the tasks of any queue and `queues`
// names none, when a handler names a queue that can bring it nothing (a task queue, but
// no "task" among its events, and no adopt rule's queue), or when the handlers ask for
// nothing keywatch can deliver.
int plan_demand(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers, Demand *out,
                std::string *err);

// What probing the deployment found.
struct Deployment {
    bool cluster = false;
    bool discovery = true;  // the topology is probed (probes_topology)
    int db = 0;             // the URL's database
};

// Phase 2: everything, once the deployment is known.
struct Plan {
    PlanConfig config;
    Demand demand;
    Deployment deployment;
    // "E" plus the flags of the events (table order); in a cluster that sweeps also 'K' and
    // those of the sweepers' arrival events.
    std::string notify_flags;
    // One per event: every db's, but the tracked db's alone for the bookkeeping events.
    std::vector<std::string> keyevent_patterns;
    std::vector<std::string> keyspace_patterns;  // a cluster that sweeps: its due keys
    // Standalone and sweeping: the keys of the queues served (the scripts' ACL check).
    std::vector<std::string> script_keys;
    std::vector<std::string> commands;  // every command sent, as an ACL rule names it
    std::string channel_rules;          // "&<pattern> ..." (after resetchannels)
    // After "ACL SETUSER <user> ": "on >PASSWORD -@all +<commands> ~<ns>:* %R~*
    // resetchannels <channel_rules>".
    std::string acl_rule;
    // It subscribes to anything (so needs notify-keyspace-events at all).
    bool listens() const { return !keyevent_patterns.empty() || !keyspace_patterns.empty(); }
};
// The plan is filled in either way; KW_ERR_URL (*err says why) for a cluster that sweeps
// with a db other than 0 (a cluster has only db 0).
int make_plan(const PlanConfig &c, const Demand &demand, const Deployment &d, Plan *out,
              std::string *err);

}  // namespace keywatch
