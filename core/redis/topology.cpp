#include "core/redis/topology.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "core/base/backoff.h"
#include "core/redis/blocking_redis.h"
#include "core/redis/reply_error.h"
#include "core/redis/url.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

std::string str(const redisReply *r) {
    if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
        return std::string(r->str, r->len);
    if (r && r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return "";
}

long long num(const redisReply *r) {
    if (!r) return -1;
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return std::atoll(std::string(r->str, r->len).c_str());
    return -1;
}

// RESP2 delivers CLUSTER SHARDS' maps as flat [name, value, ...] arrays.
std::map<std::string, const redisReply *> flat_map(const redisReply *r) {
    std::map<std::string, const redisReply *> m;
    if (!r || r->type != REDIS_REPLY_ARRAY) return m;
    for (size_t i = 0; i + 1 < r->elements; i += 2) m[str(r->element[i])] = r->element[i + 1];
    return m;
}

// The index of the master, added if new; -1 with *err for a port no node can have (a
// corrupt or hostile reply must not send connections to port 0 or a truncated number).
int add_master(Topology *t, ClusterNode node, long long port, std::string *err) {
    if (port < 1 || port > 65535) {
        *err = "node " + node.host + " is listed with port " + std::to_string(port) +
               ", not a port from 1 to 65535";
        return -1;
    }
    node.port = static_cast<int>(port);
    int idx = t->find(node.endpoint());
    if (idx >= 0) return idx;
    if (t->masters.size() >= 16384) {
        *err = "more masters listed than there are slots";
        return -1;
    }
    t->masters.push_back(std::move(node));
    return static_cast<int>(t->masters.size() - 1);
}

// Keeps only masters that serve a slot (a shard listed without ranges, or whose ranges a
// later entry took over, serves nothing), renumbering the slot table.
void drop_idle_masters(Topology *t) {
    std::vector<int16_t> renumber(t->masters.size(), -1);
    for (int16_t o : t->slot_owner)
        if (o >= 0) renumber[static_cast<size_t>(o)] = 0;
    std::vector<ClusterNode> kept;
    for (size_t i = 0; i < t->masters.size(); i++) {
        if (renumber[i] < 0) continue;
        renumber[i] = static_cast<int16_t>(kept.size());
        kept.push_back(std::move(t->masters[i]));
    }
    for (int16_t &o : t->slot_owner)
        if (o >= 0) o = renumber[static_cast<size_t>(o)];
    t->masters = std::move(kept);
}

// The port a node of CLUSTER SHARDS is reached at: its `tls-port` when the seed is
// rediss:// (tls), its `port` otherwise. Redis lists `port` only for a plain port and
// `tls-port` only for a TLS one, and, under tls-cluster no, not the other nodes' TLS ports at
// all. -1 with *err naming the node and what to do when it has only the other kind.
long long node_port(std::map<std::string, const redisReply *> &node, const std::string &host,
                    bool tls, std::string *err) {
    const long long plain = node.count("port") ? num(node["port"]) : 0;
    const long long secure = node.count("tls-port") ? num(node["tls-port"]) : 0;
    const long long port = tls ? secure : plain;
    // A bad port (0 or below): add_master says why.
    if (port > 0 || (tls ? plain : secure) <= 0) return port > 0 ? port : 0;
    const std::string name = "cluster node " +
                             Endpoint{host, static_cast<int>(tls ? plain : secure), ""}.str() +
                             (str(node["id"]).empty() ? "" : " (" + str(node["id"]) + ")");
    *err = tls ? name +
                     " lists no tls-port, only a plain port: the seed is rediss://, so every "
                     "node is reached at its tls-port; give every node a tls-port and set "
                     "tls-cluster yes (without it Redis does not tell the other nodes' TLS "
                     "ports), or use redis://"
               : name +
                     " has only a TLS port (tls-port, no plain port): use rediss:// (with "
                     "tls.ca_file for a private CA)";
    return -1;
}

bool assign(Topology *t, int idx, long long lo, long long hi, std::string *err) {
    if (lo < 0 || hi > 16383 || lo > hi) {
        *err = "slot range " + std::to_string(lo) + "-" + std::to_string(hi) + " is not valid";
        return false;
    }
    for (long long s = lo; s <= hi; s++)
        t->slot_owner[static_cast<size_t>(s)] = static_cast<int16_t>(idx);
    return true;
}

}  // namespace

size_t Topology::uncovered() const {
    size_t n = 0;
    for (int16_t o : slot_owner) n += o < 0;
    return n;
}

