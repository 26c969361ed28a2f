// `keywatch check`'s lines for adopt rules (adopt.rules, catchup.*): what each rule takes
// and the events it is adopted from, and per master the catch-up scan it implies (DBSIZE,
// how long at catchup.rate), with the warning for a rule that matches every key. The flags
// and ACL permissions adoption needs are in the plan, checked with everything else.
// Not thread-safe: one caller per connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/check/check_report.h"
#include "core/queue/adopt_rules.h"

namespace keywatch {
class BlockingRedis;
}

namespace keywatch::cli {

struct AdoptCheck {
    std::vector<AdoptRule> rules;  // adopt.rules, parsed by the library
    std::string ns = "kw";         // namespace
    bool catchup = true;           // catchup.enable
    int64_t rate = 250000;         // catchup.rate
};

// One "adopt rule N" line per rule (nothing without rules).
void describe_adopt_rules(const AdoptCheck &adopt, CheckReport *report);
// The "adopt: catch-up" line of master `node` (connected as c), from its DBSIZE (nothing
// without rules).
void check_catchup(BlockingRedis &c, const std::string &node, const AdoptCheck &adopt, int db,
                   int64_t timeout_ms, CheckReport *report);

}  // namespace keywatch::cli
