// kw_bench_plugin_handlers: the built-in handlers' throughput (issue 12, "Performance"),
// each beside baselines measured in the same run, alternating the order each round:
//  - stream: items/s end to end (N due tracked keys, engine started, until all acked)
//    through the stream plugin (one script call per batch: marker + XADD per event),
//    against a raw pipelined XADD of the same events (same fields and sizes) on the same
//    private redis-server, and against the same engine with a no-op C callback (the
//    engine's own ceiling).
//  - session_index on a 3-master cluster (tests/support/redis_cluster.h): items/s end to end
//    with every session in its user's set index (another slot than the session key), against
//    the no-op C callback on the same keys, and a raw pipelined SREM of the same members sent
//    to each index key's master.
// Medians of the rounds. No target: the figures go in the note. Every stream run prints
// Redis's CPU per event, and an estimate of the ceiling those set for a handler that XADDs
// each event (these fields): Redis runs one thread, and if the costs add up, such a handler
// costs it a raw pipelined XADD beside what the no-op engine costs it (claims, acks), so it
// delivers at most 1 / (raw XADD + no-op engine) events a second. An estimate, not a proof:
// an XADD inside a batch's script skips the per-command parsing and reply a pipelined one
// pays; the plugin's own excess over the sum is printed beside it (issue 23's "what limits
// it").
// --verbose: per run Redis's CPU per item (on the cluster: the masters') and this
// process's; for the stream's engine runs INFO commandstats (reset before each; commands a
// script runs counted too); for every engine run its statistics.
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/redis/slots.h"
#include "tests/support/redis_cluster.h"

namespace {

using namespace kwbench;

struct Options {
    int rounds = 3;
    uint64_t keys = 50000;
    uint64_t users = 1000;
    int threads = 4;
    std::string only;  // "", "stream" or "session_index"
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_plugin_handlers [options]\n"
            "  --rounds R   measured rounds (default 3); medians are reported\n"
            "  --keys N     due tracked keys per run (default 50000)\n"
            "  --users U    session_index: users the sessions belong to (default 1000)\n"
            "  --threads P  client threads writing the keys (default 4)\n"
            "  --only NAME  stream or session_index (default both)\n"
            "  --conf NAME=VALUE keywatch engine option (repeatable)\n");
}

// An engine on url with either the no-op C callback (plugin empty) or a plugin of
// KW_HANDLERS_DIR with options; items/s from start until n are acked.
double run_engine(const std::string &url, uint64_t n, const std::string &plugin,
                  const ConfPairs &options) {
    auto e = plugin.empty()
                 ? std::make_unique<Engine>(url, noop_handler, nullptr)
                 : std::make_unique<Engine>(
                       url, std::string(KW_HANDLERS_DIR) + "/" + plugin + ".so", plugin, options);
    double t0 = mono_s();
    e->start();
    int64_t acked = 0;
    while (acked < int64_t(n) && mono_s() - t0 < 300) {
        sleep_ms(1);
        acked = e->stat("items.acked");
    }
    double s = mono_s() - t0;
    const int64_t dead = e->stat("items.dead");
    if (env().verbose) {
        char *json = nullptr;
        kw_engine_stats_json(e->e, &json);
        if (json) printf("      engine stats: %s\n", json);
        kw_free(json);
    }
    e.reset();
    if (acked < int64_t(n) || dead)
        throw BenchError(std::to_string(acked) + " of " + std::to_string(n) + " acked (" +
                         std::to_string(dead) + " dead) through " +
                         (plugin.empty() ? "the C callback" : plugin));
    return double(acked) / s;
}

void print_medians(const char *what, const std::map<std::string, std::vector<double>> &rates,
                   const std::vector<std::string> &order) {
    printf("\n== %s: medians ==\n", what);
    double first = median(rates.at(order[0]));
    for (const auto &name : order) {
        double m = median(rates.at(name));
        printf("  %-34s %s", name.c_str(), fmt_rate(m).c_str());
        if (name != order[0]) printf("  (the plugin: %.1f%% of this)", 100.0 * first / m);
        printf("  rounds:");
        for (double r : rates.at(name)) printf(" %s", fmt_rate(r).c_str());
        printf("\n");
    }
    fflush(stdout);
}

// ---- stream ---------------------------------------------------------------------------

size_t stream_key(uint64_t i, char *buf) {
    return size_t(snprintf(buf, 64, "o%015llu", static_cast<unsigned long long>(i)));
}