std::vector<std::pair<int, int>> Topology::unassigned() const {
    std::vector<bool> held(slot_owner.size(), false);
    for (auto &d : down)
        for (auto &r : d.ranges)
            for (int s = r.first; s <= r.second; s++) held[static_cast<size_t>(s)] = true;
    std::vector<std::pair<int, int>> out;
    for (int s = 0; s < static_cast<int>(slot_owner.size()); s++) {
        if (slot_owner[static_cast<size_t>(s)] >= 0 || held[static_cast<size_t>(s)]) continue;
        if (!out.empty() && out.back().second == s - 1)
            out.back().second = s;
        else
            out.emplace_back(s, s);
    }
    return out;
}

const ClusterNode *Topology::master_for_slot(int slot) const {
    int16_t o = slot_owner[static_cast<size_t>(slot)];
    return o < 0 ? nullptr : &masters[static_cast<size_t>(o)];
}

int Topology::find(const std::string &endpoint) const {
    for (size_t i = 0; i < masters.size(); i++)
        if (masters[i].endpoint() == endpoint) return static_cast<int>(i);
    return -1;
}

RedisUrl Topology::url_of(const RedisUrl &seed, const Endpoint &node) const {
    RedisUrl url = seed.at(node);
    const int i = find(node.str());
    if (url.tls && url.tls_options.server_name.empty() && i >= 0)
        url.tls_options.server_name = masters[static_cast<size_t>(i)].hostname;
    return url;
}

bool parse_cluster_shards(const redisReply *r, const std::string &fallback_host, Topology *out,
                          std::string *err, bool tls) {
    Topology t;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        *err = "CLUSTER SHARDS did not answer with an array";
        return false;
    }
    for (size_t i = 0; i < r->elements; i++) {
        auto shard = flat_map(r->element[i]);
        const redisReply *slots = shard["slots"], *nodes = shard["nodes"];
        if (!slots || !nodes || slots->type != REDIS_REPLY_ARRAY ||
            nodes->type != REDIS_REPLY_ARRAY) {
            *err = "a CLUSTER SHARDS entry lacks slots or nodes";
            return false;
        }
        if (slots->elements == 0) continue;  // a shard without slots serves nothing
        // The shard's master that is not failed. After a failover the old master can still
        // be listed as a master with health "failed" beside the promoted one.
        const redisReply *master = nullptr;
        for (size_t j = 0; j < nodes->elements; j++) {
            auto node = flat_map(nodes->element[j]);
            std::string health = str(node["health"]);
            if (str(node["role"]) == "master" && health != "failed" && health != "fail")
                master = nodes->element[j];
        }
        if (!master) {
            // Its master failed and no replica took over (yet): remembered, so that what
            // cannot be read there can be named (inspect).
            DownShard d;
            for (size_t j = 0; j < nodes->elements; j++) {
                auto node = flat_map(nodes->element[j]);
                if (j == 0 || str(node["role"]) == "master") {
                    d.master.host = str(node["ip"]);
                    if (d.master.host.empty() || d.master.host == "?")
                        d.master.host = fallback_host;
                    std::string ignored;
                    long long port = node_port(node, d.master.host, tls, &ignored);
                    d.master.port = port > 0 && port <= 65535 ? static_cast<int>(port) : 0;
                    d.master.id = str(node["id"]);
                }
            }
            for (size_t j = 0; j + 1 < slots->elements; j += 2) {
                long long lo = num(slots->element[j]), hi = num(slots->element[j + 1]);
                if (lo >= 0 && hi <= 16383 && lo <= hi) {
                    d.slots += static_cast<size_t>(hi - lo + 1);
                    d.ranges.emplace_back(static_cast<int>(lo), static_cast<int>(hi));
                }
            }
            t.down.push_back(std::move(d));
            continue;
        }
        auto node = flat_map(master);
        ClusterNode n;
        n.host = str(node["ip"]);
        if (n.host.empty() || n.host == "?") n.host = fallback_host;
        n.id = str(node["id"]);
        n.hostname = str(node["hostname"]);
        long long port = node_port(node, n.host, tls, err);
        if (port < 0) return false;
        int idx = add_master(&t, n, port, err);
        if (idx < 0) return false;
        for (size_t j = 0; j + 1 < slots->elements; j += 2)
            if (!assign(&t, idx, num(slots->element[j]), num(slots->element[j + 1]), err))
                return false;
    }
    drop_idle_masters(&t);
    *out = std::move(t);
    return true;
}

