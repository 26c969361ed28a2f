#include "cli/check/adopt_checks.h"

#include <cstdio>

#include "core/redis/blocking_redis.h"
#include "core/redis/keyspace_events.h"
#include "core/sweeper/adopt_scan.h"

namespace keywatch::cli {
namespace {

std::string joined(const std::vector<std::string> &names) {
    std::string out;
    for (const std::string &n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

// "about 4.1 s" for n keys at rate keys/s.
std::string scan_time(int64_t n, int64_t rate) {
    char buf[48];
    const double s = static_cast<double>(n) / static_cast<double>(rate);
    snprintf(buf, sizeof buf, s < 10 ? "about %.1f s" : "about %.0f s", s);
    return buf;
}

}  // namespace

void describe_adopt_rules(const AdoptCheck &adopt, CheckReport *report) {
    bool snapshot = false;
    for (size_t i = 0; i < adopt.rules.size(); i++) {
        const AdoptRule &r = adopt.rules[i];
        snapshot = snapshot || r.snapshot;
        report->add("adopt rule " + std::to_string(i + 1), "", Verdict::Ok,
                    r.describe() + " -> queue " + r.queue +
                        (r.snapshot ? ", with a snapshot of string values" : ""));
    }
    if (adopt.rules.empty()) return;
    report->add("adopt: events", "", Verdict::Ok,
                "the rules' keys are followed through the events " +
                    joined(adopt_events(snapshot)) +
                    " of the tracked db (the notifications line checks the flags)");
}

void check_catchup(BlockingRedis &c, const std::string &node, const AdoptCheck &adopt, int db,
                   int64_t timeout_ms, CheckReport *report) {
    if (adopt.rules.empty()) return;
    if (!adopt.catchup) {
        report->add("adopt: catch-up", node, Verdict::Warn,
                    "catchup.enable=false: keys whose TTL was set while no engine listened are "
                    "not found",
                    "leave catchup.enable at true unless every key is written while an engine "
                    "runs");
        return;
    }
    ReplyPtr r = c.command({"DBSIZE"}, timeout_ms);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        const std::string why =
            r && r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : c.error();
        report->add("adopt: catch-up", node, Verdict::Warn, "cannot read DBSIZE: " + why,
                    "ACL SETUSER <user> +dbsize (the catch-up scan reads it for its progress)");
        return;
    }
    const int64_t keys = r->integer;
    AdoptRules rules(adopt.rules, adopt.ns);
    const int every = rules.scans_everything();
    if (every >= 0) {
        report->add("adopt: catch-up", node, Verdict::Warn,
                    every_key_warning(adopt.rules[static_cast<size_t>(every)],
                                      static_cast<size_t>(every), db, node, keys, adopt.rate),
                    "give the rule a prefix, or a glob with a literal start (\"cache:*\"), if "
                    "only some keys are meant");
        return;
    }
    const size_t passes = rules.scan_matches().size();
    const std::string how =
        passes == 1 ? "in one pass with MATCH"
                    : "in " + std::to_string(passes) + " passes, one MATCH per rule, each";
    report->add("adopt: catch-up", node, Verdict::Ok,
                "the catch-up scan reads the " + std::to_string(keys) + " keys of db " +
                    std::to_string(db) + " " + how + " " + scan_time(keys, adopt.rate) +
                    " at catchup.rate=" + std::to_string(adopt.rate) +
                    "/s, at start and after a reconnect or failover");
}

}  // namespace keywatch::cli