// A stream run: events a second, and Redis's CPU per event (microseconds).
struct StreamRun {
    double rate = 0, redis_us = 0;
};

StreamRun stream_plugin(const keywatch::RedisProcess &rp, const Options &o, bool plugin) {
    rp.command({"FLUSHALL"});
    track_parallel(rp.url(), "", o.threads, 100, o.keys, stream_key,
                   [](uint64_t) { return int64_t(1); });
    sleep_ms(500);  // all due
    rp.command({"CONFIG", "RESETSTAT"});
    Cpu a, b;
    a.redis = redis_cpu_s(rp), a.self = self_cpu_s();
    double rate = plugin ? run_engine(rp.url(), o.keys, "stream",
                                      {{"stream", "events"}, {"maxlen", "10000000"}})
                         : run_engine(rp.url(), o.keys, "", {});
    b.redis = redis_cpu_s(rp), b.self = self_cpu_s();
    if (env().verbose) {
        printf("      %s\n", cpu_per_item(a, b, double(o.keys), "bench+engine").c_str());
        print_commandstats(rp, plugin ? "stream plugin run" : "no-op run");
    }
    return {rate, (b.redis - a.redis) * 1e6 / double(o.keys)};
}

// The same events as raw XADDs (the stream plugin's fields, values of the same sizes).
StreamRun stream_raw(const keywatch::RedisProcess &rp, const Options &o) {
    rp.command({"FLUSHALL"});
    ContextPtr c = connect_sync(rp.port());
    char key[64], id[96], deadline[24];
    const std::string value(16, 'v');
    int64_t dl = wall_ms_int();
    snprintf(deadline, sizeof deadline, "%lld", static_cast<long long>(dl));
    Cpu a, b;
    a.redis = redis_cpu_s(rp), a.self = self_cpu_s();
    double t0 = mono_s();
    for (uint64_t i = 0; i < o.keys;) {
        uint64_t start = i, stop = std::min<uint64_t>(o.keys, i + 100);
        for (; i < stop; i++) {
            size_t kl = stream_key(i, key);
            size_t il = size_t(snprintf(id, sizeof id, "q:keys:%s:%s", deadline, key));
            const char *a[] = {"XADD",        "events",  "MAXLEN",  "~", "10000000", "*",
                               "event",       "expired", "key",     key, "value",    value.c_str(),
                               "deadline_ms", deadline,  "attempt", "1", "id",       id};
            size_t l[] = {4, 6, 6, 1, 8, 1, 5, 7, 3, kl, 5, value.size(), 11, strlen(deadline),
                          7, 1, 2, il};
            redisAppendCommandArgv(c.get(), 18, a, l);
        }
        read_replies(c.get(), stop - start, "XADD");
    }
    double s = mono_s() - t0;
    b.redis = redis_cpu_s(rp), b.self = self_cpu_s();
    if (env().verbose) printf("      %s\n", cpu_per_item(a, b, double(o.keys), "bench").c_str());
    return {double(o.keys) / s, (b.redis - a.redis) * 1e6 / double(o.keys)};
}

// The estimated ceiling of a handler that XADDs each event (see the top), per round and
// as medians: its rate, its share of the no-op engine's rate in the same round, and how
// much more Redis CPU per event the plugin used than the sum the estimate rests on.
void print_stream_ceiling(const std::vector<std::vector<StreamRun>> &rounds) {
    std::vector<double> plugin, raw, noop, ceiling, share, excess;
    printf(
        "  Redis CPU per event; estimated ceiling of an XADD per event: 1 / (raw XADD + "
        "no-op engine)\n");
    for (size_t r = 0; r < rounds.size(); r++) {
        const auto &run = rounds[r];
        plugin.push_back(run[0].redis_us), raw.push_back(run[1].redis_us);
        noop.push_back(run[2].redis_us);
        ceiling.push_back(1e6 / (run[1].redis_us + run[2].redis_us));
        share.push_back(100 * ceiling.back() / run[2].rate);
        excess.push_back(run[0].redis_us - run[1].redis_us - run[2].redis_us);
        printf(
            "    round %zu: plugin %.1f us, raw XADD %.1f us, no-op engine %.1f us (the plugin "
            "%+.1f us beyond their sum); ceiling %s = %.1f%% of the no-op engine\n",
            r + 1, plugin.back(), raw.back(), noop.back(), excess.back(),
            fmt_rate(ceiling.back()).c_str(), share.back());
    }
    printf(
        "    medians: plugin %.1f us, raw XADD %.1f us, no-op engine %.1f us (the plugin %+.1f "
        "us beyond their sum); ceiling %s = %.1f%% of the no-op engine\n",
        median(plugin), median(raw), median(noop), median(excess),
        fmt_rate(median(ceiling)).c_str(), median(share));
    fflush(stdout);
}

