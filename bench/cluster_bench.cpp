// kw_bench_cluster: the Redis Cluster figures of issue 4 ("Performance"), on a real
// 3-master, 3-replica cluster on loopback (keywatch::RedisCluster: cluster-node-timeout
// 2000 ms, notify-keyspace-events AKE), each printed beside a baseline measured in the same
// run, repeated for several rounds (--rounds) with medians and a verdict where the issue
// sets a target. Each round starts a fresh cluster (the failover leaves it without a
// replica) and runs the sub-benchmarks below in this order.
//
// Sub-benchmarks (--only lateness,idle,burst,track,e2e,failover,reshard; all by default)
//  lateness  N tracked keys (--keys) named "k:<deadline>:<i>", so spread over every master
//            by key name, whose deadlines are spread evenly over 10 s, starting about 2 s
//            after the writing ends (4 client threads, pipelines of 100), with --background
//            other keys (1 h TTLs, default 0) on the masters meanwhile. keywatch: one
//            engine (default configuration, seeded with one node's URL), one handler for
//            "expired" recording (handler start - kw_event_deadline_ms) for first attempts of
//            queue "keys". Baseline "native": the same workload as plain SET PXAT keys
//            "n:<deadline>:<i>" written to the master of each key's slot (the CLUSTER SLOTS
//            map read once), and a raw hiredis + libevent subscriber on
//            __keyevent@0__:expired on every master (keyspace notifications are node-local)
//            recording (arrival - deadline from the key name). Both variants run on the same
//            cluster, FLUSHALL on every master before each, alternating which goes first.
//            Waiting stops when every key arrived or 30 s (--wait-ms) after the last
//            deadline; a key not in by then is infinitely late ("missed").
//            Targets (the single-node ones of issue 3): p99 <= 50 ms, max <= 250 ms.
//  idle      Commands per second per master with nothing due (INFO stats
//            total_commands_processed, and INFO commandstats for the breakdown; commands
//            called from scripts count too), over --idle-ms (default 10 s):
//              engine: the lateness run's engine, still running, from 1 s after its last
//                      tracked key was acked;
//              base:   the same cluster with no engine running, the same window length;
//            the engine's cost is the difference. The benchmark's own INFO calls are the
//            same in both windows. In the first round the window then stays open until the
//            leases of the lateness run's claims have run out (lease + 2 s after the last
//            claim) and reports the claim_due calls made meanwhile: sweeps of slot queues
//            that wake at the lease end of items already acked. (`--only idle` runs the
//            keywatch half of the lateness workload to have something delivered.)
//  burst     N tracked keys (--burst-keys, default 100000) "b:<deadline>:<i>", so spread over
//            every master by key name, sharing one deadline about 3 s after the writing ends
//            (4 client threads, pipelines of 100). keywatch: a fresh engine (default
//            configuration) started before the writing, one handler for "expired" recording
//            every delivery of queue "keys" (key, node, handler start). Figures: the time
//            from the deadline until the last key's first handler call started (= max
//            lateness), p99 lateness, the rate, the keys delivered, lost (never delivered by
//            deadline + --wait-ms; target 0) and duplicated (deliveries beyond the first,
//            counted until 500 ms after every delivery was acked), and per master its keys
//            and its last start. Baseline "native": the lateness baseline with one shared
//            deadline (plain SET PXAT keys "n:<deadline>:<i>" written to their masters, a
//            raw subscriber on every master). Both variants on the same cluster, FLUSHALL
//            on every master before each, alternating which goes first.
//            Target (issue 3's): every key's handler started by deadline + 1 s.
//  track     kw_client_track throughput on the cluster, P client threads (--threads) each with its
//            own client, pipelines of --batch; against a raw pipelined EVALSHA of
//            SET k v PX ttl + ZADD of k into the same-slot key "bench:{<slot tag>}:due", sent
//            by the same threads, each command to the master of its slot (CLUSTER SLOTS
//            read once, one connection per master and thread). The raw client writes every
//            master's part of a pipeline before reading any reply; the variant that reads
//            the replies in command order (sending a master's part at its first read, as a
//            simple client does) is shown too. Passes in the order A B C C B A (reversed on
//            odd rounds), each on emptied masters; --track-ops (300000) per variant, so
//            that a pass lasts long enough to ride out a shared machine's noise. 16-byte
//            keys and values.
//            Target: keywatch >= 80% of the raw EVALSHA rate (median of per-round ratios).
//  e2e       N tracked keys (--e2e-keys, default 100000) "e<i>", spread over every master,
//            all already due (TTL 1 ms, then 500 ms), then a fresh engine (default
//            configuration) with a no-op handler is started; rate = N / (time from
//            kw_engine_start until items.acked reaches N). Baseline: a minimal at-most-once
//            consumer, N members in one due ZSET per master ("bench:{<tag>}:due", each member
//            on its own slot's master) popped by one thread per master at once with a Lua
//            ZRANGEBYSCORE LIMIT B + ZREM (B = the engine's sweep.batch; no lease, no ack,
//            no PTTL). Both on the same cluster, FLUSHALL on every master before each,
//            alternating which goes first.
//            Target (issue 3's): >= 50k/s.
//  failover  A fresh engine (default configuration); --fo-keys tracked keys "f:<i>" spread
//            over every master, deadlines spread evenly from 1 s before to 5 s after a
//            planned kill; the writes are confirmed replicated (a marker write on every
//            master, then WAIT 1) before the kill. At the planned time one master gets
//            kill -9 (a different one each round); its replica is polled with ROLE until it
//            is master.
//            Figure: time from the kill to the first delivery whose kw_event_node is the
//            promoted replica, split into kill -> promotion (Redis: cluster-node-timeout
//            2000 ms plus the election) and promotion -> first delivery (keywatch: noticing
//            the new master, subscribing, sweeping). Every key must be delivered (losses,
//            target 0); duplicates are counted. If items remain in flight after every key
//            arrived (claims made on the dead master whose acks had not reached its
//            replica), the benchmark waits until their leases end and counts the
//            redeliveries as duplicates.
//  reshard   --reshard-keys tracked keys "r:<deadline>:<i>" over every master, deadlines
//            spread over --spread-ms; at a quarter, half and three quarters of the spread,
//            --reshard-slots slots whose keys all come due at least 1 s later are moved, one
//            by one, to the next master, step by step as `redis-cli --cluster reshard` does
//            (RedisCluster::migrate_slot: SETSLOT IMPORTING/MIGRATING, MIGRATE in batches,
//            SETSLOT NODE on every master). Figures: lateness p50/p99/max of the keys in
//            moved slots beside the keys in the others, lost keys, and duplicates (counted
//            until lease + 2 s after every delivery was acked: a lost ack would show).
//            Targets (issue 10's): p99 in moved slots <= 50 ms; 0 duplicates, 0 lost.
//            Runs before the failover (which leaves a master without its replica).
//
// Clocks: deadlines are on Redis's clock (TIME), which on this machine is the same system
// clock the benchmark reads (CLOCK_REALTIME, microseconds).
//
// Exit status: 0 whatever the verdict; 1 when the benchmark itself could not run.
#include "bench_util.h"
#include "core/redis/slots.h"
#include "tests/support/redis_cluster.h"

#include <event2/thread.h>

#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace kwbench;
using keywatch::RedisCluster;
using keywatch::RedisProcess;

// ---- Options ----------------------------------------------------------------------------

const char *const kAll[] = {"lateness", "idle", "burst", "track", "e2e", "failover", "reshard"};

struct Options {
    int rounds = 3;
    std::set<std::string> only = {std::begin(kAll), std::end(kAll)};
    uint64_t keys = 30000;
    uint64_t background = 0;  // lateness: keys with 1 h TTLs present meanwhile
    int threads = 4;
    int batch = 100;
    uint64_t track_ops = 300000;
    int64_t spread_ms = 10000;
    int64_t lead_ms = 2000;  // lateness: first deadline this long after writing ends
    int64_t wait_ms = 30000;
    int64_t idle_ms = 10000;
    uint64_t burst_keys = 100000;
    int64_t burst_lead_ms = 3000;  // burst: the shared deadline this long after writing ends
    uint64_t e2e_keys = 100000;
    uint64_t fo_keys = 6000;
    std::string notify = "AKE";                       // notify-keyspace-events of every node
    int64_t fo_before_ms = 1000, fo_after_ms = 5000;  // failover deadlines around the kill
    uint64_t reshard_keys = 6000;                     // reshard: tracked keys over the spread
    int reshard_slots = 30;                           // reshard: slots moved in each of 3 moves
};

void usage(FILE *out) {
    fprintf(
        out,
        "usage: kw_bench_cluster [options]\n"
        "  --rounds R        measured rounds, each on a fresh cluster (default 3); medians\n"
        "  --only LIST       comma-separated: lateness,idle,burst,track,e2e,failover\n"
        "                    (default all)\n"
        "  --keys N          lateness: tracked keys (default 30000)\n"
        "  --burst-keys N    burst: tracked keys sharing one deadline (default 100000)\n"
        "  --e2e-keys N      e2e: due tracked keys handled end to end (default 100000)\n"
        "  --threads P       client threads for kw_client_track and the raw baseline (default 4)\n"
        "  --batch B         commands per pipeline in the track benchmark (default 100)\n"
        "  --track-ops N     commands per variant in the track benchmark (default 300000)\n"
        "  --spread-ms MS    lateness: deadlines spread over this long (default 10000)\n"
        "  --background N    lateness: other keys with 1 h TTLs present meanwhile,\n"
        "                    spread over every master (default 0; issue 3's: 1000000)\n"
        "  --wait-ms MS      lateness, burst: arrivals awaited this long after the last\n"
        "                    deadline (default 30000)\n"
        "  --idle-ms MS      idle: length of each measuring window (default 10000)\n"
        "  --fo-keys N       failover: tracked keys (default 6000)\n"
        "  --reshard-keys N  reshard: tracked keys (default 6000)\n"
        "  --reshard-slots N reshard: slots moved in each of the 3 moves (default 30)\n"
        "  --notify FLAGS    notify-keyspace-events of every node (default AKE)\n"
        "  --conf NAME=VALUE keywatch engine option (repeatable), e.g. --conf workers=2\n"
        "  --verbose         engine stats, commandstats and info log lines\n");
}

