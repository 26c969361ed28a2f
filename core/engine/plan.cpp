#include "core/engine/plan.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/redis/channel.h"
#include "core/redis/keyspace_events.h"
#include "core/sweeper/sweeper.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

// A tracked key deleted or renamed outside keywatch must leave the queue, or the sweeper
// would find it gone and report it expired.
constexpr const char *kTrackingEvents[] = {"del", "rename_from"};

// The keyevents the handlers take: those of handlers without a queue or of the
// key-tracking queue (a handler of tracked keys only still needs the live expiries), and
// what tracking needs. Table order, then the names the table lacks.
void plan_events(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers, Demand *d) {
    std::set<std::string, std::less<>> all;
    for (const HandlerNeeds &h : handlers) {
        if (h.has_queue && h.queue != kKeysQueue) continue;
        all.insert(h.events.begin(), h.events.end());
    }
    all.erase("task");  // not a Redis event
    // What the handlers take: the rest is subscribed for keywatch's own use.
    const std::set<std::string, std::less<>> wanted = all;
    if (d->track_keys) all.insert(std::begin(kTrackingEvents), std::end(kTrackingEvents));
    if (!c.adopt_rules.empty()) {
        // The adoption column of the event table: what can set, move or remove a TTL.
        bool snapshot = AdoptRules(c.adopt_rules, c.ns).any_snapshot();
        for (const std::string &e : adopt_events(snapshot)) all.insert(e);
    }
    for (const EventSpec &e : event_table()) {
        if (!all.count(e.name)) continue;
        d->events.emplace_back(e.name);
        if (!wanted.count(e.name)) d->bookkeeping_events.emplace_back(e.name);
    }
    for (const std::string &e : all)
        if (!find_event(e)) d->unknown_events.push_back(e);
    d->events.insert(d->events.end(), d->unknown_events.begin(), d->unknown_events.end());
}

// Every command the engine sends, as an ACL rule names it, in the rule's order.
std::vector<std::string> plan_commands(const Plan &p) {
    // multi and discard: only for keywatch check, which probes writes inside a MULTI that
    // it discards; they give no access to data.
    std::vector<std::string> cmds = {"publish",     "subscribe",  "psubscribe", "eval",   "evalsha",
                                     "script|load", "config|get", "multi",      "discard"};
    if (p.deployment.db != 0) cmds.push_back("select");
    if (p.deployment.discovery || p.deployment.cluster)
        cmds.insert(cmds.end(), {"cluster|shards", "cluster|slots"});
    // ASKING: a command routed by key (plugins' commands) during a slot migration.
    if (p.deployment.cluster) cmds.push_back("asking");
    cmds.push_back("scan");
    for (std::string c : scripts::commands()) {
        std::transform(c.begin(), c.end(), c.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        cmds.push_back(c);
    }
    if (p.demand.dedupe) cmds.push_back("set");
    // Claims that may be alone look for engines of the earlier version (v1_engines.h).
    if (p.demand.track_keys && p.config.alone_claims) cmds.push_back("pubsub|channels");
    // The catch-up scan of adopt rules reads the keyspace's size for its progress.
    if (!p.config.adopt_rules.empty()) cmds.push_back("dbsize");
    std::vector<std::string> out;
    for (auto &c : cmds)
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    return out;
}

// A handler whose queue is a task queue gets only that queue's items, which are "task"
// events: without "task" among its events nothing reaches it (unless an adopt rule fills
// the queue with keys, whose items are their expiries). False + *err for such a handler.
bool queue_handlers_can_receive(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers,
                                std::string *err) {
    for (const HandlerNeeds &h : handlers) {
        if (!h.has_queue || h.queue == kKeysQueue || h.events.count("task")) continue;
        if (std::any_of(c.adopt_rules.begin(), c.adopt_rules.end(),
                        [&](const AdoptRule &r) { return r.queue == h.queue; }))
            continue;
        *err = (h.label.empty() ? std::string("a handler") : h.label) + " names queue \"" +
               h.queue +
               "\" but takes no \"task\" events, so nothing would reach it (a task queue's "
               "items are \"task\" events): add \"task\" to its events, or "
               "drop its queue to take live Redis events";
        return false;
    }
    return true;
}

}  // namespace

HandlerNeeds HandlerNeeds::of(const Filter &f, std::string label) {
    HandlerNeeds h;
    h.label = std::move(label);
    h.events = f.events;
    h.has_queue = f.has_queue;
    h.queue = f.queue;
    h.wants_keys = f.wants_queue(kKeysQueue, true);
    return h;
}