void bench_stream(const Options &o) {
    keywatch::RedisProcess::Options so;
    so.notify = "Ex";
    keywatch::RedisProcess rp(so);
    rp.start();
    std::map<std::string, std::vector<double>> rates;
    const std::vector<std::string> order = {"stream plugin (end to end)", "raw pipelined XADD",
                                            "no-op C callback (end to end)"};
    std::vector<std::vector<StreamRun>> runs;  // per round, in the order of `order`
    for (int r = 0; r < o.rounds; r++) {
        runs.emplace_back(3);
        for (int k = 0; k < 3; k++) {
            int which = (k + r) % 3;  // rotate the order each round
            StreamRun run = which == 0   ? stream_plugin(rp, o, true)
                            : which == 1 ? stream_raw(rp, o)
                                         : stream_plugin(rp, o, false);
            runs.back()[size_t(which)] = run;
            rates[order[size_t(which)]].push_back(run.rate);
            printf("  round %d: %-34s %s (Redis CPU %.1f us per event)\n", r + 1,
                   order[size_t(which)].c_str(), fmt_rate(run.rate).c_str(), run.redis_us);
            fflush(stdout);
        }
    }
    print_medians("stream handler", rates, order);
    print_stream_ceiling(runs);
}

// ---- session_index on the cluster ----------------------------------------------------------

struct Cluster {
    std::unique_ptr<keywatch::RedisCluster> rc;
    std::vector<int> master_port_of_slot;  // 16384 entries
    std::vector<int> ports;                // masters
    std::string seed;
};

void start_cluster(Cluster *c) {
    keywatch::RedisCluster::Options opts;
    opts.notify = "Ex";
    c->rc = std::make_unique<keywatch::RedisCluster>(opts);
    c->rc->start();
    if (!c->rc->wait_healthy()) throw BenchError("the cluster is not healthy");
    for (size_t i : c->rc->masters()) c->ports.push_back(c->rc->node(i).port());
    c->seed = c->rc->seed_url();
    c->master_port_of_slot.assign(16384, 0);
    ContextPtr ctx = connect_sync(c->ports.front());
    auto *r = static_cast<redisReply *>(redisCommand(ctx.get(), "CLUSTER SLOTS"));
    if (!r || r->type != REDIS_REPLY_ARRAY) throw BenchError("CLUSTER SLOTS failed");
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *range = r->element[i];
        int port = int(range->element[2]->element[1]->integer);
        for (long long s = range->element[0]->integer; s <= range->element[1]->integer; s++)
            c->master_port_of_slot[size_t(s)] = port;
    }
    freeReplyObject(r);
}

// The masters' CPU seconds so far, summed.
double masters_cpu_s(const Cluster &c) {
    double s = 0;
    for (size_t i : c.rc->masters()) s += redis_cpu_s(c.rc->node(i));
    return s;
}

void flush_masters(const Cluster &c) {
    for (int p : c.ports) {
        ContextPtr ctx = connect_sync(p);
        freeReplyObject(redisCommand(ctx.get(), "FLUSHALL"));
    }
}

size_t session_key(const Options &o, uint64_t i, char *buf) {
    return size_t(snprintf(buf, 64, "s:%06llu:%012llu",
                           static_cast<unsigned long long>(i % o.users),
                           static_cast<unsigned long long>(i)));
}

std::string index_key(const Options &o, uint64_t i) {
    char buf[64];
    snprintf(buf, sizeof buf, "user:%06llu:sessions", static_cast<unsigned long long>(i % o.users));
    return buf;
}

// SADD (or SREM) of every session to its user's index, pipelined per index key's master.
void index_command(const Cluster &c, const Options &o, const char *cmd) {
    std::map<int, std::vector<uint64_t>> by_port;
    for (uint64_t i = 0; i < o.keys; i++)
        by_port[c.master_port_of_slot[size_t(keywatch::key_slot(index_key(o, i)))]].push_back(i);
    for (auto &pi : by_port) {
        ContextPtr ctx = connect_sync(pi.first);
        const auto &items = pi.second;
        std::string idx;
        char key[64];
        pipelined(ctx.get(), 0, items.size(), 100,
                  [&](uint64_t j, const char **argv, size_t *lens) {
                      idx = index_key(o, items[j]);
                      size_t kl = session_key(o, items[j], key);
                      argv[0] = cmd, lens[0] = strlen(cmd);
                      argv[1] = idx.c_str(), lens[1] = idx.size();
                      argv[2] = key, lens[2] = kl;
                      return 3;
                  });
    }
}