bool parse_args(int argc, char **argv, Options *o) {
    bool ok = parse_options(
        argc, argv, "kw_bench_cluster", usage,
        [o](const std::string &arg, const std::string &value) {
            uint64_t n = 0;
            bool good = true;
            if (arg == "--rounds")
                good = parse_uint(value, 1, 100, &n) && (o->rounds = int(n), true);
            else if (arg == "--only")
                return parse_only(value, kAll, &o->only);
            else if (arg == "--keys")
                good = parse_uint(value, 100, 100000000ull, &o->keys);
            else if (arg == "--background")
                good = parse_uint(value, 0, 100000000ull, &o->background);
            else if (arg == "--threads")
                good = parse_uint(value, 1, 64, &n) && (o->threads = int(n), true);
            else if (arg == "--batch")
                good = parse_uint(value, 1, 1000, &n) && (o->batch = int(n), true);
            else if (arg == "--track-ops")
                good = parse_uint(value, 100, 1000000000ull, &o->track_ops);
            else if (arg == "--spread-ms")
                good = parse_uint(value, 0, 3600000, &n) && (o->spread_ms = int64_t(n), true);
            else if (arg == "--wait-ms")
                good = parse_uint(value, 0, 3600000, &n) && (o->wait_ms = int64_t(n), true);
            else if (arg == "--idle-ms")
                good = parse_uint(value, 1000, 3600000, &n) && (o->idle_ms = int64_t(n), true);
            else if (arg == "--burst-keys")
                good = parse_uint(value, 100, 100000000ull, &o->burst_keys);
            else if (arg == "--e2e-keys")
                good = parse_uint(value, 100, 100000000ull, &o->e2e_keys);
            else if (arg == "--fo-keys")
                good = parse_uint(value, 100, 10000000ull, &o->fo_keys);
            else if (arg == "--reshard-keys")
                good = parse_uint(value, 100, 10000000ull, &o->reshard_keys);
            else if (arg == "--reshard-slots")
                good = parse_uint(value, 1, 1000, &n) && (o->reshard_slots = int(n), true);
            else if (arg == "--notify")
                o->notify = value;
            else
                return Opt::kUnknown;
            return good ? Opt::kOk : Opt::kBad;
        });
    return ok;
}

// The engine's lease (ms) under the --conf options.
int64_t lease_ms() {
    return engine_option("lease");
}

// ---- The cluster ------------------------------------------------------------------------

// A round's cluster, its masters (ascending port) and the slot map read once from CLUSTER
// SLOTS.
struct Cluster {
    RedisCluster::Options opts;
    std::unique_ptr<RedisCluster> rc;
    std::vector<RedisProcess *> masters;
    std::vector<RedisProcess *> replicas;
    std::vector<int> ports;               // of the masters, ascending
    std::vector<uint8_t> master_of_slot;  // index into masters
    std::string seed;                     // a node's URL for keywatch

    int index_of_port(int port) const {
        for (size_t i = 0; i < ports.size(); i++)
            if (ports[i] == port) return int(i);
        return -1;
    }
    size_t master_for_key(const char *key, size_t len) const {
        return master_of_slot[size_t(keywatch::key_slot(std::string_view(key, len)))];
    }
    // The hash tag of the first slot that master m serves: "x:{<tag>}" lives on master m.
    std::string tag_of_master(size_t m) const {
        size_t slot = 0;
        while (slot < master_of_slot.size() && master_of_slot[slot] != m) slot++;
        return keywatch::SlotTags::instance().tag(int(slot));
    }
    void flushall_masters() const {
        for (auto *m : masters) flushall(*m);
    }
    Cpu cpu() const {
        Cpu c;
        for (auto *m : masters) c.redis += redis_cpu_s(*m);
        for (auto *r : replicas) c.replicas += redis_cpu_s(*r);
        c.self = self_cpu_s();
        return c;
    }
};

std::unique_ptr<Cluster> start_cluster(const std::string &notify) {
    auto c = std::make_unique<Cluster>();
    c->opts.notify = notify;
    c->rc = std::make_unique<RedisCluster>(c->opts);
    c->rc->start();
    for (size_t i : c->rc->masters()) c->masters.push_back(&c->rc->node(i));
    for (size_t i = 0; i < c->rc->size(); i++)
        if (std::find(c->masters.begin(), c->masters.end(), &c->rc->node(i)) == c->masters.end())
            c->replicas.push_back(&c->rc->node(i));
    std::sort(c->masters.begin(), c->masters.end(),
              [](RedisProcess *a, RedisProcess *b) { return a->port() < b->port(); });
    if (c->masters.size() != size_t(c->opts.masters))
        throw BenchError("the cluster has " + std::to_string(c->masters.size()) + " masters, not " +
                         std::to_string(c->opts.masters));
    for (auto *m : c->masters) c->ports.push_back(m->port());
    c->seed = c->rc->seed_url();
    // RedisCluster::start() can return while a replica still waits for its first full sync
    // (state wait_bgsave, offset 0, which equals the master's offset 0): that sync comes
    // repl-diskless-sync-delay (5 s) later, with a fork. Wait for it, so that it does not
    // land in a measurement and a killed master has an up-to-date replica.
    double until = mono_s() + 30;
    for (auto *m : c->masters) {
        for (;;) {
            std::string info = m->command({"INFO", "replication"});
            const char *v = info_value(info, "slave0");
            if (v && std::string(v, strcspn(v, "\r\n")).find("state=online") != std::string::npos)
                break;
            if (mono_s() > until)
                throw BenchError("the replica of master " + std::to_string(m->port()) +
                                 " is not online after 30 s");
            sleep_ms(50);
        }
    }
    // CLUSTER SLOTS: [start, end, [ip, port, id], replicas...] per range.
    ContextPtr ctx = connect_sync(c->ports.front());
    auto *r = static_cast<redisReply *>(redisCommand(ctx.get(), "CLUSTER SLOTS"));
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r) freeReplyObject(r);
        throw BenchError("CLUSTER SLOTS failed");
    }
    c->master_of_slot.assign(keywatch::kSlotCount, 255);
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        if (range->elements < 3) continue;
        int port = int(range->element[2]->element[1]->integer);
        int idx = c->index_of_port(port);
        for (long long s = range->element[0]->integer; s <= range->element[1]->integer; s++)
            c->master_of_slot[size_t(s)] = uint8_t(idx < 0 ? 255 : idx);
    }
    freeReplyObject(r);
    for (uint8_t m : c->master_of_slot)
        if (m == 255) throw BenchError("CLUSTER SLOTS: a slot without a known master");
    return c;
}

// One connection per master, for one thread: commands are appended to the connection of
// the master of their slot, then sent and their replies read.
class RoutedPipe {
  public:
    explicit RoutedPipe(const Cluster &c) : cluster_(c) {
        for (int port : c.ports) conns_.push_back(connect_sync(port));
        pending_.assign(conns_.size(), 0);
    }
    void append(const char *key, size_t key_len, int argc, const char **argv, const size_t *lens) {
        size_t m = cluster_.master_for_key(key, key_len);
        redisAppendCommandArgv(conns_[m].get(), argc, argv, lens);
        pending_[m]++;
        order_.push_back(m);
    }
    // flush_first: every master's part is written before any reply is read, so the masters
    // work at once; otherwise the replies are read in command order, each connection's
    // buffer going out at its first read.
    void finish(bool flush_first) {
        if (flush_first) {
            for (size_t m = 0; m < conns_.size(); m++) {
                int done = pending_[m] == 0;
                while (!done)
                    if (redisBufferWrite(conns_[m].get(), &done) != REDIS_OK)
                        throw BenchError(std::string("write: ") + conns_[m]->errstr);
            }
            for (size_t m = 0; m < conns_.size(); m++)
                read_replies(conns_[m].get(), pending_[m], "routed pipeline");
        } else {
            for (size_t m : order_) read_replies(conns_[m].get(), 1, "routed pipeline");
        }
        pending_.assign(conns_.size(), 0);
        order_.clear();
    }

  private:
    const Cluster &cluster_;
    std::vector<ContextPtr> conns_;
    std::vector<uint64_t> pending_;
    std::vector<size_t> order_;
};

// ---- Command counts (idle) --------------------------------------------------------------

struct CmdSnap {
    double at_s = 0;
    int64_t total = 0;                     // total_commands_processed
    std::map<std::string, int64_t> calls;  // INFO commandstats: calls per command
};

std::vector<CmdSnap> snapshot(const Cluster &c) {
    std::vector<CmdSnap> out;
    for (auto *m : c.masters) {
        CmdSnap s;
        std::string info = m->command({"INFO", "stats", "commandstats"});
        s.at_s = mono_s();
        const char *v = info_value(info, "total_commands_processed");
        if (!v) throw BenchError("INFO stats has no total_commands_processed");
        s.total = std::strtoll(v, nullptr, 10);
        size_t pos = 0;
        while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
            size_t colon = info.find(':', pos);
            size_t calls = info.find("calls=", colon);
            if (colon == std::string::npos || calls == std::string::npos) break;
            s.calls[info.substr(pos + 8, colon - pos - 8)] =
                std::strtoll(info.c_str() + calls + 6, nullptr, 10);
            pos = colon;
        }
        out.push_back(std::move(s));
    }
    return out;
}

