#include "cli/check/deployment_check.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "cli/client_session.h"
#include "cli/check/server_checks.h"
#include "core/redis/blocking_redis.h"
#include "core/redis/endpoint.h"
#include "core/queue/queue_keys.h"
#include "core/redis/sentinel.h"
#include "core/redis/slots.h"
#include "core/redis/topology.h"
#include "keywatch.h"

namespace keywatch::cli {
namespace {

std::string user_of(const RedisUrl &url) {
    return url.user.empty() ? "default" : url.user;
}

// The engine's plan for the deployment found (core/engine/plan.h), and what the probes
// need besides. False (a failed line added) when the engine would refuse it.
bool plan_for(const DeploymentCheck &check, const Deployment &d, const std::string &node,
              AclNeeds *needs, CheckReport *report) {
    std::string err;
    needs->sample_key = check.sample_key;
    if (make_plan(check.config, check.demand, d, &needs->plan, &err) == KW_OK) return true;
    report->add("connection", node, Verdict::Fail, cli_words(err));
    return false;
}

void check_cluster_state(const RedisUrl &seed, const Topology &t, int64_t timeout_ms,
                         CheckReport *report) {
    BlockingRedis c(seed, "check", false);
    ReplyPtr r =
        c.connect(timeout_ms) == KW_OK ? c.command({"CLUSTER", "INFO"}, timeout_ms) : nullptr;
    std::string state = "unknown";
    if (r && r->type == REDIS_REPLY_STRING) {
        const std::string info(r->str, r->len), mark = "cluster_state:";
        const size_t at = info.find(mark);
        if (at != std::string::npos)
            state = info.substr(at + mark.size(), info.find('\r', at) - at - mark.size());
    }
    if (state == "ok")
        report->add("cluster state", seed.endpoint(), Verdict::Ok, "cluster_state:ok");
    else
        report->add("cluster state", seed.endpoint(), Verdict::Fail,
                    "cluster_state:" + state + ": the cluster refuses key commands",
                    "see CLUSTER INFO and CLUSTER NODES; fail over or replace the failed masters");
    const size_t uncovered = t.uncovered();
    if (uncovered == 0) {
        report->add("cluster coverage", "", Verdict::Ok,
                    "all 16384 slots served by " + std::to_string(t.masters.size()) + " masters");
        return;
    }
    std::string down;
    for (auto &d : t.down) down += " " + d.master.endpoint();
    report->add(
        "cluster coverage", "", Verdict::Fail,
        std::to_string(uncovered) + " of 16384 slots have no master" +
            (down.empty() ? "" : " (failed:" + down + ")") +
            ": keys and keywatch's queues in them cannot be reached",
        "assign the slots or fail the shards over: redis-cli --cluster fix " + seed.endpoint());
}

// A hash tag in a slot that master `index` serves, so its probes stay on it.
std::string tag_for_master(const Topology &t, int index) {
    for (int slot = 0; slot < kSlotCount; slot++)
        if (t.slot_owner[static_cast<size_t>(slot)] == index) return SlotTags::instance().tag(slot);
    return kStandaloneTag;
}

void check_clocks(const std::vector<std::pair<std::string, ServerFacts>> &clocks,
                  CheckReport *report) {
    std::vector<std::pair<std::string, ServerFacts>> read;
    for (auto &c : clocks)
        if (c.second.clock_read) read.push_back(c);
    if (read.empty()) {
        report->add("clock", "", Verdict::Warn, "cannot read TIME",
                    "ACL SETUSER <user> +time (keywatch's scripts call TIME)");
        return;
    }
    auto by_offset = [](auto &a, auto &b) {
        return a.second.clock_offset_ms < b.second.clock_offset_ms;
    };
    const auto [lo, hi] = std::minmax_element(read.begin(), read.end(), by_offset);
    const std::string host =
        "offset from this host " + std::to_string(read.front().second.clock_offset_ms) + " ms";
    if (read.size() == 1) {
        report->add("clock", "", Verdict::Ok,
                    "one server: keywatch takes every time from Redis's clock (TIME); " + host);
        return;
    }
    const int64_t skew = hi->second.clock_offset_ms - lo->second.clock_offset_ms;
    const std::string what = "skew between masters " + std::to_string(skew) + " ms (" + lo->first +
                             " behind " + hi->first + ")";
    if (skew <= kMaxClockSkewMs)
        report->add("clock", "", Verdict::Ok, what);
    else
        report->add("clock", "", Verdict::Warn,
                    what +
                        ": deadlines fire early or late by that much after a failover or "
                        "reshard moves a queue",
                    "synchronise the hosts' clocks (chrony or systemd-timesyncd)");
}

// Every replica: CLUSTER NODES on a cluster, the master's INFO replication
// (slaveN:ip=...,port=...) otherwise. Empty when refused.
std::vector<Endpoint> replicas(BlockingRedis &c, bool cluster, int64_t timeout_ms) {
    std::vector<Endpoint> out;
    // Both print an IPv6 host unbracketed ("::1:7001"): Endpoint's Redis form reads it.
    auto add = [&out](const std::string &host_port) {
        if (auto e = Endpoint::parse(host_port, Endpoint::Form::Redis)) out.push_back(*e);
    };
    ReplyPtr r = cluster ? c.command({"CLUSTER", "NODES"}, timeout_ms)
                         : c.command({"INFO", "replication"}, timeout_ms);
    if (!r || r->type != REDIS_REPLY_STRING) return out;
    std::istringstream text(std::string(r->str, r->len));
    for (std::string line; std::getline(text, line);) {
        if (cluster) {
            // <id> <host:port@cport[,hostname]> <flags> ...
            std::istringstream fields(line);
            std::string id, addr, flags;
            fields >> id >> addr >> flags;
            if (flags.find("slave") == std::string::npos || flags.find("fail") != std::string::npos)
                continue;
            add(addr.substr(0, addr.find('@')));
        } else if (line.rfind("slave", 0) == 0 && line.find(":ip=") != std::string::npos) {
            const size_t ip = line.find("ip=") + 3, port = line.find(",port=") + 6;
            add(line.substr(ip, line.find(',', ip) - ip) + ":" +
                line.substr(port, line.find(',', port) - port));
        }
    }
    return out;
}

void check_replicas(const RedisUrl &seed, bool cluster, const std::string &need, int64_t timeout_ms,
                    CheckReport *report) {
    if (need.empty()) return;
    BlockingRedis c(seed, "check", false);
    if (c.connect(timeout_ms) != KW_OK) return;  // the connection line says why
    for (const Endpoint &replica : replicas(c, cluster, timeout_ms)) {
        const std::string endpoint = replica.str();
        BlockingRedis r(seed.at(replica), "check", false);  // same credentials and TLS
        if (r.connect(timeout_ms) != KW_OK) {
            report->add("replica notifications", endpoint, Verdict::Warn,
                        "cannot connect: " + r.error(),
                        "check notify-keyspace-events on it yourself (it needs '" + need + "')");
            continue;
        }
        check_replica(r, need, timeout_ms, report);
    }
}

// The servers keywatch writes to, each with a hash tag in a slot it serves: the seed, or
// every master of the cluster (with the seed's credentials and TLS settings).
std::vector<std::pair<RedisUrl, std::string>> masters(const RedisUrl &seed, bool cluster,
                                                      const Topology &topo) {
    if (!cluster) return {{seed, kStandaloneTag}};
    std::vector<std::pair<RedisUrl, std::string>> out;
    for (size_t i = 0; i < topo.masters.size(); i++) {
        out.push_back({topo.url_of(seed, topo.masters[i].address()),
                       tag_for_master(topo, static_cast<int>(i))});
    }
    return out;
}

std::string connection_fix(int status) {
    switch (status) {
        case KW_ERR_AUTH:
            return "give the user and password keywatch will use: in the URL "
                   "(redis://user:password@host:port) or -c redis.user=... -c redis.password=...";
        case KW_ERR_TIMEOUT:
            return "is the server paused or overloaded? for a slow link raise -c "
                   "redis.connect_timeout=DURATION";
        case KW_ERR_URL:
        case KW_ERR_INVALID_ARG:
            return "fix --redis or -c redis.mode as the message says";
        default:
            return "start the server, or give the URL of a running one (--redis)";
    }
}

// Whether any seed answers a PING over a connection (its credentials and TLS settings):
// a server that refuses our certificate or speaks TLS to plain RESP says so only once
// something is sent. If none answers, one failed line per seed, each with the fix its cause
// calls for: refused, TLS on one side only, a certificate either side refused, a password.
bool seeds_connect(const DeploymentCheck &check, CheckReport *report) {
    std::vector<CheckLine> failed;
    for (const RedisUrl &seed : check.seeds) {
        BlockingRedis c(seed, "check", false);
        int rc = c.connect(check.timeout_ms);
        if (rc == KW_OK && c.command({"PING"}, check.timeout_ms)) return true;
        if (rc == KW_OK) rc = c.status();
        const RedisConn::Failure &f = c.failure();
        failed.push_back(
            {"connection", seed.endpoint(), Verdict::Fail,
             cli_words(f.what.empty() ? f.message : f.what) + " (" + kw_err_name(rc) + ")",
             f.fix.empty() ? connection_fix(rc) : cli_words(f.fix)});
    }
    report->lines.insert(report->lines.end(), failed.begin(), failed.end());
    return failed.empty();
}

// redis+sentinel://: a line per sentinel (what it names as the master), then the master
// they name becomes the one seed. False when no sentinel gave a working master.
bool check_sentinels(DeploymentCheck *check, CheckReport *report) {
    const RedisUrl url = check->seeds.front();
    for (size_t i = 0; i < url.sentinels.size(); i++) {
        Endpoint named;
        std::string why;
        const std::string at = url.sentinel_at(i).endpoint();
        if (int rc = ask_sentinel(url, i, check->timeout_ms, &named, &why); rc != KW_OK)
            report->add("sentinel", at, Verdict::Warn,
                        cli_words(why) + " (" + kw_err_name(rc) + ")",
                        "start it, or take it out of the URL (the other sentinels are asked); "
                        "its own credentials are -c sentinel.username=... -c "
                        "sentinel.password=...");
        else
            report->add("sentinel", at, Verdict::Ok,
                        "names " + named.str() + " as master '" + url.master_name + "'");
    }
    FoundMaster found;
    std::string err;
    if (int rc = find_master(url, check->timeout_ms, &found, &err); rc != KW_OK) {
        report->add("connection", "", Verdict::Fail, cli_words(err) + " (" + kw_err_name(rc) + ")",
                    "start the sentinels and the master, or check the master's name in --redis");
        return false;
    }
    check->seeds = {found.url};
    return true;
}

}  // namespace

void check_deployment(DeploymentCheck check, CheckReport *report) {
    const bool sentinel = !check.seeds.empty() && check.seeds.front().is_sentinel();
    if (sentinel && !check_sentinels(&check, report)) return;
    RedisUrl seed;
    bool cluster = false;
    Topology topo;
    std::string err;
    AclNeeds needs;
    Deployment d;
    d.discovery = !check.seeds.empty() && probes_topology(check.mode, check.seeds.front());
    d.db = check.seeds.empty() ? 0 : check.seeds.front().db;
    plan_for(check, d, "", &needs, report);
    report->acl_rule = needs.plan.acl_rule;  // until the deployment says it is a cluster
    if (!seeds_connect(check, report)) return;
    int rc =
        probe_seeds(check.seeds, check.timeout_ms, check.mode, &seed, &cluster, &topo, &err, false);
    if (rc != KW_OK && check.mode == "auto" && err.find("NOPERM") != std::string::npos) {
        // The user may not read the topology: the permission probes say so; the rest is
        // checked on the seed as a standalone server.
        rc = probe_seeds(check.seeds, check.timeout_ms, "standalone", &seed, &cluster, &topo, &err,
                         false);
    }
    if (rc != KW_OK) {
        report->add("connection", "", Verdict::Fail, cli_words(err) + " (" + kw_err_name(rc) + ")",
                    connection_fix(rc));
        return;
    }
    report->mode = cluster ? "cluster" : sentinel ? "sentinel" : "standalone";
    report->add("connection", seed.endpoint(), Verdict::Ok,
                "connected as user '" + user_of(seed) + "'");
    d.cluster = cluster;
    d.db = seed.db;
    const bool planned = plan_for(check, d, seed.endpoint(), &needs, report);
    report->acl_rule = needs.plan.acl_rule;
    if (!planned) return;
    if (cluster) check_cluster_state(seed, topo, check.timeout_ms, report);
    // "": no keyspace event is needed at all.
    const std::string need = needs.plan.listens() ? needs.plan.notify_flags : "";
    std::vector<std::pair<std::string, ServerFacts>> clocks;
    for (auto &[url, tag] : masters(seed, cluster, topo)) {
        BlockingRedis c(url, "check", !cluster);
        if (c.connect(check.timeout_ms) != KW_OK) {
            report->add("connection", url.endpoint(), Verdict::Fail, cli_words(c.error()),
                        "every master must be reachable from keywatch's hosts: bring it back, "
                        "or fail its shard over to a replica");
            continue;
        }
        clocks.push_back(
            {url.endpoint(), check_server(c, need, !cluster, check.timeout_ms, report)});
        check_catchup(c, url.endpoint(), check.adopt, d.db, check.timeout_ms, report);
        c.close();
        probe_acl(url, tag, needs, check.timeout_ms, report);
    }
    check_replicas(seed, cluster, need, check.timeout_ms, report);
    check_clocks(clocks, report);
}

}  // namespace keywatch::cli
