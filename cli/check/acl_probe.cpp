#include "cli/check/acl_probe.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "core/redis/blocking_redis.h"
#include "core/redis/channel.h"
#include "core/queue/queue_keys.h"
#include "core/redis/reply_error.h"
#include "core/queue/scripts.h"
#include "keywatch.h"

namespace keywatch::cli {
namespace {

// One command to try. `writes`: it must never run, so it is only sent inside MULTI.
struct Probe {
    std::string name;  // as an ACL rule names it: "zadd", "script|load"
    std::vector<std::string> args;
    bool writes = true;
    bool known = true;  // false: keywatch sends it, but no probe is known: never sent
};

enum class Answer { Allowed, Refused, Missing, Unprobed, Unclear };

struct Outcome {
    explicit Outcome(Probe p) : probe(std::move(p)) {}
    Probe probe;
    Answer answer = Answer::Unprobed;
    std::string words;  // the server's error, if any
};

// A script not in any cache: EVALSHA answers -NOSCRIPT once the ACL let it through.
constexpr const char *kUnknownSha = "0000000000000000000000000000000000000000";
// The channel keywatch's heartbeat would use (the ACL rule covers every one of them).
const std::string kHeartbeat = std::string(kHeartbeatChannelPrefix) + "keywatch-check";
// The line of the topology commands (kw_engine_start sends them unless redis.mode=standalone).
const std::string kDiscovery = "acl: cluster discovery";
const std::string kChannels = "acl: channels";
const std::string kTracked = "acl: tracked keys";
// PUBSUB NUMSUB (in claims) and CHANNELS (beside them): without them claims are shared,
// which is correct, only dearer, so a refusal is a warning.
const std::string kAlone = "acl: alone claims";

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// A probe of a script command with valid arguments on the queue's keys; an unknown
// command gets none (reported as not probed).
bool script_command_probe(const std::string &cmd, const QueueKeys &k, const std::string &ns,
                          Probe *out) {
    struct Shape {
        const char *cmd;
        char key;  // z: due zset, h: data hash, s: dead stream, k: any key, r: due twice
                   // (destination and source), c: the engines channel, 0: none
        std::vector<std::string> rest;
        bool writes;
    };
    static const std::vector<Shape> shapes = {
        {"DEL", 'k', {}, true},
        {"EXISTS", 'k', {}, false},
        {"GET", 'k', {}, false},
        {"HDEL", 'h', {"f"}, true},
        {"HEXISTS", 'h', {"f"}, false},
        {"HGET", 'h', {"f"}, false},
        {"HMGET", 'h', {"f"}, false},
        {"HSET", 'h', {"f", "v"}, true},
        {"HLEN", 'h', {}, false},
        {"HSETNX", 'h', {"f", "v"}, true},
        {"INCR", 'k', {}, true},
        {"PEXPIRETIME", 'k', {}, false},
        {"PUBSUB|NUMSUB", 'c', {}, false},
        {"SET", 'k', {"v"}, true},
        {"TIME", 0, {}, false},
        {"TYPE", 'k', {}, false},
        {"XADD", 's', {"*", "f", "v"}, true},
        {"XDEL", 's', {"0-1"}, true},
        {"XLEN", 's', {}, false},
        {"XRANGE", 's', {"-", "+"}, false},
        {"ZADD", 'z', {"0", "m"}, true},
        {"ZCARD", 'z', {}, false},
        {"ZCOUNT", 'z', {"0", "1"}, false},
        {"ZMSCORE", 'z', {"m"}, false},
        {"ZRANGE", 'z', {"0", "0"}, false},
        {"ZRANGEBYSCORE", 'z', {"0", "1"}, false},
        {"ZRANGESTORE", 'r', {"0", "0"}, true},
        {"ZREM", 'z', {"m"}, true},
        {"ZREMRANGEBYRANK", 'z', {"0", "0"}, true},
        {"ZREMRANGEBYSCORE", 'z', {"0", "1"}, true},
        {"ZSCORE", 'z', {"m"}, false},
    };
    for (const auto &s : shapes) {
        if (cmd != s.cmd) continue;
        *out = {lower(cmd), {cmd}, s.writes};
        if (const size_t bar = cmd.find('|'); bar != std::string::npos)
            out->args = {cmd.substr(0, bar), cmd.substr(bar + 1)};  // PUBSUB NUMSUB
        if (s.key == 'c') out->args.push_back(engines_channel(ns));
        if (s.key == 'h') out->args.push_back(k.data);
        if (s.key == 's') out->args.push_back(k.dead);
        if (s.key == 'z' || s.key == 'k' || s.key == 'r') out->args.push_back(k.due);
        if (s.key == 'r') out->args.push_back(k.due);
        out->args.insert(out->args.end(), s.rest.begin(), s.rest.end());
        return true;
    }
    return false;
}

Answer read_answer(const redisReply *r, bool queued, std::string *words) {
    if (r->type != REDIS_REPLY_ERROR)
        return !queued || (r->type == REDIS_REPLY_STATUS && std::string(r->str) == "QUEUED")
                   ? Answer::Allowed
                   : Answer::Unclear;
    *words = std::string(r->str, r->len);
    if (classify(r) == ReplyError::NoPerm) return Answer::Refused;
    if (words->rfind("ERR unknown command", 0) == 0 ||
        words->rfind("ERR unknown subcommand", 0) == 0)
        return Answer::Missing;
    // NOSCRIPT, MOVED, ASK, CROSSSLOT, a type error: the ACL let the command through.
    if (words->find("wrong number of arguments") != std::string::npos ||
        words->find("syntax error") != std::string::npos)
        return Answer::Unclear;
    return Answer::Allowed;
}

// Sends every probe on one connection: inside MULTI (then DISCARD) when the user may use
// it, else only those that do not write.
void run_probes(BlockingRedis &c, int64_t timeout_ms, std::vector<Outcome> *outcomes,
                bool *in_multi) {
    ReplyPtr multi = c.command({"MULTI"}, timeout_ms);
    *in_multi = multi && multi->type == REDIS_REPLY_STATUS && std::string(multi->str) == "OK";
    if (*in_multi) {
        // Writes go out only once the server is seen queueing: a TIME that runs (an array)
        // would mean there is no transaction, and then no write is sent at all.
        ReplyPtr time = c.command({"TIME"}, timeout_ms);
        *in_multi = time && time->type != REDIS_REPLY_ARRAY;
    }
    for (auto &o : *outcomes) {
        if (!o.probe.known || (!*in_multi && o.probe.writes)) continue;
        ReplyPtr r = c.command(o.probe.args, timeout_ms);
        if (!r) return;
        o.answer = read_answer(r.get(), *in_multi, &o.words);
    }
    if (*in_multi) c.command({"DISCARD"}, timeout_ms);
}

// PSUBSCRIBE each pattern (SUBSCRIBE one that names one channel, as the engine does) and
// SUBSCRIBE the heartbeat channel, one at a time (one reply each), on a connection of their
// own that is then closed.
std::vector<Outcome> probe_subscriptions(const RedisUrl &url, const AclNeeds &needs,
                                         int64_t timeout_ms, std::string *err) {
    std::vector<Outcome> out;
    std::vector<std::string> patterns = needs.plan.keyevent_patterns;
    patterns.insert(patterns.end(), needs.plan.keyspace_patterns.begin(),
                    needs.plan.keyspace_patterns.end());
    for (auto &p : patterns) {
        const bool one = names_one_channel(p);
        out.emplace_back(
            Probe{one ? "subscribe" : "psubscribe", {one ? "SUBSCRIBE" : "PSUBSCRIBE", p}, false});
    }
    out.emplace_back(Probe{"subscribe", {"SUBSCRIBE", kHeartbeat}, false});
    BlockingRedis c(url, "check", false);
    if (c.connect(timeout_ms) != KW_OK) {
        *err = c.error();
        return out;
    }
    for (auto &o : out) {
        ReplyPtr r = c.command(o.probe.args, timeout_ms);
        if (!r) break;
        o.answer = read_answer(r.get(), false, &o.words);
    }
    c.close();
    return out;
}

std::string joined(const std::vector<std::string> &items, const char *sep = ", ") {
    std::string out;
    for (auto &i : items) out += (out.empty() ? "" : sep) + i;
    return out;
}

// What to grant for a refusal, from the server's words: the command, a key or a channel.
// Redis 7.0 says "...to run the 'x' command" / "...one of the channels (keys) used as
// arguments"; 7.2 and later "...to access a channel" / "...a key".
std::string grant_for(const Outcome &o, const AclNeeds &needs, bool tracked_key) {
    if (o.words.find("to run the") != std::string::npos) return "+" + o.probe.name;
    if (o.words.find("channel") != std::string::npos) return "&" + o.probe.args.back();
    if (o.words.find("key") != std::string::npos)
        return tracked_key ? "%R~<your tracked keys>" : "~" + needs.plan.config.ns + ":*";
    return "+" + o.probe.name;
}

// The probes of one report line.
struct Group {
    std::string check;  // "acl: channels", ...
    std::vector<Outcome> outcomes;
};

// What a group's answers add up to.
struct Tally {
    std::vector<std::string> refused, missing, unprobed, unclear, grants;
    std::set<std::string> names;  // every command of the group
    std::string words;            // the server's words for the first refusal
    bool multi_refused = false;   // writes were left out: the user may not use MULTI
};

Tally tally(const Group &g, const AclNeeds &needs) {
    Tally t;
    const bool tracked_key = g.check == kTracked;
    for (auto &o : g.outcomes) {
        t.names.insert(o.probe.name);
        const std::string what = joined(o.probe.args, " ");
        if (o.answer == Answer::Refused) {
            t.refused.push_back(what);
            if (t.words.empty()) t.words = o.words;
            const std::string grant = grant_for(o, needs, tracked_key);
            if (std::find(t.grants.begin(), t.grants.end(), grant) == t.grants.end())
                t.grants.push_back(grant);
        }
        if (o.answer == Answer::Missing) t.missing.push_back(o.probe.name);
        if (o.answer == Answer::Unprobed) {
            t.unprobed.push_back(o.probe.name + (o.probe.known ? "" : " (no probe known)"));
            t.multi_refused = t.multi_refused || o.probe.known;
        }
        if (o.answer == Answer::Unclear) t.unclear.push_back(what + " (" + o.words + ")");
    }
    return t;
}

// One report line for a group of probes.
void report_group(const Group &g, const std::string &node, const std::string &user,
                  const AclNeeds &needs, CheckReport *report) {
    const Tally t = tally(g, needs);
    if (!t.refused.empty() && g.check == kAlone) {
        report->add(g.check, node, Verdict::Warn,
                    "user '" + user + "' may not run " + joined(t.refused, "; ") + " (" + t.words +
                        "): every claim of tracked keys keeps in-flight entries and done "
                        "records, as if another engine listened (correct, only dearer)",
                    "ACL SETUSER " + user + " " + joined(t.grants, " "));
    } else if (!t.refused.empty() && g.check == kTracked && needs.sample_key.empty()) {
        // An arbitrary key outside the namespace: the user may well read the tracked ones.
        report->add(g.check, node, Verdict::Warn,
                    "user '" + user + "' may not read a key outside keywatch's namespace (" +
                        joined(t.refused, "; ") + "): it needs read access to the keys you track",
                    "give --key with one of your tracked keys to check it, or grant "
                    "%R~<your tracked keys>");
    } else if (!t.refused.empty()) {
        std::string fix = "ACL SETUSER " + user + " " + joined(t.grants, " ");
        if (g.check == kDiscovery && !needs.plan.deployment.cluster)
            fix += " (or, as this is no cluster, run keywatch with redis.mode=standalone)";
        report->add(
            g.check, node, Verdict::Fail,
            "user '" + user + "' may not run " + joined(t.refused, "; ") + " (" + t.words + ")",
            fix);
    } else if (!t.missing.empty()) {
        report->add(g.check, node, Verdict::Fail,
                    "the server does not know " + joined(t.missing) + " (renamed or disabled)",
                    "keywatch sends these commands under their own names: undo the "
                    "rename-command for them in redis.conf");
    } else if (!t.unclear.empty() || !t.unprobed.empty()) {
        std::string detail = t.unclear.empty() ? "" : "unclear answers: " + joined(t.unclear);
        if (!t.unprobed.empty())
            detail += std::string(detail.empty() ? "" : "; ") + "not probed" +
                      (t.multi_refused ? " (writes are probed inside MULTI, which the user "
                                         "may not use)"
                                       : "") +
                      ": " + joined(t.unprobed);
        report->add(g.check, node, Verdict::Warn, detail,
                    t.multi_refused
                        ? "ACL SETUSER " + user +
                              " +multi +discard, so that keywatch check can probe the writes "
                              "inside a MULTI it discards (keywatch itself never sends them)"
                        : "make sure the user may run them: " + needs.plan.acl_rule);
    } else {
        report->add(g.check, node, Verdict::Ok,
                    "user '" + user + "' may run " + joined({t.names.begin(), t.names.end()}));
    }
}

Group group_of(std::string check, std::vector<Probe> probes) {
    Group g{std::move(check), {}};
    for (auto &p : probes) g.outcomes.emplace_back(std::move(p));
    return g;
}

// The queue scripts and the commands they run, on the keys of every queue served (PUBSUB
// in `alone`, once).
void plan_queue_probes(const std::string &tag, const AclNeeds &needs, std::vector<Probe> *scripts,
                       std::vector<Probe> *inner, std::vector<Probe> *alone) {
    const std::vector<std::string> names = scripts::commands();
    for (auto &q : needs.plan.demand.queues()) {
        const QueueKeys k = QueueKeys::make(needs.plan.config.ns, q, tag);
        const std::vector<std::string> keys = k.keys();
        Probe evalsha{"evalsha", {"EVALSHA", kUnknownSha, "5"}, false};
        Probe eval{"eval", {"EVAL", "return 0", "5"}, true};
        for (Probe *p : {&evalsha, &eval}) {
            p->args.insert(p->args.end(), keys.begin(), keys.end());
            scripts->push_back(*p);
        }
        for (auto &n : names) {
            Probe p;
            if (!script_command_probe(n, k, needs.plan.config.ns, &p))
                p = {lower(n), {n}, true, false};
            if (p.name.rfind("pubsub|", 0) != 0)
                inner->push_back(std::move(p));
            else if (std::none_of(alone->begin(), alone->end(),
                                  [&](const Probe &a) { return a.name == p.name; }))
                alone->push_back(std::move(p));
        }
    }
    scripts->push_back({"script|load", {"SCRIPT", "LOAD", "return 0"}, true});
}

// Every group sent on the command connection, in report order.
std::vector<Group> plan_groups(const std::string &tag, const AclNeeds &needs) {
    std::vector<Probe> scripts, inner, alone, discovery, dedupe;
    plan_queue_probes(tag, needs, &scripts, &inner, &alone);
    if (needs.plan.demand.track_keys && needs.plan.config.alone_claims)
        alone.push_back({"pubsub|channels", {"PUBSUB", "CHANNELS", kV1HeartbeatGlob}, false});
    const std::string key =
        needs.sample_key.empty() ? "keywatch-check:{" + tag + "}:probe" : needs.sample_key;
    const Deployment &d = needs.plan.deployment;
    if (d.discovery || d.cluster)
        discovery = {{"cluster|shards", {"CLUSTER", "SHARDS"}, false},
                     {"cluster|slots", {"CLUSTER", "SLOTS"}, false}};
    if (needs.plan.demand.dedupe)
        dedupe = {{"set",
                   {"SET", dedupe_key(needs.plan.config.ns, tag, 0, "expired", "keywatch-check"),
                    "1", "NX", "PX", "60000"},
                   true}};
    std::vector<Group> groups = {
        group_of(kChannels, {{"publish", {"PUBLISH", kHeartbeat, "0"}, true}}),
        group_of("acl: queue scripts", std::move(scripts)),
        group_of("acl: script commands", std::move(inner)),
        group_of(kTracked, {{"exists", {"EXISTS", key}, false},
                            {"pexpiretime", {"PEXPIRETIME", key}, false}}),
    };
    // The queue gauges of the daemon's /metrics and keywatch inspect find the queues by
    // SCAN (kw_client_inspect_json), and so do a cluster's sweepers.
    groups.push_back(
        group_of("acl: queue discovery",
                 {{"scan",
                   {"SCAN", "0", "MATCH", queue_key_glob(needs.plan.config.ns, "*", "due"), "COUNT",
                    "1", "TYPE", "zset"},
                   false}}));
    if (!alone.empty()) groups.push_back(group_of(kAlone, std::move(alone)));
    if (!discovery.empty()) groups.push_back(group_of(kDiscovery, std::move(discovery)));
    if (!dedupe.empty()) groups.push_back(group_of("acl: dedupe", std::move(dedupe)));
    return groups;
}

// Sends every group's probes on one connection (one MULTI) and puts the answers back.
bool run_groups(const RedisUrl &url, const AclNeeds &needs, int64_t timeout_ms,
                std::vector<Group> *groups, std::string *err) {
    BlockingRedis c(url, "check", needs.plan.deployment.db != 0);
    if (c.connect(timeout_ms) != KW_OK) {
        *err = c.error();
        return false;
    }
    std::vector<Outcome> all;
    for (auto &g : *groups) all.insert(all.end(), g.outcomes.begin(), g.outcomes.end());
    bool in_multi = false;
    run_probes(c, timeout_ms, &all, &in_multi);
    c.close();
    size_t at = 0;
    for (auto &g : *groups)
        for (auto &o : g.outcomes) o = all[at++];
    return true;
}

}  // namespace

void probe_acl(const RedisUrl &url, const std::string &tag, const AclNeeds &needs,
               int64_t timeout_ms, CheckReport *report) {
    const std::string node = url.endpoint();
    const std::string user = url.user.empty() ? "default" : url.user;
    std::string err;
    std::vector<Group> groups = plan_groups(tag, needs);
    if (!run_groups(url, needs, timeout_ms, &groups, &err)) {
        report->add("acl", node, Verdict::Fail, "cannot connect to probe: " + err,
                    "see the connection line");
        return;
    }
    std::vector<Outcome> subs = probe_subscriptions(url, needs, timeout_ms, &err);
    if (!err.empty())
        report->add(kChannels, node, Verdict::Fail,
                    "cannot connect to probe the subscriptions: " + err);
    groups[0].outcomes.insert(groups[0].outcomes.begin(), subs.begin(), subs.end());
    for (auto &g : groups) report_group(g, node, user, needs, report);
}

}  // namespace keywatch::cli