// Per master: commands per second between two snapshots, and the busiest commands.
struct Window {
    std::vector<double> rate;      // per master
    std::vector<std::string> top;  // per master: "cmd N, cmd N, ..."
    std::vector<int64_t> evalsha;  // per master: EVALSHA calls in the window
    double seconds = 0;
};

Window window(const std::vector<CmdSnap> &a, const std::vector<CmdSnap> &b) {
    Window w;
    for (size_t m = 0; m < a.size(); m++) {
        double s = b[m].at_s - a[m].at_s;
        w.seconds = s;
        w.rate.push_back(double(b[m].total - a[m].total) / s);
        std::vector<std::pair<int64_t, std::string>> d;
        for (auto &kv : b[m].calls) {
            auto it = a[m].calls.find(kv.first);
            int64_t n = kv.second - (it == a[m].calls.end() ? 0 : it->second);
            if (n > 0) d.emplace_back(n, kv.first);
        }
        std::sort(d.rbegin(), d.rend());
        std::string top;
        for (size_t i = 0; i < d.size() && i < 6; i++)
            top += (i ? ", " : "") + d[i].second + " " + std::to_string(d[i].first);
        w.top.push_back(top);
        auto ea = a[m].calls.find("evalsha"), eb = b[m].calls.find("evalsha");
        w.evalsha.push_back((eb == b[m].calls.end() ? 0 : eb->second) -
                            (ea == a[m].calls.end() ? 0 : ea->second));
    }
    return w;
}

std::string per_master(const std::vector<double> &v, const char *fmt = "%.1f") {
    std::string out;
    char buf[32];
    for (size_t i = 0; i < v.size(); i++) {
        snprintf(buf, sizeof buf, fmt, v[i]);
        out += (i ? " / " : "") + std::string(buf);
    }
    return out;
}

struct Idle {
    Window engine, base;
    bool wave_measured = false;
    Window wave;  // from the end of the engine window until the leases ran out
    double mean(const std::vector<double> &v) const {
        double s = 0;
        for (double x : v) s += x;
        return v.empty() ? std::nan("") : s / double(v.size());
    }
    double engine_cost_mean() const { return mean(engine.rate) - mean(base.rate); }
    double engine_cost_max() const {
        double mx = -kInf;
        for (size_t m = 0; m < engine.rate.size(); m++)
            mx = std::max(mx, engine.rate[m] - base.rate[m]);
        return mx;
    }
};

Window measure_base(const Options &o, const Cluster &c) {
    sleep_ms(1000);  // let the previous phase's expiries and replication settle
    auto a = snapshot(c);
    sleep_ms(o.idle_ms);
    return window(a, snapshot(c));
}

void print_window(const char *label, const Window &w) {
    printf("    %-7s %s cmd/s per master over %.1f s\n", label, per_master(w.rate).c_str(),
           w.seconds);
    for (size_t m = 0; m < w.top.size(); m++)
        printf("            master %zu: %s\n", m + 1, w.top[m].empty() ? "-" : w.top[m].c_str());
}

// ---- 1. lateness (and the engine half of idle) -------------------------------------------

// How long tracking n keys will take here and now, measured on a small sample in a
// namespace no engine serves; every master is emptied afterwards.
double estimate_track_seconds(const Cluster &c, int threads, uint64_t n) {
    uint64_t sample = std::min<uint64_t>(n, uint64_t(threads) * 500);
    double s = track_parallel(
        c.seed, "kwcal", threads, 100, sample,
        [](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "cal:%012llu", static_cast<unsigned long long>(i)));
        },
        [](uint64_t) { return int64_t(3600000); });
    c.flushall_masters();
    return s * double(n) / double(sample);
}

// `count` keys "bg:<i>" with 1 h TTLs and 16-byte values, each on its slot's master: the
// crowd Redis's sampling expiry has to sift. Returns the seconds it took.
double write_background(const Cluster &c, uint64_t count) {
    RoutedPipe pipe(c);
    char key[32];
    static const char kValue[] = "bbbbbbbbbbbbbbbb";
    const char *argv[5] = {"SET", key, kValue, "PX", "3600000"};
    size_t lens[5] = {3, 0, 16, 2, 7};
    double t0 = mono_s();
    for (uint64_t i = 0; i < count; i++) {
        lens[1] =
            size_t(snprintf(key, sizeof key, "bg:%013llu", static_cast<unsigned long long>(i)));
        pipe.append(key, lens[1], 5, argv, lens);
        if ((i + 1) % 1000 == 0 || i + 1 == count) pipe.finish(true);
    }
    return mono_s() - t0;
}

Delivery lateness_keywatch(const Options &o, const Cluster &c, Idle *idle, bool wave) {
    c.flushall_masters();
    if (o.background > 0)
        printf("    keywatch: %s background keys written in %.1f s\n",
               with_commas(double(o.background)).c_str(), write_background(c, o.background));
    uint64_t n = o.keys;
    double est = estimate_track_seconds(c, o.threads, n);
    Recorder rec(n);
    Engine engine(c.seed, record_handler, &rec);
    engine.start();
    int64_t t0 = wall_ms_int() + int64_t(est * 1250) + o.lead_ms + 100;
    auto deadline = [&](uint64_t i) {
        return t0 + int64_t(double(o.spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
    };
    double write_s = track_parallel(
        c.seed, "", o.threads, 100, n,
        [&](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "k:%013lld:%07llu", static_cast<long long>(deadline(i)),
                                   static_cast<unsigned long long>(i)));
        },
        [&](uint64_t i) { return deadline(i) - wall_ms_int(); });
    double gap = double(t0) - wall_ms();
    double last = double(deadline(n - 1));
    sleep_ms(int64_t(gap) - 200);
    for (auto *m : c.masters) m->command({"CONFIG", "RESETSTAT"});
    Cpu a = c.cpu();
    double ta = mono_s();
    sleep_ms(int64_t(last + 50 - wall_ms()));
    Cpu b = c.cpu();
    double tb = mono_s();
    double until = last + double(o.wait_ms);
    await_arrivals([&] { return rec.count(); }, n, until);
    sleep_ms(50);  // arrivals of the last poll interval
    while (engine.stat("items.acked") < int64_t(rec.count()) && wall_ms() < until) sleep_ms(5);
    double evalsha_us = 0;
    for (auto *m : c.masters) evalsha_us += usec_per_call(*m, "evalsha") / double(c.masters.size());
    int64_t sweeps = engine.stat("sweep.calls"), suppressed = engine.stat("events.suppressed");
    engine.print_stats();
    for (auto *m : c.masters) print_commandstats(*m, "keywatch lateness, one master");
    Delivery d = summarize(rec.late, rec.at, rec.count(), n, until);
    for (int s = 0; s < 4; s++) d.src[s] = rec.by_source[s].load();
    d.write_s = write_s;
    d.gap_ms = gap;
    printf(
        "    keywatch: %s tracked in %.1f s (%d clients), first deadline %.1f s after; sources: "
        "sweep %s, notification %s, lease %s; during the spread: %s (3 masters), EVALSHA "
        "%.0f us/call; sweep calls %s, own expired events suppressed %s\n",
        with_commas(double(n)).c_str(), write_s, o.threads, gap / 1000,
        with_commas(double(d.src[KW_SOURCE_SWEEP])).c_str(),
        with_commas(double(d.src[KW_SOURCE_NOTIFICATION])).c_str(),
        with_commas(double(d.src[KW_SOURCE_LEASE_EXPIRED])).c_str(),
        cpu_util(a, b, tb - ta, "engine").c_str(), evalsha_us, with_commas(double(sweeps)).c_str(),
        with_commas(double(suppressed)).c_str());
    fflush(stdout);
    if (idle) {
        // Nothing is due any more: the engine idles from here on.
        double last_claim = d.last_at;
        sleep_ms(1000);
        auto s0 = snapshot(c);
        sleep_ms(o.idle_ms);
        auto s1 = snapshot(c);
        idle->engine = window(s0, s1);
        if (wave) {
            int64_t sw0 = engine.stat("sweep.calls");
            sleep_ms(int64_t(last_claim + double(lease_ms()) + 2000 - wall_ms()));
            idle->wave = window(s1, snapshot(c));
            idle->wave_measured = true;
            printf(
                "    after the idle window, until the leases of the claims ran out (%.0f s): "
                "claim_due calls %s in the engine; EVALSHA per master %s\n",
                idle->wave.seconds, with_commas(double(engine.stat("sweep.calls") - sw0)).c_str(),
                per_master(
                    std::vector<double>(idle->wave.evalsha.begin(), idle->wave.evalsha.end()),
                    "%.0f")
                    .c_str());
        }
    }
    engine.stop();
    return d;
}

// Plain SET key v PXAT deadline(i) for keys "n:<deadline>:<i>" (or "n:<deadline>:s<i>"
// for a sample), each to its master, one thread, pipelines of 1000.
double write_native(const Cluster &c, uint64_t n, bool sample,
                    const std::function<int64_t(uint64_t)> &deadline) {
    RoutedPipe pipe(c);
    char key[64], at[32];
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    const char *argv[5] = {"SET", key, kValue, "PXAT", at};
    size_t lens[5] = {3, 0, 16, 4, 0};
    double t0 = mono_s();
    for (uint64_t i = 0; i < n; i++) {
        int64_t d = deadline(i);
        lens[1] =
            size_t(snprintf(key, sizeof key, sample ? "n:%013lld:s%07llu" : "n:%013lld:%07llu",
                            static_cast<long long>(d), static_cast<unsigned long long>(i)));
        lens[4] = size_t(snprintf(at, sizeof at, "%lld", static_cast<long long>(d)));
        pipe.append(key, lens[1], 5, argv, lens);
        if ((i + 1) % 1000 == 0 || i + 1 == n) pipe.finish(true);
    }
    return mono_s() - t0;
}

