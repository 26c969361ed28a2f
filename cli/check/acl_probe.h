// The permission part of `keywatch check`: whether the ACL user of the URL may send every
// command keywatch sends, probed as that user without side effects (ACL DRYRUN would need
// admin rights). Writes are queued inside MULTI and thrown away with DISCARD: Redis checks
// the ACL when it queues a command, so each answers QUEUED when allowed and -NOPERM when
// not, and none runs. Reads and EVALSHA of a script no server has (-NOSCRIPT when allowed)
// are sent as they are. The subscriptions are tried on a connection of their own that is
// closed at once. The rule that grants it all is the plan's (Plan::acl_rule).
// Not thread-safe: one caller at a time per probe.
#pragma once

#include <string>
#include <vector>

#include "cli/check/check_report.h"
#include "core/engine/plan.h"
#include "core/redis/url.h"

namespace keywatch::cli {

// What keywatch will do against the deployment, which decides what it needs.
struct AclNeeds {
    Plan plan;               // the engine's plan for it (core/engine/plan.h)
    std::string sample_key;  // a tracked key to check read access on; empty: an arbitrary
                             // key outside the namespace
};

// Probes `url` (one node; in a cluster `tag` is a hash tag this node serves) and adds one
// line per group of commands to *report: heartbeat and subscriptions, queue scripts, the
// scripts' own commands on keywatch's keys, reads of tracked keys, alone claims (PUBSUB,
// a warning only), cluster discovery, dedupe. timeout_ms bounds each connection and reply.
void probe_acl(const RedisUrl &url, const std::string &tag, const AclNeeds &needs,
               int64_t timeout_ms, CheckReport *report);

}  // namespace keywatch::cli