bool parse_cluster_slots(const redisReply *r, const std::string &fallback_host, Topology *out,
                         std::string *err) {
    Topology t;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        *err = "CLUSTER SLOTS did not answer with an array";
        return false;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2) {
            *err = "a CLUSTER SLOTS entry has an unexpected shape";
            return false;
        }
        const redisReply *m = range->element[2];
        ClusterNode n;
        n.host = str(m->element[0]);
        if (n.host.empty() || n.host == "?") n.host = fallback_host;
        if (m->elements > 2) n.id = str(m->element[2]);
        int idx = add_master(&t, n, num(m->element[1]), err);
        if (idx < 0) return false;
        if (!assign(&t, idx, num(range->element[0]), num(range->element[1]), err)) return false;
    }
    drop_idle_masters(&t);
    *out = std::move(t);
    return true;
}

}  // namespace keywatch

namespace keywatch {

namespace {

// Why the probe got no reply: the connection's own words, except that a server that
// accepted the connection and then said nothing is named with redis.connect_timeout (the
// budget the user set), not with an internal command. Sets *err, returns the status.
int no_reply(const BlockingRedis &c, int64_t timeout_ms, std::string *err) {
    if (c.status() == KW_ERR_TIMEOUT && !c.unreachable()) {
        *err = no_answer_message(c.url(), timeout_ms, c.url().password.empty() ? "" : "AUTH");
        return KW_ERR_TIMEOUT;
    }
    *err = c.error();
    return c.status();
}

// A server loading its data set answers -LOADING to nearly every command: probe_seeds
// waits for it (*loading) as for a server not listening yet. Sets *err, returns the status.
int loading_reply(const RedisUrl &seed, std::string *err, bool *loading) {
    if (loading) *loading = true;
    *err = "Redis at " + seed.endpoint() + " is loading its data set into memory (LOADING)";
    return KW_ERR_TIMEOUT;
}

// redis.mode=standalone against a node of a Redis Cluster would run on that one node and
// meet CROSSSLOT or see only its slots: refused, naming the fix. Whatever else happens
// (no answer, a proxy that does not know CLUSTER) is left to the connection itself.
int refuse_cluster_node(const RedisUrl &seed, int64_t timeout_ms, std::string *err,
                        int64_t named_timeout_ms, bool *unreachable, bool *loading) {
    bool is_cluster = false, is_loading = false;
    Topology t;
    std::string why;
    if (seed.is_unix()) return KW_OK;
    int rc = probe_topology(seed, timeout_ms, "auto", &is_cluster, &t, &why, named_timeout_ms,
                            unreachable, &is_loading);
    if (rc == KW_ERR_CONNECT || is_loading) {
        // Nothing listens (yet), or the server is loading: probe_seeds may wait for it
        // (redis.connect_timeout).
        if (loading) *loading = is_loading;
        *err = why;
        return rc;
    }
    if (rc != KW_OK || !is_cluster) return KW_OK;
    *err = "redis.mode=standalone, but " + seed.endpoint() + " is a node of a Redis Cluster (" +
           std::to_string(t.masters.size()) +
           " masters): use redis.mode=auto (the default) or redis.mode=cluster";
    return KW_ERR_INVALID_ARG;
}

}  // namespace

bool probes_topology(const std::string &mode, const RedisUrl &seed) {
    return mode != "standalone" && !seed.is_unix();
}

int probe_topology(const RedisUrl &seed, int64_t timeout_ms, const std::string &mode,
                   bool *is_cluster, Topology *out, std::string *err, int64_t named_timeout_ms,
                   bool *unreachable, bool *loading) {
    if (unreachable) *unreachable = false;
    if (loading) *loading = false;
    *is_cluster = false;
    const int64_t named = named_timeout_ms > 0 ? named_timeout_ms : timeout_ms;
    if (mode == "standalone")
        return refuse_cluster_node(seed, timeout_ms, err, named_timeout_ms, unreachable, loading);
    if (seed.is_unix() && mode == "cluster") {
        *err = "redis.mode=cluster needs a TCP node address, not a unix socket";
        return KW_ERR_URL;
    }
    const auto started = std::chrono::steady_clock::now();
    auto left = [&] {
        const int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count();
        return std::max<int64_t>(timeout_ms - spent, 1);
    };
    BlockingRedis c(seed, "topology", false);
    if (c.connect(timeout_ms) != KW_OK) {
        if (unreachable) *unreachable = c.unreachable();
        return no_reply(c, named, err);
    }
    auto run = [&](std::vector<std::string> args) { return c.command(args, left()); };
    if (seed.is_unix()) {
        // A unix socket is a standalone server: only whether it answers (and has loaded its
        // data) matters here.
        auto pong = run({"PING"});
        if (!pong) return no_reply(c, named, err);
        return classify(pong.get()) == ReplyError::Loading ? loading_reply(seed, err, loading)
                                                           : KW_OK;
    }
    auto r = run({"CLUSTER", "SHARDS"});
    if (!r) return no_reply(c, named, err);
    if (classify(r.get()) == ReplyError::Loading) return loading_reply(seed, err, loading);
    std::string e = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
    if (classify(r.get()) == ReplyError::Auth) {
        *err = password_required_message(seed);
        return KW_ERR_AUTH;
    }
    if (e.find("cluster support disabled") != std::string::npos) {
        if (mode == "cluster") {
            *err = "redis.mode=cluster, but " + seed.endpoint() +
                   " is not a cluster node (cluster support disabled): use redis.mode=standalone "
                   "or auto, or give a cluster node's URL";
            return KW_ERR_REDIS;
        }
        return KW_OK;
    }
    Topology t;
    std::string perr;
    bool parsed;
    if (!e.empty()) {
        // Before 7.0 there is no CLUSTER SHARDS.
        r = run({"CLUSTER", "SLOTS"});
        if (classify(r.get()) == ReplyError::Loading) return loading_reply(seed, err, loading);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            *err = "cannot read the cluster topology from " + seed.endpoint() + ": " +
                   (r ? std::string(r->str, r->len) : e);
            return KW_ERR_REDIS;
        }
        parsed = parse_cluster_slots(r.get(), seed.host, &t, &perr);
    } else {
        parsed = parse_cluster_shards(r.get(), seed.host, &t, &perr, seed.tls);
    }
    if (!parsed) {
        *err = "cannot read the cluster topology from " + seed.endpoint() + ": " + perr;
        return KW_ERR_REDIS;
    }
    if (t.masters.empty()) {
        *err = "the cluster at " + seed.endpoint() +
               " has no master serving any slot: finish setting it up (redis-cli --cluster "
               "create/fix)";
        return KW_ERR_REDIS;
    }
    *is_cluster = true;
    *out = std::move(t);
    return KW_OK;
}