// The native variant of lateness and burst: n plain SET PXAT keys "n:<deadline>:<i>", each
// written to its master, whose deadlines are spread evenly over spread_ms (0: one shared
// deadline), the first lead_ms after the writing ends; a raw subscriber on every master.
// *first_deadline gets the first deadline. Prints the run's figures: for a burst, the CPU per
// key until every key was received; otherwise the CPU use during the spread.
Delivery native_run(const Options &o, const Cluster &c, uint64_t n, int64_t lead_ms,
                    int64_t spread_ms, bool burst, int64_t *first_deadline) {
    c.flushall_masters();
    uint64_t sample = std::min<uint64_t>(n, 2000);
    int64_t far = wall_ms_int() + 3600000;
    double est =
        write_native(c, sample, true, [&](uint64_t) { return far; }) * double(n) / double(sample);
    c.flushall_masters();
    if (!burst && o.background > 0)
        printf("    native: %s background keys written in %.1f s\n",
               with_commas(double(o.background)).c_str(), write_background(c, o.background));
    std::vector<std::unique_ptr<NativeSubscriber>> subs;
    for (int port : c.ports) {
        subs.push_back(std::make_unique<NativeSubscriber>(port, n));
        subs.back()->start();
    }
    auto received = [&] {
        uint64_t s = 0;
        for (auto &sub : subs) s += sub->count();
        return s;
    };
    int64_t t0 = wall_ms_int() + int64_t(est * 1250) + lead_ms + 100;
    *first_deadline = t0;
    auto deadline = [&](uint64_t i) {
        return t0 + int64_t(double(spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
    };
    int64_t expired0 = 0;
    for (auto *m : c.masters) expired0 += info_int(*m, "stats", "expired_keys");
    double write_s = write_native(c, n, false, deadline);
    double gap = double(t0) - wall_ms();
    double last = double(deadline(n - 1));
    sleep_ms(int64_t(gap) - 200);
    Cpu a = c.cpu(), b;
    double ta = mono_s(), tb = 0;
    if (!burst) {
        sleep_ms(int64_t(last + 50 - wall_ms()));
        b = c.cpu();
        tb = mono_s();
    }
    double until = last + double(o.wait_ms);
    await_arrivals(received, n, until);
    if (burst) b = c.cpu();
    std::vector<double> late, at;
    int disconnects = 0;
    for (auto &sub : subs) {
        sub->stop();
        late.insert(late.end(), sub->late().begin(), sub->late().end());
        at.insert(at.end(), sub->at().begin(), sub->at().end());
        disconnects += sub->disconnects();
    }
    Delivery d = summarize(late, at, late.size(), n, until);
    d.write_s = write_s;
    d.gap_ms = gap;
    int64_t expired = -expired0;
    for (auto *m : c.masters) expired += info_int(*m, "stats", "expired_keys");
    printf(
        "    native:   %s plain keys in %.1f s, %s %.1f s after; expired_keys %s "
        "(3 masters), subscriber disconnects %d; %s: %s\n",
        with_commas(double(n)).c_str(), write_s, burst ? "deadline" : "first deadline", gap / 1000,
        with_commas(double(expired)).c_str(), disconnects,
        burst ? "until all received" : "during the spread",
        burst ? cpu_per_item(a, b, double(n), "subscribers").c_str()
              : cpu_util(a, b, tb - ta, "subscribers").c_str());
    fflush(stdout);
    return d;
}

Delivery lateness_native(const Options &o, const Cluster &c) {
    int64_t t0 = 0;
    return native_run(o, c, o.keys, o.lead_ms, o.spread_ms, false, &t0);
}

// ---- Deliveries per key (burst, failover) -----------------------------------------------

// Every delivery of a key "<prefix>:...:<i>" (i < n, the digits after the last ':'): which
// key, from which node, when, and whether it was the key's first delivery. Deliveries past
// `cap` are counted (written, distinct) but not recorded.
struct KeyRecorder {
    struct Rec {
        uint32_t key;
        int port;
        double at, late;
        int source, attempt;
        bool first;
    };
    KeyRecorder(char prefix, uint64_t n, uint64_t cap) : prefix(prefix), seen(n), recs(cap) {}
    const char prefix;
    std::vector<std::atomic<uint32_t>> seen;  // deliveries per key
    std::vector<Rec> recs;
    std::atomic<uint64_t> slot{0}, written{0}, distinct{0}, other{0};

    uint64_t count() const { return std::min<uint64_t>(written.load(), recs.size()); }
};

int key_handler(kw_event_t *ev, void *opaque) {
    double now = wall_ms();
    auto *r = static_cast<KeyRecorder *>(opaque);
    size_t len = 0;
    const char *key = static_cast<const char *>(kw_event_key(ev, &len));
    const char *end = key + len, *digits = end;
    while (digits > key && digits[-1] >= '0' && digits[-1] <= '9') digits--;
    uint64_t k = 0;
    for (const char *p = digits; p < end && k < r->seen.size(); p++)
        k = k * 10 + uint64_t(*p - '0');
    if (len < 3 || key[0] != r->prefix || key[1] != ':' || digits == end || digits[-1] != ':' ||
        k >= r->seen.size() || strcmp(kw_event_queue(ev), "keys") != 0) {
        r->other.fetch_add(1, std::memory_order_relaxed);
        return KW_RESULT_ACK;
    }
    const char *node = kw_event_node(ev);
    const char *colon = strrchr(node, ':');
    bool first = r->seen[k].fetch_add(1) == 0;
    uint64_t i = r->slot.fetch_add(1, std::memory_order_relaxed);
    if (i < r->recs.size())
        r->recs[i] = {uint32_t(k),
                      colon ? atoi(colon + 1) : 0,
                      now,
                      now - double(kw_event_deadline_ms(ev)),
                      int(kw_event_source(ev)),
                      kw_event_attempt(ev),
                      first};
    if (first) r->distinct.fetch_add(1);
    r->written.fetch_add(1, std::memory_order_release);
    return KW_RESULT_ACK;
}

// ---- 2. burst ----------------------------------------------------------------------------

struct ClusterBurst {
    Burst b;
    uint64_t lost = 0, duplicates = 0;
};

ClusterBurst burst_keywatch(const Options &o, const Cluster &c) {
    c.flushall_masters();
    uint64_t n = o.burst_keys;
    double est = estimate_track_seconds(c, o.threads, n);
    KeyRecorder rec('b', n, 2 * n);
    Engine engine(c.seed, key_handler, &rec);
    engine.start();
    int64_t deadline = wall_ms_int() + int64_t(est * 1250) + o.burst_lead_ms + 100;
    double write_s = track_parallel(
        c.seed, "", o.threads, 100, n,
        [&](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "b:%013lld:%07llu", static_cast<long long>(deadline),
                                   static_cast<unsigned long long>(i)));
        },
        [&](uint64_t) { return deadline - wall_ms_int(); });
    double gap = double(deadline) - wall_ms();
    double until = double(deadline + o.wait_ms);
    sleep_ms(int64_t(gap) - 200);
    for (auto *m : c.masters) m->command({"CONFIG", "RESETSTAT"});
    Cpu a = c.cpu();
    await_arrivals([&] { return rec.distinct.load(); }, n, until);
    while (engine.stat("items.acked") < int64_t(rec.written.load()) && wall_ms() < until)
        sleep_ms(5);
    double acked_by = wall_ms() - double(deadline);  // acks wait while claims are out
    Cpu b = c.cpu();
    sleep_ms(500);  // a duplicate delivery close behind
    double evalsha_us = 0;
    for (auto *m : c.masters) evalsha_us += usec_per_call(*m, "evalsha") / double(c.masters.size());
    int64_t sweeps = engine.stat("sweep.calls");
    engine.print_stats();
    for (auto *m : c.masters) print_commandstats(*m, "keywatch burst, one master");
    engine.stop();
    // First deliveries: lateness, sources, and per master the keys and the last start.
    std::vector<double> late, at;
    uint64_t src[4] = {0, 0, 0, 0};
    std::vector<uint64_t> keys_of(c.masters.size());
    std::vector<double> last_of(c.masters.size(), -kInf);
    for (uint64_t i = 0; i < rec.count(); i++) {
        const KeyRecorder::Rec &r = rec.recs[i];
        if (!r.first) continue;
        late.push_back(r.late);
        at.push_back(r.at);
        if (r.source >= 0 && r.source < 4) src[r.source]++;
        int m = c.index_of_port(r.port);
        if (m < 0) continue;
        keys_of[size_t(m)]++;
        last_of[size_t(m)] = std::max(last_of[size_t(m)], r.at - double(deadline));
    }
    Delivery d = summarize(late, at, late.size(), n, until);
    for (int s = 0; s < 4; s++) d.src[s] = src[s];
    d.write_s = write_s;
    d.gap_ms = gap;
    ClusterBurst out;
    out.b = finish_burst(d, deadline);
    out.lost = n - rec.distinct.load();
    out.duplicates = rec.written.load() - rec.distinct.load();
    std::string per;
    for (size_t m = 0; m < c.masters.size(); m++)
        per += (m ? " / " : "") + with_commas(double(keys_of[m])) + " by +" + fmt_ms(last_of[m]);
    printf(
        "    keywatch: %s tracked in %.1f s (%d clients), deadline %.1f s after; sources: sweep "
        "%s, notification %s, lease %s; per master (keys, all in by): %s; sweep calls %s; "
        "all acked by +%s, until then %s (3 masters); EVALSHA %.0f us/call\n",
        with_commas(double(n)).c_str(), write_s, o.threads, gap / 1000,
        with_commas(double(src[KW_SOURCE_SWEEP])).c_str(),
        with_commas(double(src[KW_SOURCE_NOTIFICATION])).c_str(),
        with_commas(double(src[KW_SOURCE_LEASE_EXPIRED])).c_str(), per.c_str(),
        with_commas(double(sweeps)).c_str(), fmt_ms(acked_by).c_str(),
        cpu_per_item(a, b, double(n), "engine").c_str(), evalsha_us);
    fflush(stdout);
    return out;
}

