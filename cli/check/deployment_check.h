// `keywatch check`'s inspection of a Redis deployment: connects to the seed, finds out
// whether it is a cluster (and then checks its state and slot coverage), runs the
// per-server checks (server_checks.h) and the ACL probes (acl_probe.h) on the server or on
// every master, and compares the masters' clocks. Changes nothing on any server.
// Not thread-safe: one caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/check/acl_probe.h"
#include "cli/check/adopt_checks.h"
#include "cli/check/check_report.h"
#include "core/redis/url.h"

namespace keywatch::cli {

struct DeploymentCheck {
    std::vector<RedisUrl> seeds;  // redis.url (with redis.user/password and tls.* applied)
    std::string mode = "auto";    // redis.mode
    int64_t timeout_ms = 5000;    // redis.connect_timeout: per connection and per reply
    PlanConfig config;            // what the engine's plan reads of the configuration
    Demand demand;                // what its handlers ask for (plan_demand)
    std::string sample_key;       // --key: a tracked key (acl_probe.h)
    AdoptCheck adopt;             // adopt rules and the catch-up scan (adopt_checks.h)
};

// Largest clock difference between masters that passes.
inline constexpr int64_t kMaxClockSkewMs = 1000;

// Runs every check and sets report->mode and report->acl_rule. report->target must be set
// by the caller.
void check_deployment(DeploymentCheck check, CheckReport *report);

}  // namespace keywatch::cli