int probe_seeds(const std::vector<RedisUrl> &seeds, int64_t timeout_ms, const std::string &mode,
                RedisUrl *chosen, bool *is_cluster, Topology *out, std::string *err,
                bool wait_for_server, const std::function<void(const std::string &)> &on_loading) {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 1));
    const Backoff pause{50, 1000};
    bool told = false;  // on_loading was called
    for (int round = 0;; round++) {
        int rc = KW_ERR_CONNECT;
        bool only_unreachable = true;  // every seed refused the connection (or was unreachable)
        const RedisUrl *loading = nullptr;  // a seed that is loading its data set
        std::string all;
        for (const RedisUrl &seed : seeds) {
            const int64_t left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                    .count();
            // Each attempt gets what is left of the budget, so the whole search keeps it.
            bool unreachable = false, is_loading = false;
            rc = probe_topology(seed, std::max<int64_t>(left, 1), mode, is_cluster, out, err,
                                timeout_ms, &unreachable, &is_loading);
            if (rc == KW_OK) {
                *chosen = seed;
                return KW_OK;
            }
            if (rc == KW_ERR_AUTH) return rc;
            if (is_loading) loading = &seed;
            // A server that answered wrongly (not RESP, closed the connection) will not do
            // better later: only a connection that could not be made is waited for.
            if (!unreachable) only_unreachable = false;
            if (seeds.size() > 1) all += (all.empty() ? "" : "; ") + *err;
        }
        if (seeds.size() > 1)
            *err = "none of the " + std::to_string(seeds.size()) + " seeds answered: " + all;
        const int64_t left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        // A seed loading its data set answers once it has loaded: always waited for. One
        // not listening yet (a server or cluster still starting) only with wait_for_server.
        const bool wait = loading || (wait_for_server && only_unreachable);
        if (!wait || left <= 0) {
            if (loading) {
                *err = still_loading_message(*loading, timeout_ms);
                return KW_ERR_TIMEOUT;
            }
            if (wait && round > 0)
                *err += " (kept trying for redis.connect_timeout, " + std::to_string(timeout_ms) +
                        "ms)";
            return rc;
        }
        if (loading && !told && on_loading) {
            told = true;
            on_loading("Redis at " + loading->endpoint() +
                       " is loading its data set into memory: waiting until it has loaded (at "
                       "most redis.connect_timeout, " +
                       std::to_string(timeout_ms) + "ms)");
        }
        // Try again until redis.connect_timeout runs out: with capped backoff while nothing
        // listens, every kPollMs while a seed loads.
        const int64_t pause_ms = loading ? kPollMs : pause.delay(round);
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(pause_ms, left)));
    }
}

}  // namespace keywatch