Burst burst_native(const Options &o, const Cluster &c) {
    int64_t deadline = 0;
    Delivery d = native_run(o, c, o.burst_keys, o.burst_lead_ms, 0, true, &deadline);
    return finish_burst(d, deadline);
}

// ---- reshard --------------------------------------------------------------------------------

struct Reshard {
    Delivery moved, still;  // keys in slots migrated during the run, and the others
    uint64_t lost = 0, duplicates = 0, moved_keys = 0;
    double migrate_ms = 0;  // median time one slot's migration took
};

// Moves `count` slots that hold keys due after `not_before_ms` to the next master, each
// step by step as redis-cli does (RedisCluster::migrate_slot); marks them in *moved.
void move_slots(Cluster &c, const std::vector<int64_t> &deadline_of_slot, int count,
                int64_t not_before_ms, std::vector<bool> *moved, std::vector<double> *took) {
    for (int slot = 0; slot < int(keywatch::kSlotCount) && count > 0; slot++) {
        if ((*moved)[size_t(slot)] || deadline_of_slot[size_t(slot)] < not_before_ms) continue;
        size_t from = c.master_of_slot[size_t(slot)], to = (from + 1) % c.masters.size();
        int to_node = c.rc->index_of_port(c.ports[to]);
        double t = mono_s();
        c.rc->migrate_slot(slot, size_t(to_node));
        took->push_back((mono_s() - t) * 1000);
        c.master_of_slot[size_t(slot)] = uint8_t(to);
        (*moved)[size_t(slot)] = true;
        count--;
    }
}

// Tracked keys "r:<deadline>:<i>" over every master, deadlines spread over spread_ms;
// three times during the spread, reshard_slots slots holding keys still to come move to
// another master. Lateness of keys in moved slots beside the others; duplicates; losses.
Reshard reshard_round(const Options &o, Cluster &c) {
    c.flushall_masters();
    uint64_t n = o.reshard_keys;
    double est = estimate_track_seconds(c, o.threads, n);
    KeyRecorder rec('r', n, 2 * n);
    Engine engine(c.seed, key_handler, &rec);
    engine.start();
    int64_t first = wall_ms_int() + int64_t(est * 1250) + o.lead_ms;
    auto deadline_of = [&](uint64_t i) { return first + int64_t(i) * o.spread_ms / int64_t(n); };
    auto name = [&](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "r:%013lld:%07llu", static_cast<long long>(deadline_of(i)),
                               static_cast<unsigned long long>(i)));
    };
    std::vector<int64_t> latest(keywatch::kSlotCount, -1);  // the last deadline per slot
    std::vector<int> slot_of(n);
    char buf[64];
    for (uint64_t i = 0; i < n; i++) {
        slot_of[i] = keywatch::key_slot(std::string_view(buf, name(i, buf)));
        latest[size_t(slot_of[i])] = std::max(latest[size_t(slot_of[i])], deadline_of(i));
    }
    track_parallel(c.seed, "", o.threads, 100, n, name,
                   [&](uint64_t i) { return deadline_of(i) - wall_ms_int(); });
    std::vector<bool> moved(keywatch::kSlotCount, false);
    std::vector<double> took;
    for (int step = 1; step <= 3; step++) {
        int64_t at = first + o.spread_ms * step / 4;
        sleep_ms(std::max<int64_t>(0, at - wall_ms_int()));
        // Slots whose keys all come due well after the move: the move is what is measured.
        move_slots(c, latest, o.reshard_slots, at + 1000, &moved, &took);
    }
    double until = double(first + o.spread_ms + o.wait_ms);
    await_arrivals([&] { return rec.distinct.load(); }, n, until);
    while (engine.stat("items.acked") < int64_t(rec.written.load()) && wall_ms() < until)
        sleep_ms(5);
    sleep_ms(lease_ms() + 2000);  // a redelivery after a lost ack would show by now
    engine.stop();
    std::vector<double> late_moved, at_moved, late_still, at_still;
    Reshard out;
    for (uint64_t i = 0; i < rec.count(); i++) {
        const KeyRecorder::Rec &r = rec.recs[i];
        if (!r.first) continue;
        bool m = moved[size_t(slot_of[r.key])];
        (m ? late_moved : late_still).push_back(r.late);
        (m ? at_moved : at_still).push_back(r.at);
    }
    for (uint64_t i = 0; i < n; i++) out.moved_keys += moved[size_t(slot_of[i])];
    out.moved = summarize(late_moved, at_moved, late_moved.size(), out.moved_keys, until);
    out.still = summarize(late_still, at_still, late_still.size(), n - out.moved_keys, until);
    out.lost = n - rec.distinct.load();
    out.duplicates = rec.written.load() - rec.distinct.load();
    out.migrate_ms = median(took);
    printf(
        "    keywatch: %s tracked over %.0f s; %zu slots moved in 3 steps (one slot's "
        "migration took %s, median) holding %s keys; lost %s, duplicates %s\n",
        with_commas(double(n)).c_str(), double(o.spread_ms) / 1000, took.size(),
        fmt_ms(out.migrate_ms).c_str(), with_commas(double(out.moved_keys)).c_str(),
        with_commas(double(out.lost)).c_str(), with_commas(double(out.duplicates)).c_str());
    print_delivery("moved", out.moved, false);
    print_delivery("others", out.still, false);
    fflush(stdout);
    return out;
}

// ---- 3. track throughput ------------------------------------------------------------------

struct Track {
    double kw = 0, raw = 0, raw_in_order = 0;
};

Track track_round(const Options &o, const Cluster &c, int round) {
    uint64_t pass = (o.track_ops / 2) - (o.track_ops / 2) % uint64_t(o.threads);
    std::vector<char> keys(pass * 16);
    for (uint64_t i = 0; i < pass; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "t%015llu", static_cast<unsigned long long>(i));
        memcpy(&keys[i * 16], buf, 16);
    }
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    const char *ttl = "3600000";
    std::string sha;
    for (auto *m : c.masters) {
        sha = m->command({"SCRIPT", "LOAD", kEquivalentScript});
        if (sha.size() != 40) throw BenchError("SCRIPT LOAD: " + sha);
    }
    const keywatch::SlotTags &tags = keywatch::SlotTags::instance();

    auto kw = [&] {
        std::vector<std::unique_ptr<Client>> clients(static_cast<size_t>(o.threads));
        return run_threads(
            o.threads, pass, o.batch,
            [&](int t) {
                // Connected, topology read and clocks measured before the clock starts.
                clients[size_t(t)] = std::make_unique<Client>(c.seed);
                Client &cl = *clients[size_t(t)];
                size_t count = 0;
                cl.check(kw_client_pipeline_begin(cl.c), "kw_client_pipeline_begin");
                cl.check(kw_client_pipeline_end(cl.c, nullptr, 0, &count), "pipeline_end");
            },
            [&](int t, uint64_t b, uint64_t e) {
                Client &cl = *clients[size_t(t)];
                int statuses[1024];
                cl.check(kw_client_pipeline_begin(cl.c), "kw_client_pipeline_begin");
                for (uint64_t i = b; i < e; i++)
                    cl.check(
                        kw_client_track(cl.c, &keys[i * 16], 16, kValue, 16, 3600000, 0, nullptr),
                        "kw_client_track");
                size_t count = 0;
                cl.check(kw_client_pipeline_end(cl.c, statuses, 1024, &count),
                         "kw_client_track (pipelined)");
            });
    };
    auto raw = [&](bool flush_first) {
        std::vector<std::unique_ptr<RoutedPipe>> pipes(static_cast<size_t>(o.threads));
        return run_threads(
            o.threads, pass, o.batch,
            [&](int t) { pipes[size_t(t)] = std::make_unique<RoutedPipe>(c); },
            [&](int t, uint64_t b, uint64_t e) {
                RoutedPipe &p = *pipes[size_t(t)];
                char score[32], zkey[32];
                size_t score_len = size_t(snprintf(
                    score, sizeof score, "%lld", static_cast<long long>(wall_ms_int() + 3600000)));
                const char *argv[8] = {"EVALSHA", sha.data(), "2", nullptr,
                                       zkey,      kValue,     ttl, score};
                size_t lens[8] = {7, sha.size(), 1, 16, 0, 16, 7, score_len};
                for (uint64_t i = b; i < e; i++) {
                    const char *key = &keys[i * 16];
                    int slot = keywatch::key_slot(std::string_view(key, 16));
                    argv[3] = key;
                    lens[4] = size_t(
                        snprintf(zkey, sizeof zkey, "bench:{%s}:due", tags.tag(slot).c_str()));
                    p.append(key, 16, 8, argv, lens);
                }
                p.finish(flush_first);
            });
    };
    const char *names[3] = {"kw_client_track", "raw EVALSHA", "raw, in order"};
    double secs[3] = {0, 0, 0}, redis_cpu[3] = {0, 0, 0}, self_cpu[3] = {0, 0, 0};
    double per_call[3] = {0, 0, 0};  // EVALSHA usec_per_call, mean over masters and passes
    std::vector<int> order = {0, 1, 2};
    if (round % 2) std::reverse(order.begin(), order.end());
    std::vector<int> passes = order;
    passes.insert(passes.end(), order.rbegin(), order.rend());
    for (int v : passes) {
        c.flushall_masters();
        for (auto *m : c.masters) m->command({"CONFIG", "RESETSTAT"});
        Cpu a = c.cpu();
        secs[v] += v == 0 ? kw() : raw(v == 1);
        Cpu b = c.cpu();
        redis_cpu[v] += b.redis - a.redis;
        self_cpu[v] += b.self - a.self;
        for (auto *m : c.masters)
            per_call[v] += usec_per_call(*m, "evalsha") / double(2 * c.masters.size());
        print_commandstats(*c.masters[0], names[v]);
    }
    c.flushall_masters();
    Track out;
    double ops = double(2 * pass);
    out.kw = ops / secs[0];
    out.raw = ops / secs[1];
    out.raw_in_order = ops / secs[2];
    printf(
        "    kw_client_track %-13s raw EVALSHA %-13s raw, replies in order %-13s kw/raw %s (%d "
        "threads, "
        "pipelines of %d, 2 passes of %s ops each)\n",
        fmt_rate(out.kw).c_str(), fmt_rate(out.raw).c_str(), fmt_rate(out.raw_in_order).c_str(),
        fmt_pct(out.kw / out.raw).c_str(), o.threads, o.batch, with_commas(double(pass)).c_str());
    for (int v = 0; v < 3; v++)
        printf(
            "      CPU per op, %-14s redis (3 masters) %.1f us (EVALSHA %.1f us/call), clients "
            "%.1f us\n",
            names[v], redis_cpu[v] * 1e6 / ops, per_call[v], self_cpu[v] * 1e6 / ops);
    fflush(stdout);
    return out;
}

