// The permission part of `keywatch check`: whether the ACL user of the URL may send every
// command keywatch sends, probed as that user without side effects (ACL DRYRUN would need
// admin rights). Writes are queued inside MULTI and thrown away with DISCARD: Redis checks
// the ACL when it queues a command, so each answers QUEUED when allowed and -NOPERM when
// not, and none runs. Reads and EVALSHA of a script no server has (-NOSCRIPT when allowed)
// are sent as they are. The subscriptions are tried on a connection of their own that is
// closed at once. Also builds the ACL SETUSER rule that grants exactly what is probed.
// Not thread-safe: one caller at a time per probe.
#pragma once

#include <string>
#include <vector>

#include "cli/check/check_report.h"
#include "core/queue/queue_keys.h"
#include "core/redis/channel.h"
#include "core/redis/url.h"

namespace keywatch::cli {

// What keywatch will do against the deployment, which decides what it needs.
struct AclNeeds {
    std::string ns = "kw";              // namespace of keywatch's keys
    std::vector<std::string> queues;    // queues served: "keys" (tracking) and task queues
    std::vector<std::string> events;    // keyevent names subscribed to
    std::vector<std::string> keyspace;  // keyspace patterns subscribed to (cluster)
    bool discovery = true;              // the topology probe (redis.mode auto or cluster):
                                        // CLUSTER SHARDS / SLOTS
    bool cluster = false;               // a cluster: the slot scan too
    bool dedupe = false;                // dedupe claim keys (SET NX PX)
    int db = 0;                         // a db other than 0 needs SELECT
    std::string sample_key;             // a tracked key to check read access on; empty:
                                        // an arbitrary key outside the namespace

    // The engine runs sweepers (queues or dedupe): in a cluster they also listen to the
    // keyspace notifications of their due keys (core/engine/engine.cpp).
    bool sweeps() const { return !queues.empty() || dedupe; }
    // That keyspace pattern, for namespace ns.
    std::string due_keyspace_pattern() const {
        return keyspace_pattern(0, queue_key_glob(ns, "*", "due"));
    }
};

// The rule (after "ACL SETUSER <user> ") that grants what keywatch needs, for the docs and
// the fixes: commands, channels, keywatch's keys and read access to the tracked keys.
std::string acl_rule(const AclNeeds &needs);

// Probes `url` (one node; in a cluster `tag` is a hash tag this node serves) and adds one
// line per group of commands to *report: heartbeat and subscriptions, queue scripts, the
// scripts' own commands on keywatch's keys, reads of tracked keys, cluster discovery,
// dedupe. timeout_ms bounds each connection and reply.
void probe_acl(const RedisUrl &url, const std::string &tag, const AclNeeds &needs,
               int64_t timeout_ms, CheckReport *report);

}  // namespace keywatch::cli