std::vector<std::string> Demand::queues() const {
    std::vector<std::string> out;
    if (track_keys) out.push_back(kKeysQueue);
    out.insert(out.end(), adopt_queues.begin(), adopt_queues.end());
    out.insert(out.end(), task_queues.begin(), task_queues.end());
    return out;
}

int plan_demand(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers, Demand *out,
                std::string *err) {
    if (!queue_handlers_can_receive(c, handlers, err)) return KW_ERR_STATE;
    Demand d;
    d.dedupe = c.dedupe;
    std::set<std::string> tasks;
    bool any_queue_tasks = false;
    for (const HandlerNeeds &h : handlers) {
        if (c.track_enable && h.wants_keys) d.track_keys = true;
        if (!h.events.count("task")) continue;
        if (h.has_queue && h.queue != kKeysQueue)
            tasks.insert(h.queue);
        else if (!h.has_queue)
            any_queue_tasks = true;
    }
    if (any_queue_tasks) {
        if (c.queues.empty()) {
            *err =
                "a handler takes \"task\" events of any queue, but no queue is named: set "
                "the filter's queue, or list the queues in the `queues` option";
            return KW_ERR_STATE;
        }
        tasks.insert(c.queues.begin(), c.queues.end());
    }
    d.task_queues.assign(tasks.begin(), tasks.end());
    if (c.track_enable)
        for (const AdoptRule &r : c.adopt_rules) {
            if (r.queue == kKeysQueue)
                d.track_keys = true;
            else if (std::find(d.adopt_queues.begin(), d.adopt_queues.end(), r.queue) ==
                     d.adopt_queues.end())
                d.adopt_queues.push_back(r.queue);
        }
    plan_events(c, handlers, &d);
    if (d.events.empty() && !d.sweeps()) {
        *err =
            "the handlers ask for nothing keywatch can deliver: register a handler for "
            "Redis events, tracked keys or a task queue";
        return KW_ERR_STATE;
    }
    *out = std::move(d);
    return KW_OK;
}

int make_plan(const PlanConfig &c, const Demand &demand, const Deployment &d, Plan *out,
              std::string *err) {
    Plan p;
    p.config = c;
    p.demand = demand;
    p.deployment = d;
    const bool sweeps = demand.sweeps();
    p.notify_flags = notify_flags_for(demand.events, nullptr);
    for (const std::string &e : demand.events) {
        // An event subscribed only for the queues' bookkeeping is about tracked keys, which
        // live in the tracked db alone: other databases' traffic of it never reaches the
        // engine.
        const auto &own = demand.bookkeeping_events;
        const bool bookkeeping = std::find(own.begin(), own.end(), e) != own.end();
        p.keyevent_patterns.push_back(keyevent_pattern(e, bookkeeping ? d.db : -1));
    }
    if (d.cluster && sweeps) {
        // Each master's sweeper hears of new items in its slot queues from keyspace
        // notifications on their due keys.
        p.keyspace_patterns.push_back(keyspace_pattern(0, queue_key_glob(c.ns, "*", "due")));
        std::vector<std::string> arrivals(std::begin(kArrivalEvents), std::end(kArrivalEvents));
        for (char f : "K" + notify_flags_for(arrivals, nullptr).substr(1))
            if (p.notify_flags.find(f) == std::string::npos) p.notify_flags += f;
    }
    if (sweeps && !d.cluster) {
        // In a cluster the queue keys live in every slot, each on its master: the check
        // then covers the commands only.
        for (const std::string &q : demand.queues())
            for (auto &k : QueueKeys::make(c.ns, q, kStandaloneTag).keys())
                p.script_keys.push_back(k);
    }
    p.commands = plan_commands(p);
    p.channel_rules = channel_acl_rules(p.keyevent_patterns, p.keyspace_patterns);
    p.acl_rule = "on >PASSWORD -@all";
    for (const std::string &cmd : p.commands) p.acl_rule += " +" + cmd;
    p.acl_rule += " ~" + c.ns + ":* %R~* resetchannels " + p.channel_rules;
    *out = std::move(p);
    if (d.cluster && sweeps && d.db != 0) {
        *err = "a Redis Cluster has only database 0: remove the /db from redis.url";
        return KW_ERR_URL;
    }
    return KW_OK;
}

}  // namespace keywatch