// ---- 4. end to end ------------------------------------------------------------------------

struct E2e {
    double kw = 0, base = 0;  // items per second
};

double e2e_keywatch(const Options &o, const Cluster &c) {
    c.flushall_masters();
    uint64_t n = o.e2e_keys;
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "e%015llu", static_cast<unsigned long long>(i)));
    };
    double write_s =
        track_parallel(c.seed, "", o.threads, 100, n, key, [](uint64_t) { return int64_t(1); });
    sleep_ms(500);  // all due
    Engine engine(c.seed, noop_handler, nullptr);
    for (auto *m : c.masters) m->command({"CONFIG", "RESETSTAT"});
    auto s0 = snapshot(c);
    Cpu a = c.cpu();
    double t0 = mono_s();
    engine.start();
    double started = mono_s() - t0;
    while (engine.stat("items.acked") < int64_t(n) && mono_s() - t0 < 120) sleep_ms(1);
    double s = mono_s() - t0;
    Cpu b = c.cpu();
    Window w = window(s0, snapshot(c));
    int64_t acked = engine.stat("items.acked"), sweeps = engine.stat("sweep.calls");
    double evalsha_us = 0;
    for (auto *m : c.masters) evalsha_us += usec_per_call(*m, "evalsha") / double(c.masters.size());
    engine.print_stats();
    for (auto *m : c.masters) print_commandstats(*m, "keywatch e2e, one master");
    engine.stop();
    printf(
        "    keywatch: %s tracked in %.1f s; engine started in %.0f ms; %s acked in %.2f s; "
        "sweep calls %s (%.1f items per call); EVALSHA per master %s, %.0f us/call; %s "
        "(3 masters)\n",
        with_commas(double(n)).c_str(), write_s, started * 1000, with_commas(double(acked)).c_str(),
        s, with_commas(double(sweeps)).c_str(), sweeps ? double(acked) / double(sweeps) : 0.0,
        per_master(std::vector<double>(w.evalsha.begin(), w.evalsha.end()), "%.0f").c_str(),
        evalsha_us, cpu_per_item(a, b, double(n), "engine").c_str());
    fflush(stdout);
    return double(std::min<int64_t>(acked, int64_t(n))) / s;
}

// One due set per master ("bench:{<tag of the master>}:due", each member in the set of its
// own slot's master), popped by one thread per master at once.
double e2e_baseline(const Options &o, const Cluster &c) {
    c.flushall_masters();
    uint64_t n = o.e2e_keys;
    size_t masters = c.masters.size();
    std::vector<std::string> due(masters);
    for (size_t m = 0; m < masters; m++) due[m] = "bench:{" + c.tag_of_master(m) + "}:due";
    char key[32], score[32];
    size_t score_len =
        size_t(snprintf(score, sizeof score, "%lld", static_cast<long long>(wall_ms_int() - 1000)));
    {
        RoutedPipe pipe(c);
        const char *argv[4] = {"ZADD", nullptr, score, key};
        size_t lens[4] = {4, 0, score_len, 0};
        for (uint64_t i = 0; i < n; i++) {
            lens[3] =
                size_t(snprintf(key, sizeof key, "e%015llu", static_cast<unsigned long long>(i)));
            size_t m = c.master_for_key(key, lens[3]);
            argv[1] = due[m].c_str(), lens[1] = due[m].size();
            pipe.append(key, lens[3], 4, argv, lens);
            if ((i + 1) % 1000 == 0 || i + 1 == n) pipe.finish(true);
        }
    }
    std::string sha;
    for (auto *m : c.masters) {
        sha = m->command({"SCRIPT", "LOAD", kPopScript});
        if (sha.size() != 40) throw BenchError("SCRIPT LOAD: " + sha);
    }
    std::string now = std::to_string(wall_ms_int());
    std::vector<ContextPtr> conns(masters);
    std::vector<uint64_t> popped(masters);
    const int64_t batch = engine_option("sweep.batch");
    Cpu a = c.cpu();
    double s = run_threads(
        int(masters), masters, 1,
        [&](int t) { conns[size_t(t)] = connect_sync(c.ports[size_t(t)]); },
        [&](int t, uint64_t, uint64_t) {
            popped[size_t(t)] = pop_due(conns[size_t(t)].get(), sha, due[size_t(t)], now, n, batch);
        });
    Cpu b = c.cpu();
    uint64_t total = 0;
    for (uint64_t p : popped) total += p;
    printf(
        "    baseline: %s due members popped in %.2f s (Lua ZRANGEBYSCORE+ZREM, %lld per call, "
        "one thread per master: %s); %s (3 masters)\n",
        with_commas(double(total)).c_str(), s, static_cast<long long>(batch),
        per_master(std::vector<double>(popped.begin(), popped.end()), "%.0f").c_str(),
        cpu_per_item(a, b, double(total), "client").c_str());
    fflush(stdout);
    return double(total) / s;
}

// ---- 5. failover --------------------------------------------------------------------------

struct Failover {
    double to_first = kInf, to_promoted = kInf;  // ms after the kill
    uint64_t keys = 0, victim_keys = 0, distinct = 0, duplicates = 0, lease_redeliveries = 0;
    double victim_max_late = 0, others_max_late = 0, others_p99_late = 0;
    int64_t inflight_left = 0, stuck = 0;  // in flight at the end; of those, past lease
};

// The port of the first replica of a master (INFO replication "slave0:ip=...,port=N,...").
int replica_port(const RedisProcess &master) {
    std::string info = master.command({"INFO", "replication"});
    const char *v = info_value(info, "slave0");
    const char *p = v ? strstr(v, "port=") : nullptr;
    if (!p) throw BenchError("master " + std::to_string(master.port()) + " has no replica");
    return atoi(p + 5);
}

// Every write made so far on each master has reached its replica: a marker write in one of
// the master's slots, then WAIT for one replica (the replication stream is in order).
bool wait_replicas(const Cluster &c, int timeout_ms) {
    bool ok = true;
    for (size_t m = 0; m < c.masters.size(); m++) {
        std::string key = "bench:wait:{" + c.tag_of_master(m) + "}";
        ContextPtr ctx = connect_sync(c.ports[m]);
        auto *r = static_cast<redisReply *>(redisCommand(ctx.get(), "SET %s 1", key.c_str()));
        if (r) freeReplyObject(r);
        r = static_cast<redisReply *>(redisCommand(ctx.get(), "WAIT 1 %d", timeout_ms));
        ok = ok && r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1;
        if (r) freeReplyObject(r);
    }
    return ok;
}

bool is_master(redisContext *c) {
    auto *r = static_cast<redisReply *>(redisCommand(c, "ROLE"));
    bool m = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    if (r) freeReplyObject(r);
    return m;
}

// Items in flight in the key-tracking queue, over every master (kw_client_inspect_json).
int64_t inflight(Client &cl) {
    char *json = nullptr;
    if (kw_client_inspect_json(cl.c, &json) != KW_OK) return -1;
    std::string j = json;
    kw_free(json);
    // Keys are sorted: the per-node figures ("nodes") come before the sums ("queues").
    size_t sums = j.find("\"now_ms\":");
    size_t q = j.find("\"queue\":\"keys\"", sums == std::string::npos ? 0 : sums);
    size_t obj = q == std::string::npos ? std::string::npos : j.rfind('{', q);
    size_t f = obj == std::string::npos ? std::string::npos : j.find("\"inflight\":", obj);
    return f == std::string::npos ? 0 : std::strtoll(j.c_str() + f + 11, nullptr, 10);
}