double sessions_engine(const Cluster &c, const Options &o, bool plugin) {
    flush_masters(c);
    index_command(c, o, "SADD");
    track_parallel(
        c.seed, "", o.threads, 100, o.keys,
        [&o](uint64_t i, char *buf) { return session_key(o, i, buf); },
        [](uint64_t) { return int64_t(1); });
    sleep_ms(500);  // all due
    Cpu a, b;
    a.redis = masters_cpu_s(c), a.self = self_cpu_s();
    double rate = plugin ? run_engine(c.seed, o.keys, "session_index",
                                      {{"index", "user:{user}:sessions"},
                                       {"user", "key"},
                                       {"pattern", "s:{user}:{session}"}})
                         : run_engine(c.seed, o.keys, "", {});
    b.redis = masters_cpu_s(c), b.self = self_cpu_s();
    if (env().verbose)
        printf("      %s (redis: the 3 masters)\n",
               cpu_per_item(a, b, double(o.keys), "bench+engine").c_str());
    if (!plugin) return rate;
    // Every session left its index.
    for (int p : c.ports) {
        ContextPtr ctx = connect_sync(p);
        auto *r = static_cast<redisReply *>(redisCommand(ctx.get(), "DBSIZE"));
        long long left = r ? r->integer : -1;
        freeReplyObject(r);
        // What remains per master: keywatch's own keys only, no index.
        auto *k = static_cast<redisReply *>(redisCommand(ctx.get(), "KEYS user:*"));
        size_t indexes = k ? k->elements : 0;
        freeReplyObject(k);
        if (indexes)
            throw BenchError(std::to_string(indexes) + " index keys left on master " +
                             std::to_string(p) + " (" + std::to_string(left) + " keys)");
    }
    return rate;
}

double sessions_raw(const Cluster &c, const Options &o) {
    flush_masters(c);
    index_command(c, o, "SADD");
    double t0 = mono_s();
    index_command(c, o, "SREM");
    return double(o.keys) / (mono_s() - t0);
}

void bench_sessions(const Options &o) {
    Cluster c;
    start_cluster(&c);
    std::map<std::string, std::vector<double>> rates;
    const std::vector<std::string> order = {"session_index plugin (end to end)",
                                            "no-op C callback (end to end)",
                                            "raw pipelined SREM per master"};
    for (int r = 0; r < o.rounds; r++) {
        for (int k = 0; k < 3; k++) {
            int which = (k + r) % 3;
            double rate = which == 0   ? sessions_engine(c, o, true)
                          : which == 1 ? sessions_engine(c, o, false)
                                       : sessions_raw(c, o);
            rates[order[size_t(which)]].push_back(rate);
            printf("  round %d: %-34s %s\n", r + 1, order[size_t(which)].c_str(),
                   fmt_rate(rate).c_str());
            fflush(stdout);
        }
    }
    print_medians("session_index on the 3-master cluster", rates, order);
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    bool ok = parse_options(
        argc, argv, "kw_bench_plugin_handlers", usage,
        [&o](const std::string &arg, const std::string &value) {
            uint64_t n = 0;
            bool good = true;
            if (arg == "--rounds")
                good = parse_uint(value, 1, 100, &n) && (o.rounds = int(n), true);
            else if (arg == "--keys")
                good = parse_uint(value, 100, 100000000ull, &o.keys);
            else if (arg == "--users")
                good = parse_uint(value, 1, 100000000ull, &o.users);
            else if (arg == "--threads")
                good = parse_uint(value, 1, 64, &n) && (o.threads = int(n), true);
            else if (arg == "--only")
                good = (value == "stream" || value == "session_index") && (o.only = value, true);
            else
                return Opt::kUnknown;
            return good ? Opt::kOk : Opt::kBad;
        });
    if (!ok) return 1;
    try {
        printf("kw_bench_plugin_handlers: %llu due tracked keys per run, %d round(s)\n",
               static_cast<unsigned long long>(o.keys), o.rounds);
        if (o.only.empty() || o.only == "stream") bench_stream(o);
        if (o.only.empty() || o.only == "session_index") bench_sessions(o);
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_plugin_handlers: %s\n", e.what());
        return 1;
    }
    return 0;
}