Failover failover_round(const Options &o, Cluster &c, int round) {
    c.flushall_masters();
    uint64_t n = o.fo_keys;
    double est = estimate_track_seconds(c, o.threads, n);
    KeyRecorder rec('f', n, 4 * n);
    Engine engine(c.seed, key_handler, &rec);
    engine.start();
    size_t victim_idx = size_t(round) % c.masters.size();
    RedisProcess &victim = *c.masters[victim_idx];
    int new_port = replica_port(victim);
    int64_t kill_at = wall_ms_int() + int64_t(est * 1250) + o.fo_before_ms + 800;
    auto deadline = [&](uint64_t i) {
        return kill_at - o.fo_before_ms +
               int64_t(double(o.fo_before_ms + o.fo_after_ms) * double(i) /
                       double(n > 1 ? n - 1 : 1));
    };
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "f:%07llu", static_cast<unsigned long long>(i)));
    };
    double write_s = track_parallel(c.seed, "", o.threads, 100, n, key,
                                    [&](uint64_t i) { return deadline(i) - wall_ms_int(); });
    double written_at = wall_ms(), rs = mono_s();
    bool replicated = wait_replicas(c, 10000);
    double repl_ms = (mono_s() - rs) * 1000;
    std::vector<bool> on_victim(n);
    Failover f;
    f.keys = n;
    for (uint64_t i = 0; i < n; i++) {
        char buf[64];
        size_t len = key(i, buf);
        on_victim[i] = c.master_for_key(buf, len) == victim_idx;
        f.victim_keys += on_victim[i];
    }
    sleep_ms(int64_t(double(kill_at) - wall_ms()));
    double t_kill = wall_ms();
    victim.kill9();
    ContextPtr watch = connect_sync(new_port);
    while (!is_master(watch.get()) && wall_ms() - t_kill < 60000) sleep_ms(5);
    double t_promoted = wall_ms();
    double last = double(deadline(n - 1));
    double until = last + double(o.wait_ms);
    while (rec.distinct.load() < n && wall_ms() < until) sleep_ms(20);
    // Claims made on the dead master whose acks it had not replicated come back when their
    // leases end: wait for them (as long as the wait allows) to count the duplicates.
    Client cl(c.masters[(victim_idx + 1) % c.masters.size()]->url());  // the seed may be dead
    f.inflight_left = inflight(cl);
    double lease_end = t_kill + double(lease_ms()) + 3000;
    while (f.inflight_left > 0 && wall_ms() < std::max(until, lease_end)) {
        sleep_ms(500);
        f.inflight_left = inflight(cl);
    }
    if (wall_ms() >= lease_end) f.stuck = f.inflight_left;
    sleep_ms(200);
    engine.stop();
    if (is_master(watch.get())) f.to_promoted = t_promoted - t_kill;
    uint64_t count = rec.count();
    std::vector<double> others;
    double first_victim_key = kInf;
    for (uint64_t i = 0; i < count; i++) {
        const KeyRecorder::Rec &r = rec.recs[i];
        if (r.port == new_port && r.at >= t_kill) f.to_first = std::min(f.to_first, r.at - t_kill);
        if (on_victim[r.key] && r.at >= t_kill && r.port != victim.port())
            first_victim_key = std::min(first_victim_key, r.at - t_kill);
        if (r.source == KW_SOURCE_LEASE_EXPIRED) f.lease_redeliveries++;
        if (r.attempt != 1) continue;
        if (on_victim[r.key])
            f.victim_max_late = std::max(f.victim_max_late, r.late);
        else
            others.push_back(r.late);
    }
    f.distinct = rec.distinct.load();
    f.duplicates = count - f.distinct;
    std::sort(others.begin(), others.end());
    f.others_max_late = others.empty() ? std::nan("") : others.back();
    f.others_p99_late = percentile(others, others.size(), 0.99);
    printf(
        "    %s keys (%s on the killed master %d) tracked in %.1f s; replicas caught up in "
        "%.0f ms%s; kill -9 %.1f s after the writing, %+.0f ms from the plan; replica %d "
        "promoted after %s; first "
        "delivery from it after %s (of a killed master's key from any other node: %s)\n",
        with_commas(double(n)).c_str(), with_commas(double(f.victim_keys)).c_str(), victim.port(),
        write_s, repl_ms, replicated ? "" : " (NOT caught up in 10 s)",
        (t_kill - written_at) / 1000, t_kill - double(kill_at), new_port,
        fmt_ms(f.to_promoted).c_str(), fmt_ms(f.to_first).c_str(),
        fmt_ms(first_victim_key).c_str());
    printf(
        "    delivered %s of %s (lost %s), duplicates %s (lease-expired redeliveries %s), "
        "in flight at the end %lld%s; lateness: the killed master's keys max %s, other keys "
        "p99 %s max %s\n",
        with_commas(double(f.distinct)).c_str(), with_commas(double(n)).c_str(),
        with_commas(double(n - f.distinct)).c_str(), with_commas(double(f.duplicates)).c_str(),
        with_commas(double(f.lease_redeliveries)).c_str(), static_cast<long long>(f.inflight_left),
        f.stuck ? " (their leases ended long ago: not redelivered)" : "",
        fmt_ms(f.victim_max_late).c_str(), fmt_ms(f.others_p99_late).c_str(),
        fmt_ms(f.others_max_late).c_str());
    if (env().verbose)
        printf("    kill -9 at %s, promoted at %s, first delivery from it at %s\n",
               fmt_clock(t_kill).c_str(), fmt_clock(t_promoted).c_str(),
               fmt_clock(t_kill + f.to_first).c_str());
    fflush(stdout);
    return f;
}

// ---- Main ---------------------------------------------------------------------------------

struct Results {
    std::vector<Delivery> lat_kw, lat_native;
    std::vector<Idle> idle;
    std::vector<ClusterBurst> burst_kw;
    std::vector<Burst> burst_native;
    std::vector<Track> track;
    std::vector<E2e> e2e;
    std::vector<Failover> failover;
    std::vector<Reshard> reshard;
    double cluster_start_s = 0;
};

void row(const std::string &name, const std::string &kw, const std::string &base,
         const std::string &target, const char *verdict) {
    printf("  %-44s %-24s %-30s %-16s %s\n", name.c_str(), kw.c_str(), base.c_str(), target.c_str(),
           verdict);
}

const char *verdict(bool pass) {
    return pass ? "PASS" : "FAIL";
}

std::string fmt_num(double v, const char *fmt) {
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

void summary(const Options &o, const Results &r, int node_timeout_ms) {
    printf("\n== Summary: medians of %d round(s), 3 masters + 3 replicas ==\n", o.rounds);
    row("measurement", "keywatch", "baseline", "target", "verdict");
    if (!r.lat_kw.empty()) {
        auto p = [](const Delivery &d) { return d.p50; };
        auto g = [](const Delivery &d) { return d.p99; };
        auto m = [](const Delivery &d) { return d.max; };
        auto w = [](const Delivery &d) { return double(d.within) / double(d.n); };
        double kp99 = med(r.lat_kw, g), kmax = med(r.lat_kw, m), kw = med(r.lat_kw, w);
        bool native = !r.lat_native.empty();
        auto nat = [&](auto f, bool pct) {
            if (!native) return std::string("-");
            double v = med(r.lat_native, f);
            return "native " + (pct ? fmt_pct(v) : fmt_ms(v));
        };
        row("lateness p50 (" + with_commas(double(o.keys)) + " keys over " +
                fmt_num(double(o.spread_ms) / 1000, "%.0f") + " s)",
            fmt_ms(med(r.lat_kw, p)), nat(p, false), "-", "-");
        row("lateness p99", fmt_ms(kp99), nat(g, false), "<= 50 ms", verdict(kp99 <= 50));
        row("lateness max", fmt_ms(kmax), nat(m, false), "<= 250 ms", verdict(kmax <= 250));
        row("delivered by last deadline + " + fmt_ms(double(o.wait_ms)), fmt_pct(kw), nat(w, true),
            "100%", verdict(kw >= 1.0));
    }
    if (!r.idle.empty()) {
        auto eng = [](const Idle &i) { return i.mean(i.engine.rate); };
        auto base = [](const Idle &i) { return i.mean(i.base.rate); };
        row("idle: commands/s per master (mean)", fmt_num(med(r.idle, eng), "%.2f"),
            "no engine " + fmt_num(med(r.idle, base), "%.2f"), "-", "-");
        row("idle: engine's own cost, cmd/s/master",
            fmt_num(med(r.idle, [](const Idle &i) { return i.engine_cost_mean(); }), "%.2f") +
                " (max " +
                fmt_num(med(r.idle, [](const Idle &i) { return i.engine_cost_max(); }), "%.2f") +
                ")",
            "engine minus no engine", "-", "-");
        for (auto &i : r.idle) {
            if (!i.wave_measured) continue;
            double total = 0;
            for (int64_t e : i.wave.evalsha) total += double(e);
            row("after delivery: claim_due at lease ends", fmt_num(total, "%.0f") + " EVALSHA",
                "in " + fmt_num(i.wave.seconds, "%.0f") + " s, round 1, 3 masters", "-", "-");
        }
    }
    if (!r.burst_kw.empty()) {
        auto l = [](const ClusterBurst &b) { return b.b.last_ms; };
        auto p = [](const ClusterBurst &b) { return b.b.d.p99; };
        auto rt = [](const ClusterBurst &b) { return b.b.rate; };
        auto nl = [](const Burst &b) { return b.last_ms; };
        auto np = [](const Burst &b) { return b.d.p99; };
        auto nr = [](const Burst &b) { return b.rate; };
        double last = med(r.burst_kw, l);
        row("burst: all started by deadline + (= max)", fmt_ms(last),
            "native " + fmt_ms(med(r.burst_native, nl)), "<= 1 s", verdict(last <= 1000));
        row("burst: lateness p99 (" + with_commas(double(o.burst_keys)) + " keys)",
            fmt_ms(med(r.burst_kw, p)), "native " + fmt_ms(med(r.burst_native, np)), "-", "-");
        row("burst: rate", fmt_rate(med(r.burst_kw, rt)),
            "native " + fmt_rate(med(r.burst_native, nr)), "-", "-");
        uint64_t lost = 0, dups = 0, delivered = 0, nlost = 0;
        for (auto &b : r.burst_kw) {
            lost += b.lost;
            dups += b.duplicates;
            delivered += b.b.d.delivered;
        }
        for (auto &b : r.burst_native) nlost += b.d.n - b.d.delivered;
        row("burst: keys lost (all rounds)", with_commas(double(lost)),
            "native " + with_commas(double(nlost)), "0", verdict(lost == 0));
        row("burst: delivered, duplicates (all rounds)",
            with_commas(double(delivered)) + ", " + with_commas(double(dups)),
            "of " + with_commas(double(o.burst_keys * r.burst_kw.size())), "-", "-");
    }
    if (!r.track.empty()) {
        double ratio = med(r.track, [](const Track &t) { return t.kw / t.raw; });
        row("track throughput", fmt_rate(med(r.track, [](const Track &t) { return t.kw; })),
            "EVALSHA " + fmt_rate(med(r.track, [](const Track &t) { return t.raw; })),
            ">= 80% of raw", verdict(ratio >= 0.8));
        row("  kw / raw EVALSHA (per-round ratio)", fmt_pct(ratio),
            "in order " + fmt_rate(med(r.track, [](const Track &t) { return t.raw_in_order; })),
            "-", "-");
    }
    if (!r.e2e.empty()) {
        double kw = med(r.e2e, [](const E2e &e) { return e.kw; });
        row("expiries handled end to end (" + with_commas(double(o.e2e_keys)) + ")", fmt_rate(kw),
            "Lua pop " + fmt_rate(med(r.e2e, [](const E2e &e) { return e.base; })), ">= 50,000/s",
            verdict(kw >= 50000));
    }
    if (!r.reshard.empty()) {
        auto p99 = [](const Reshard &x, bool moved) { return (moved ? x.moved : x.still).p99; };
        auto mx = [](const Reshard &x, bool moved) { return (moved ? x.moved : x.still).max; };
        double mp99 = med(r.reshard, [&](const Reshard &x) { return p99(x, true); });
        row("reshard: p99 lateness, keys in moved slots", fmt_ms(mp99),
            "others " + fmt_ms(med(r.reshard, [&](const Reshard &x) { return p99(x, false); })),
            "<= 50 ms", verdict(mp99 <= 50));
        row("reshard: max lateness, keys in moved slots",
            fmt_ms(med(r.reshard, [&](const Reshard &x) { return mx(x, true); })),
            "others " + fmt_ms(med(r.reshard, [&](const Reshard &x) { return mx(x, false); })), "-",
            "-");
        uint64_t lost = 0, dups = 0;
        for (auto &x : r.reshard) {
            lost += x.lost;
            dups += x.duplicates;
        }
        row("reshard: duplicates / lost (all rounds)",
            with_commas(double(dups)) + " / " + with_commas(double(lost)), "-", "0 / 0",
            verdict(dups == 0 && lost == 0));
    }
    if (!r.failover.empty()) {
        double first = med(r.failover, [](const Failover &f) { return f.to_first; });
        double prom = med(r.failover, [](const Failover &f) { return f.to_promoted; });
        row("failover: kill -9 -> first delivery", fmt_ms(first),
            "node-timeout " + std::to_string(node_timeout_ms) + " ms", "-", "-");
        std::string each;
        for (auto &f : r.failover) each += (each.empty() ? "" : " / ") + fmt_ms(f.to_first);
        row("  per round", each, "", "", "");
        row("  kill -9 -> replica promoted (Redis)", fmt_ms(prom), "-", "-", "-");
        row("  promoted -> first delivery (keywatch)",
            fmt_ms(med(r.failover, [](const Failover &f) { return f.to_first - f.to_promoted; })),
            "-", "-", "-");
        uint64_t lost = 0, dups = 0, keys = 0;
        for (auto &f : r.failover) {
            lost += f.keys - f.distinct;
            dups += f.duplicates;
            keys += f.keys;
        }
        row("failover: keys lost (all rounds)", with_commas(double(lost)),
            "of " + with_commas(double(keys)), "0", verdict(lost == 0));
        row("failover: duplicates (all rounds)", with_commas(double(dups)), "-", "-", "-");
        int64_t stuck = 0;
        for (auto &f : r.failover) stuck += f.stuck;
        row("failover: in flight past lease (all rounds)", with_commas(double(stuck)),
            "never redelivered", "-", "-");
    }
    printf("  (cluster start: %.1f s per round, median)\n", r.cluster_start_s);
}

void run(const Options &o) {
    Results res;
    auto want = [&](const char *name) { return o.only.count(name) != 0; };
    std::vector<double> starts;
    int node_timeout = RedisCluster::Options().node_timeout_ms;
    for (int round = 0; round < o.rounds; round++) {
        printf("\n== Round %d/%d ==\n", round + 1, o.rounds);
        fflush(stdout);
        double t = mono_s();
        auto c = start_cluster(o.notify);
        node_timeout = c->opts.node_timeout_ms;
        starts.push_back(mono_s() - t);
        printf("  cluster up in %.1f s: masters on ports %d, %d, %d; seed %s\n", starts.back(),
               c->ports[0], c->ports[1], c->ports[2], c->seed.c_str());
        if (want("lateness") || want("idle")) {
            printf("  lateness: %s tracked keys over %.0f s on 3 masters%s\n",
                   with_commas(double(o.keys)).c_str(), double(o.spread_ms) / 1000,
                   want("idle") ? "; then idle" : "");
            fflush(stdout);
            Idle idle;
            Idle *ip = want("idle") ? &idle : nullptr;
            bool wave = round == 0;
            Delivery kw, nat;
            bool native = want("lateness");
            if (round % 2 == 0) {
                if (native) nat = lateness_native(o, *c);
                if (ip) idle.base = measure_base(o, *c);
                kw = lateness_keywatch(o, *c, ip, wave);
            } else {
                kw = lateness_keywatch(o, *c, ip, wave);
                if (ip) idle.base = measure_base(o, *c);
                if (native) nat = lateness_native(o, *c);
            }
            if (want("lateness")) {
                print_delivery("keywatch", kw, false);
                print_delivery("native", nat, true);
                res.lat_kw.push_back(kw);
                res.lat_native.push_back(nat);
            }
            if (ip) {
                printf("  idle (nothing due):\n");
                print_window("engine", idle.engine);
                print_window("base", idle.base);
                res.idle.push_back(idle);
            }
            fflush(stdout);
        }
        if (want("burst")) {
            printf("  burst: %s tracked keys sharing one deadline, on 3 masters\n",
                   with_commas(double(o.burst_keys)).c_str());
            fflush(stdout);
            ClusterBurst kw;
            Burst nat;
            if (round % 2 == 0) {
                kw = burst_keywatch(o, *c);
                nat = burst_native(o, *c);
            } else {
                nat = burst_native(o, *c);
                kw = burst_keywatch(o, *c);
            }
            c->flushall_masters();
            print_burst("keywatch", kw.b);
            printf("    %-9s lost %s, duplicates %s\n", "", with_commas(double(kw.lost)).c_str(),
                   with_commas(double(kw.duplicates)).c_str());
            print_burst("native", nat);
            res.burst_kw.push_back(kw);
            res.burst_native.push_back(nat);
            fflush(stdout);
        }
        if (want("track")) {
            printf("  track throughput\n");
            fflush(stdout);
            res.track.push_back(track_round(o, *c, round));
        }
        if (want("e2e")) {
            printf("  end to end: %s due tracked keys on 3 masters, no-op handler\n",
                   with_commas(double(o.e2e_keys)).c_str());
            fflush(stdout);
            E2e e;
            if (round % 2 == 0) {
                e.kw = e2e_keywatch(o, *c);
                e.base = e2e_baseline(o, *c);
            } else {
                e.base = e2e_baseline(o, *c);
                e.kw = e2e_keywatch(o, *c);
            }
            c->flushall_masters();
            printf("    keywatch %s, baseline %s\n", fmt_rate(e.kw).c_str(),
                   fmt_rate(e.base).c_str());
            res.e2e.push_back(e);
            fflush(stdout);
        }
        if (want("reshard")) {  // before the failover, which leaves a master without replica
            printf("  reshard: %s tracked keys over %.0f s while slots move\n",
                   with_commas(double(o.reshard_keys)).c_str(), double(o.spread_ms) / 1000);
            fflush(stdout);
            res.reshard.push_back(reshard_round(o, *c));
        }
        if (want("failover")) {
            printf("  failover (cluster-node-timeout %d ms)\n", c->opts.node_timeout_ms);
            fflush(stdout);
            res.failover.push_back(failover_round(o, *c, round));
        }
    }
    res.cluster_start_s = median(starts);
    summary(o, res, node_timeout);
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    if (!parse_args(argc, argv, &o)) return 1;
    // keywatch switches libevent to pthreads locking when its first loop starts; do it up
    // front so that the native subscribers run on the same kind of event_base throughout.
    evthread_use_pthreads();
    signal(SIGPIPE, SIG_IGN);
    printf(
        "kw_bench_cluster: keywatch %s, %d round(s), --keys %s, --burst-keys %s, --e2e-keys %s, "
        "--threads %d, --fo-keys %s; a fresh 3-master, 3-replica cluster per round (redis-server "
        "with notify-keyspace-events %s)\n",
        kw_version_string(), o.rounds, with_commas(double(o.keys)).c_str(),
        with_commas(double(o.burst_keys)).c_str(), with_commas(double(o.e2e_keys)).c_str(),
        o.threads, with_commas(double(o.fo_keys)).c_str(), o.notify.c_str());
    try {
        run(o);
    } catch (const std::exception &e) {
        fflush(stdout);
        fprintf(stderr, "kw_bench_cluster: %s\n", e.what());
        return 1;
    }
    return 0;
}
