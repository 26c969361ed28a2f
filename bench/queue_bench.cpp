// kw_bench_queue: the reliable-delivery figures of issue 3 ("Performance"), each printed
// beside a baseline measured in the same run on the same kind of server, repeated for
// several rounds (--rounds), with medians and a verdict against the targets.
//
// Sub-benchmarks (--only lateness,burst,track,e2e,memory,adopt; all but adopt by default)
//  lateness  N tracked keys (--keys) whose deadlines are spread evenly over 10 s, starting
//            about 2 s after the writing ends, while --background other keys with 1 h TTLs
//            exist. keywatch: a default engine, one handler for "expired" that records
//            (handler start - kw_event_deadline_ms) for first attempts of queue "keys".
//            Baseline "native": the same keys written with plain SET PXAT (deadline in the
//            key name) and a raw hiredis + libevent subscriber on __keyevent@0__:expired.
//            Each variant gets its own fresh redis-server (defaults + notify-keyspace-events
//            "Ex"), so both start from the same state. Waiting stops when every key has
//            arrived or 30 s (--wait-ms) after the last deadline; a key that has not arrived
//            by then counts as infinitely late ("missed") in the percentiles.
//            Targets: p99 <= 50 ms, max <= 250 ms.
//  burst     N tracked keys sharing one deadline ~3 s after the writing ends; figure: time
//            from that deadline until the last handler call started (target <= 1 s), and
//            the rate. Baseline: N plain SET PXAT keys sharing one deadline, native
//            subscriber. Same server, FLUSHALL between.
//  track     kw_client_track throughput, P client threads (--threads) each with its own client,
//            pipelines of --batch; against a raw pipelined EVALSHA of the equivalent
//            SET-plus-ZADD script and plain pipelined SET PX, same threads and batches,
//            same server. Each variant runs twice, in the order A B C C B A, each pass on
//            an emptied server, so that drifting load on a shared machine is shared out,
//            after an untimed raw pass and with both scripts loaded.
//            16-byte keys and values. Target (issue 23): keywatch >= 95% of the raw EVALSHA
//            rate (median of the per-round ratios).
//  e2e       N tracked keys, all already due, then a default engine with a no-op handler is
//            started; rate = N / (time from kw_engine_start until items.acked reaches N).
//            Baseline: a minimal at-most-once consumer on the same server: a Lua pop
//            (ZRANGEBYSCORE LIMIT B + ZREM, B = the engine's sweep.batch) of N due members,
//            no lease, no ack, no PTTL.
//            Target >= 50k/s.
//  memory    INFO used_memory delta per item on a fresh server: N plain SET k v PX 3600000
//            vs N kw_client_track (no snapshot), 16-byte keys and values, FLUSHALL between.
//            Target: tracked <= 2x plain.
//  adopt     keys another program writes, adopted by an engine with the rule prefix=a:
//            (issue 24; only with --only adopt). Each measure beside its same-run baseline:
//            - rate and cost: --keys plain SET a:... PX 600000 from one pipelined writer;
//              passes on an emptied server with no engine (the baseline), one engine, two
//              engines, one engine whose rule has snapshot=true (--adopt-snapshot), and
//              kw_client_track of the same keys. Figures: keys/s from the first write until
//              adopt.adopted reaches --keys; Redis CPU per key (INFO cpu, from the first
//              write until done and settled, less what the running engines cost Redis when
//              idle, measured for 1 s before) above the baseline's; used_memory per key
//              above the baseline's.
//              To take the cost apart, also passes with a plain subscriber (Listener) on
//              the engine's patterns (what delivering the notifications costs Redis), on
//              exact channels instead, and three passes whose keys expire 3 s after the
//              writing and last until each is delivered (no engine: until Redis deleted
//              them): plain SET, one engine adopting, kw_client_track with one engine. Each
//              pass also prints its INFO commandstats share (usec, which is wall time: on a
//              loaded machine it counts time the server was not running) and the rest.
//            - catch-up: --background volatile keys plus 20,000 a: keys, then an engine
//              starts; DBSIZE / (kw_engine_start until catchup.scans is 1), Redis CPU per
//              key scanned, and a one-connection GET probe's p50/p99/max before and during
//              the scan. Target >= 200,000 keys/s.
//            - lateness: --adopt-keys a: keys written with plain SET PXAT and as many
//              kw_client_track keys, deadlines spread over --spread-ms, with --background
//              volatile keys present; handler start minus deadline for each, and a native
//              subscriber on a server of its own (as in lateness). Target: adopted p99 <= 2x
//              tracked p99.
//            --adopt-parts picks among cost, catchup and lateness (default all).
//            The servers get notify-keyspace-events "Exg$" (what adoption needs).
//
// --port P runs every sub-benchmark on the redis-server already listening on 127.0.0.1:P
// (bench/peers/run_peers.py starts one for all its peers) instead of starting its own: each
// "fresh server" is then that one, FLUSHALLed, with notify-keyspace-events set to "Ex".
// --lateness-out FILE appends the burst's samples to FILE, one JSON object per variant and
// round: {"variant", "n", "deadline_ms", "add_s", "late_ms": [lateness of each delivered
// key's first handler start or notification, ms]}.
//
// Deadlines "after the writing ends": the time the writing will take is estimated from a
// small sample written just before (in a namespace no engine serves, removed afterwards),
// and the first deadline is placed at now + 1.25 x estimate + lead; the printed "first
// deadline X s after" is the real margin.
//
// Where the time goes: besides the figures, each keywatch run prints Redis's CPU per item
// (INFO cpu, user + sys) and this process's (the engine's or the clients'), and EVALSHA's
// usec_per_call (INFO commandstats); --verbose adds every command's stats (commands called
// from scripts are counted too) and the engine's stats.
//
// Clocks: deadlines are on Redis's clock (TIME), which on this machine is the same system
// clock the benchmark reads (CLOCK_REALTIME, microseconds).
//
// Exit status: 0 whatever the verdict; 1 when the benchmark itself could not run.
#include "bench_util.h"

#include <event2/thread.h>

#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

namespace {

using namespace kwbench;

// ---- Options ----------------------------------------------------------------------------

const char *const kAll[] = {"lateness", "burst", "track", "e2e", "memory", "adopt"};
const char *const kDefault[] = {"lateness", "burst", "track", "e2e", "memory"};
const char *const kAdoptParts[] = {"cost", "catchup", "lateness"};

struct Options {
    int rounds = 3;
    std::set<std::string> only = {std::begin(kDefault), std::end(kDefault)};
    uint64_t keys = 100000;
    uint64_t background = 1000000;
    int threads = 4;
    int batch = 100;
    uint64_t track_ops = 0;  // 0: 2 * keys
    int64_t spread_ms = 10000;
    int64_t lead_ms = 2000;            // lateness: first deadline this long after writing ends
    int64_t burst_lead_ms = 3000;      // burst: the deadline this long after writing ends
    int64_t wait_ms = 30000;           // how long after the last deadline arrivals are awaited
    int port = 0;                      // an existing redis-server on 127.0.0.1 (0: start one)
    std::string lateness_out;          // burst samples appended here (JSON lines) when not empty
    uint64_t adopt_keys = 10000;       // adopt: keys of each kind in the lateness measure
    uint64_t adopt_scan_keys = 20000;  // adopt: matching keys among the catch-up's keyspace
    bool adopt_snapshot = true;        // adopt: also the pass whose rule has snapshot=true
    std::set<std::string> adopt_parts = {std::begin(kAdoptParts), std::end(kAdoptParts)};
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_queue [options]\n"
            "  --rounds R        measured rounds (default 3); medians are reported\n"
            "  --only LIST       comma-separated: lateness,burst,track,e2e,memory,adopt\n"
            "                    (default all but adopt)\n"
            "  --keys N          tracked keys per run (default 100000)\n"
            "  --background N    keys with 1 h TTLs present during the lateness runs\n"
            "                    (default 1000000)\n"
            "  --threads P       client threads for kw_client_track and the track baselines "
            "(default 4)\n"
            "  --batch B         commands per pipeline wherever keys are tracked: the track\n"
            "                    benchmark and the adds of the others (default 100)\n"
            "  --track-ops N     commands per variant in the track benchmark (default 2*keys)\n"
            "  --spread-ms MS    lateness: deadlines spread over this long (default 10000)\n"
            "  --wait-ms MS      arrivals awaited this long after the last deadline\n"
            "                    (default 30000)\n"
            "  --port P          use the redis-server on 127.0.0.1:P (FLUSHALLed, its\n"
            "                    notify-keyspace-events set to Ex) instead of starting one\n"
            "  --lateness-out F  append the burst's per-key lateness samples to F (JSON lines)\n"
            "  --adopt-keys N    adopt: adopted and tracked keys in its lateness measure\n"
            "                    (default 10000)\n"
            "  --adopt-snapshot B  adopt: 1 (default) also measures a snapshot rule, 0 not\n"
            "  --adopt-parts LIST  adopt: comma-separated: cost,catchup,lateness (default all)\n"
            "  --conf NAME=VALUE keywatch engine option (repeatable), e.g. --conf workers=2\n"
            "  --verbose         engine stats and info log lines\n");
}

bool parse_args(int argc, char **argv, Options *o) {
    bool ok = parse_options(
        argc, argv, "kw_bench_queue", usage, [o](const std::string &arg, const std::string &value) {
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
                good = parse_uint(value, 1, 100000, &n) && (o->batch = int(n), true);
            else if (arg == "--track-ops")
                good = parse_uint(value, 100, 1000000000ull, &o->track_ops);
            else if (arg == "--spread-ms")
                good = parse_uint(value, 0, 3600000, &n) && (o->spread_ms = int64_t(n), true);
            else if (arg == "--wait-ms")
                good = parse_uint(value, 0, 3600000, &n) && (o->wait_ms = int64_t(n), true);
            else if (arg == "--port")
                good = parse_uint(value, 1, 65535, &n) && (o->port = int(n), true);
            else if (arg == "--lateness-out")
                good = !(o->lateness_out = value).empty();
            else if (arg == "--adopt-keys")
                good = parse_uint(value, 100, 10000000ull, &o->adopt_keys);
            else if (arg == "--adopt-snapshot")
                good = parse_uint(value, 0, 1, &n) && (o->adopt_snapshot = n == 1, true);
            else if (arg == "--adopt-parts")
                return parse_only(value, kAdoptParts, &o->adopt_parts);
            else
                return Opt::kUnknown;
            return good ? Opt::kOk : Opt::kBad;
        });
    if (o->track_ops == 0) o->track_ops = 2 * o->keys;
    return ok;
}

keywatch::RedisProcess::Options server_options() {
    keywatch::RedisProcess::Options o;
    o.notify = "Ex";  // Redis defaults plus the expired keyevents
    return o;
}

// A server of its own, or with --port the existing one (never started nor stopped by this
// object), emptied and with the same notifications.
std::unique_ptr<keywatch::RedisProcess> fresh_server(const Options &o) {
    keywatch::RedisProcess::Options opts = server_options();
    opts.port = o.port;
    auto rp = std::make_unique<keywatch::RedisProcess>(opts);
    if (!o.port) {
        rp->start();
        return rp;
    }
    flushall(*rp);
    std::string r = rp->command({"CONFIG", "SET", "notify-keyspace-events", opts.notify});
    if (r != "OK") throw BenchError("CONFIG SET notify-keyspace-events on --port: " + r);
    return rp;
}

Cpu cpu_now(const keywatch::RedisProcess &rp) {
    Cpu c;
    c.redis = redis_cpu_s(rp);
    c.self = self_cpu_s();
    return c;
}

// `count` keys with 1 h TTLs and 16-byte values: the crowd the sampling expiry has to sift.
void write_background(int port, uint64_t count) {
    ContextPtr c = connect_sync(port);
    char key[32];
    static const char kValue[] = "bbbbbbbbbbbbbbbb";
    pipelined(c.get(), 0, count, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        int n = snprintf(key, sizeof key, "bg:%013llu", static_cast<unsigned long long>(i));
        argv[0] = "SET", lens[0] = 3;
        argv[1] = key, lens[1] = size_t(n);
        argv[2] = kValue, lens[2] = 16;
        argv[3] = "PX", lens[3] = 2;
        argv[4] = "3600000", lens[4] = 7;
        return 5;
    });
}

// How long tracking n keys will take here and now, measured on a small sample in a
// namespace no engine serves (removed afterwards). Used to place deadlines after the
// writing ends.
double estimate_track_seconds(const keywatch::RedisProcess &rp, int threads, int batch,
                              uint64_t n) {
    uint64_t sample = std::min<uint64_t>(n, uint64_t(threads) * uint64_t(std::max(500, 2 * batch)));
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "cal:%012llu", static_cast<unsigned long long>(i)));
    };
    double s = track_parallel(rp.url(), "kwcal", threads, batch, sample, key,
                              [](uint64_t) { return int64_t(3600000); });
    ContextPtr c = connect_sync(rp.port());
    char buf[64];
    pipelined(c.get(), 0, sample, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        argv[0] = "DEL", lens[0] = 3;
        argv[1] = buf, lens[1] = key(i, buf);
        return 2;
    });
    rp.command({"DEL", "kwcal:keys:{0}:due", "kwcal:keys:{0}:data"});
    return s * double(n) / double(sample);
}

// Plain SET key v PXAT deadline(i) for keys "n:<deadline>:<i>", one connection, pipelines
// of 1000.
void write_native(int port, uint64_t n, const std::function<int64_t(uint64_t)> &deadline) {
    ContextPtr c = connect_sync(port);
    char key[64], at[32];
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    pipelined(c.get(), 0, n, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        int64_t d = deadline(i);
        argv[0] = "SET", lens[0] = 3;
        argv[1] = key;
        lens[1] = size_t(snprintf(key, sizeof key, "n:%013lld:%07llu", static_cast<long long>(d),
                                  static_cast<unsigned long long>(i)));
        argv[2] = kValue, lens[2] = 16;
        argv[3] = "PXAT", lens[3] = 4;
        argv[4] = at, lens[4] = size_t(snprintf(at, sizeof at, "%lld", static_cast<long long>(d)));
        return 5;
    });
}

double estimate_native_seconds(const keywatch::RedisProcess &rp, uint64_t n) {
    uint64_t sample = std::min<uint64_t>(n, 2000);
    int64_t far = wall_ms_int() + 3600000;
    double t0 = mono_s();
    write_native(rp.port(), sample, [&](uint64_t) { return far; });
    double s = mono_s() - t0;
    ContextPtr c = connect_sync(rp.port());
    char key[64];
    pipelined(c.get(), 0, sample, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        argv[0] = "DEL", lens[0] = 3;
        argv[1] = key;
        lens[1] = size_t(snprintf(key, sizeof key, "n:%013lld:%07llu", static_cast<long long>(far),
                                  static_cast<unsigned long long>(i)));
        return 2;
    });
    return s * double(n) / double(sample);
}

// ---- 1. lateness ------------------------------------------------------------------------

Delivery lateness_keywatch(const Options &o) {
    auto rp = fresh_server(o);
    double t = mono_s();
    write_background(rp->port(), o.background);
    double bg_s = mono_s() - t;
    Recorder rec(o.keys);
    Engine engine(rp->url(), record_handler, &rec);
    engine.start();
    double est = estimate_track_seconds(*rp, o.threads, o.batch, o.keys);
    int64_t t0 = wall_ms_int() + int64_t(est * 1250) + o.lead_ms + 100;
    uint64_t n = o.keys;
    auto deadline = [&](uint64_t i) {
        return t0 + int64_t(double(o.spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
    };
    double write_s = track_parallel(
        rp->url(), "", o.threads, o.batch, n,
        [&](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "k:%013lld:%07llu", static_cast<long long>(deadline(i)),
                                   static_cast<unsigned long long>(i)));
        },
        [&](uint64_t i) { return deadline(i) - wall_ms_int(); });
    double gap = double(t0) - wall_ms();
    double last = double(deadline(n - 1));
    // CPU over the spread: from just before the first deadline to just after the last.
    sleep_ms(int64_t(gap) - 200);
    rp->command({"CONFIG", "RESETSTAT"});
    Cpu a = cpu_now(*rp);
    double ta = mono_s();
    sleep_ms(int64_t(last + 50 - wall_ms()));
    Cpu b = cpu_now(*rp);
    double tb = mono_s();
    await_arrivals([&] { return rec.count(); }, n, last + double(o.wait_ms));
    sleep_ms(50);  // arrivals of the last poll interval
    double evalsha_us = usec_per_call(*rp, "evalsha");
    int64_t sweeps = engine.stat("sweep.calls"), suppressed = engine.stat("events.suppressed");
    engine.print_stats();
    print_commandstats(*rp, "keywatch lateness");
    engine.stop();
    Delivery d = summarize(rec.late, rec.at, rec.count(), n, last + double(o.wait_ms));
    for (int s = 0; s < 4; s++) d.src[s] = rec.by_source[s].load();
    d.write_s = write_s;
    d.gap_ms = gap;
    printf(
        "    keywatch: %s background keys in %.1f s, %s tracked in %.1f s (%d clients), first "
        "deadline %.1f s after; sources: sweep %s, notification %s, lease %s; during the "
        "spread: %s, EVALSHA %.0f us/call; sweep calls %s, own expired events suppressed %s\n",
        with_commas(double(o.background)).c_str(), bg_s, with_commas(double(n)).c_str(), write_s,
        o.threads, gap / 1000, with_commas(double(d.src[KW_SOURCE_SWEEP])).c_str(),
        with_commas(double(d.src[KW_SOURCE_NOTIFICATION])).c_str(),
        with_commas(double(d.src[KW_SOURCE_LEASE_EXPIRED])).c_str(),
        cpu_util(a, b, tb - ta, "engine").c_str(), evalsha_us, with_commas(double(sweeps)).c_str(),
        with_commas(double(suppressed)).c_str());
    return d;
}

Delivery lateness_native(const Options &o) {
    auto rp = fresh_server(o);
    double t = mono_s();
    write_background(rp->port(), o.background);
    double bg_s = mono_s() - t;
    NativeSubscriber sub(rp->port(), o.keys);
    sub.start();
    double est = estimate_native_seconds(*rp, o.keys);
    int64_t t0 = wall_ms_int() + int64_t(est * 1250) + o.lead_ms + 100;
    uint64_t n = o.keys;
    auto deadline = [&](uint64_t i) {
        return t0 + int64_t(double(o.spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
    };
    double w0 = mono_s();
    write_native(rp->port(), n, deadline);
    double write_s = mono_s() - w0;
    double gap = double(t0) - wall_ms();
    double last = double(deadline(n - 1));
    sleep_ms(int64_t(gap) - 200);
    Cpu a = cpu_now(*rp);
    double ta = mono_s();
    sleep_ms(int64_t(last + 50 - wall_ms()));
    Cpu b = cpu_now(*rp);
    double tb = mono_s();
    await_arrivals([&] { return sub.count(); }, n, last + double(o.wait_ms));
    sub.stop();
    Delivery d = summarize(sub.late(), sub.at(), sub.late().size(), n, last + double(o.wait_ms));
    d.write_s = write_s;
    d.gap_ms = gap;
    printf(
        "    native:   %s background keys in %.1f s, %s plain keys in %.1f s, first deadline "
        "%.1f s after; expired_keys %s, subscriber disconnects %d; during the spread: %s\n",
        with_commas(double(o.background)).c_str(), bg_s, with_commas(double(n)).c_str(), write_s,
        gap / 1000, with_commas(double(info_int(*rp, "stats", "expired_keys"))).c_str(),
        sub.disconnects(), cpu_util(a, b, tb - ta, "subscriber").c_str());
    return d;
}

// ---- 2. burst ---------------------------------------------------------------------------

// --lateness-out: appends one JSON line for a burst variant (format in the header comment);
// acked_by_ms (keywatch: all acked by deadline + this) is null when NaN.
void write_burst_samples(const Options &o, const char *variant, uint64_t n, int64_t deadline,
                         double add_s, double acked_by_ms, const std::vector<double> &late,
                         uint64_t count) {
    if (o.lateness_out.empty()) return;
    FILE *f = fopen(o.lateness_out.c_str(), "a");
    if (!f) throw BenchError("--lateness-out " + o.lateness_out + ": " + strerror(errno));
    fprintf(f, "{\"variant\": \"%s\", \"n\": %llu, \"deadline_ms\": %lld, \"add_s\": %.6f, ",
            variant, static_cast<unsigned long long>(n), static_cast<long long>(deadline), add_s);
    if (std::isnan(acked_by_ms))
        fprintf(f, "\"acked_by_ms\": null, \"late_ms\": [");
    else
        fprintf(f, "\"acked_by_ms\": %.3f, \"late_ms\": [", acked_by_ms);
    for (uint64_t i = 0; i < count; i++) fprintf(f, i ? ", %.3f" : "%.3f", late[i]);
    fprintf(f, "]}\n");
    if (fclose(f) != 0)
        throw BenchError("--lateness-out " + o.lateness_out + ": " + strerror(errno));
}

Burst burst_keywatch(const Options &o, const keywatch::RedisProcess &rp) {
    Recorder rec(o.keys);
    Engine engine(rp.url(), record_handler, &rec);
    engine.start();
    uint64_t n = o.keys;
    double est = estimate_track_seconds(rp, o.threads, o.batch, n);
    int64_t deadline = wall_ms_int() + int64_t(est * 1250) + o.burst_lead_ms + 100;
    double write_s = track_parallel(
        rp.url(), "", o.threads, o.batch, n,
        [&](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "b:%013lld:%07llu", static_cast<long long>(deadline),
                                   static_cast<unsigned long long>(i)));
        },
        [&](uint64_t) { return deadline - wall_ms_int(); });
    double gap = double(deadline) - wall_ms();
    double until = double(deadline + o.wait_ms);
    sleep_ms(int64_t(gap) - 200);
    rp.command({"CONFIG", "RESETSTAT"});
    Cpu a = cpu_now(rp);
    await_arrivals([&] { return rec.count(); }, n, until);
    sleep_ms(50);
    while (engine.stat("items.acked") < int64_t(rec.count()) && wall_ms() < until) sleep_ms(5);
    double acked_by = wall_ms() - double(deadline);  // acks wait while claims are out
    Cpu b = cpu_now(rp);
    engine.print_stats();
    print_commandstats(rp, "keywatch burst");
    int64_t sweeps = engine.stat("sweep.calls");
    engine.stop();
    Delivery d = summarize(rec.late, rec.at, rec.count(), n, until);
    for (int s = 0; s < 4; s++) d.src[s] = rec.by_source[s].load();
    d.write_s = write_s;
    d.gap_ms = gap;
    Burst result = finish_burst(d, deadline);
    write_burst_samples(o, "keywatch", n, deadline, write_s, acked_by, rec.late, rec.count());
    printf(
        "    keywatch: %s tracked in %.1f s, deadline %.1f s after; sources: sweep %s, "
        "notification %s; sweep calls %s; all acked by +%s, until then %s; EVALSHA %.0f "
        "us/call\n",
        with_commas(double(n)).c_str(), write_s, gap / 1000,
        with_commas(double(d.src[KW_SOURCE_SWEEP])).c_str(),
        with_commas(double(d.src[KW_SOURCE_NOTIFICATION])).c_str(),
        with_commas(double(sweeps)).c_str(), fmt_ms(acked_by).c_str(),
        cpu_per_item(a, b, double(n), "engine").c_str(), usec_per_call(rp, "evalsha"));
    return result;
}

Burst burst_native(const Options &o, const keywatch::RedisProcess &rp) {
    NativeSubscriber sub(rp.port(), o.keys);
    sub.start();
    uint64_t n = o.keys;
    double est = estimate_native_seconds(rp, n);
    int64_t deadline = wall_ms_int() + int64_t(est * 1250) + o.burst_lead_ms + 100;
    double w0 = mono_s();
    write_native(rp.port(), n, [&](uint64_t) { return deadline; });
    double write_s = mono_s() - w0;
    double gap = double(deadline) - wall_ms();
    double until = double(deadline + o.wait_ms);
    sleep_ms(int64_t(gap) - 200);
    Cpu a = cpu_now(rp);
    await_arrivals([&] { return sub.count(); }, n, until);
    Cpu b = cpu_now(rp);
    sub.stop();
    Delivery d = summarize(sub.late(), sub.at(), sub.late().size(), n, until);
    d.write_s = write_s;
    d.gap_ms = gap;
    printf("    native:   %s plain keys in %.1f s, deadline %.1f s after; until all received: %s\n",
           with_commas(double(n)).c_str(), write_s, gap / 1000,
           cpu_per_item(a, b, double(n), "subscriber").c_str());
    write_burst_samples(o, "native", n, deadline, write_s, std::nan(""), sub.late(),
                        sub.late().size());
    return finish_burst(d, deadline);
}

// ---- 3. track throughput ------------------------------------------------------------------

struct Track {
    double kw = 0, raw = 0, set = 0;
};

Track track_round(const Options &o, const keywatch::RedisProcess &rp, int round) {
    // Two passes per variant in the order A B C C B A (A first on even rounds, C on odd), so
    // that a drift in the machine's load is shared out evenly; each pass writes the same
    // keys into an empty server.
    uint64_t pass = (o.track_ops / 2) - (o.track_ops / 2) % uint64_t(o.threads);
    // 16-byte keys, made before any clock starts; the same keys for every variant.
    std::vector<char> keys(pass * 16);
    for (uint64_t i = 0; i < pass; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "t%015llu", static_cast<unsigned long long>(i));
        memcpy(&keys[i * 16], buf, 16);
    }
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    const char *ttl = "3600000";
    std::string sha = rp.command({"SCRIPT", "LOAD", kEquivalentScript});
    if (sha.size() != 40) throw BenchError("SCRIPT LOAD: " + sha);

    auto kw = [&] {
        std::vector<std::unique_ptr<Client>> clients(static_cast<size_t>(o.threads));
        return run_threads(
            o.threads, pass, o.batch,
            [&](int t) { clients[size_t(t)] = std::make_unique<Client>(rp.url()); },
            [&](int t, uint64_t b, uint64_t e) {
                Client &c = *clients[size_t(t)];
                int statuses[1024];
                c.check(kw_client_pipeline_begin(c.c), "kw_client_pipeline_begin");
                for (uint64_t i = b; i < e; i++)
                    c.check(
                        kw_client_track(c.c, &keys[i * 16], 16, kValue, 16, 3600000, 0, nullptr),
                        "kw_client_track");
                size_t count = 0;
                c.check(kw_client_pipeline_end(c.c, statuses, 1024, &count),
                        "kw_client_track (pipelined)");
            });
    };
    auto raw = [&](bool eval) {
        std::vector<ContextPtr> conns(static_cast<size_t>(o.threads));
        return run_threads(
            o.threads, pass, o.batch, [&](int t) { conns[size_t(t)] = connect_sync(rp.port()); },
            [&](int t, uint64_t b, uint64_t e) {
                char score[32];
                size_t score_len = size_t(snprintf(
                    score, sizeof score, "%lld", static_cast<long long>(wall_ms_int() + 3600000)));
                pipelined(conns[size_t(t)].get(), b, e, o.batch,
                          [&](uint64_t i, const char **argv, size_t *lens) {
                              if (!eval) {
                                  argv[0] = "SET", lens[0] = 3;
                                  argv[1] = &keys[i * 16], lens[1] = 16;
                                  argv[2] = kValue, lens[2] = 16;
                                  argv[3] = "PX", lens[3] = 2;
                                  argv[4] = ttl, lens[4] = 7;
                                  return 5;
                              }
                              argv[0] = "EVALSHA", lens[0] = 7;
                              argv[1] = sha.data(), lens[1] = sha.size();
                              argv[2] = "2", lens[2] = 1;
                              argv[3] = &keys[i * 16], lens[3] = 16;
                              argv[4] = "bench:due", lens[4] = 9;
                              argv[5] = kValue, lens[5] = 16;
                              argv[6] = ttl, lens[6] = 7;
                              argv[7] = score, lens[7] = score_len;
                              return 8;
                          });
            });
    };
    // Untimed, first: a pass on the fresh server grows its memory (each round starts one,
    // and A goes first in every other round), and kw_client_track's script is loaded as the
    // raw script is above (else its first pipelines meet NOSCRIPT and go again one by one).
    // Neither is what a pass measures.
    raw(true);
    {
        Client c(rp.url());
        c.check(kw_client_track(c.c, "warm", 4, "x", 1, 3600000, 0, nullptr), "kw_client_track");
    }
    const char *names[3] = {"kw_client_track", "raw EVALSHA", "plain SET"};
    double secs[3] = {0, 0, 0}, redis_cpu[3] = {0, 0, 0}, self_cpu[3] = {0, 0, 0};
    double per_call[3] = {0, 0, 0};
    std::vector<int> order = {0, 1, 2};
    if (round % 2) std::reverse(order.begin(), order.end());
    std::vector<int> passes = order;
    passes.insert(passes.end(), order.rbegin(), order.rend());
    for (int v : passes) {
        flushall(rp);
        rp.command({"CONFIG", "RESETSTAT"});
        Cpu a = cpu_now(rp);
        secs[v] += v == 0 ? kw() : raw(v == 1);
        Cpu b = cpu_now(rp);
        print_commandstats(rp, names[v]);
        redis_cpu[v] += b.redis - a.redis;
        self_cpu[v] += b.self - a.self;
        per_call[v] += usec_per_call(rp, v == 2 ? "set" : "evalsha") / 2;
    }
    flushall(rp);
    Track out;
    double ops = double(2 * pass);
    out.kw = ops / secs[0];
    out.raw = ops / secs[1];
    out.set = ops / secs[2];
    printf(
        "    kw_client_track %-13s raw EVALSHA %-13s plain SET PX %-13s kw/raw %s (%d threads, "
        "pipelines of %d, 2 passes of %s ops each)\n",
        fmt_rate(out.kw).c_str(), fmt_rate(out.raw).c_str(), fmt_rate(out.set).c_str(),
        fmt_pct(out.kw / out.raw).c_str(), o.threads, o.batch, with_commas(double(pass)).c_str());
    for (int v = 0; v < 3; v++)
        printf("      CPU per op, %-12s redis %.1f us (%s %.1f us/call), clients %.1f us\n",
               names[v], redis_cpu[v] * 1e6 / ops, v == 2 ? "SET" : "EVALSHA", per_call[v],
               self_cpu[v] * 1e6 / ops);
    return out;
}

// ---- 4. end to end ------------------------------------------------------------------------

struct E2e {
    double kw = 0, base = 0;  // items per second
};

double e2e_keywatch(const Options &o, const keywatch::RedisProcess &rp) {
    uint64_t n = o.keys;
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "e%015llu", static_cast<unsigned long long>(i)));
    };
    double write_s = track_parallel(rp.url(), "", o.threads, o.batch, n, key,
                                    [](uint64_t) { return int64_t(1); });
    sleep_ms(500);  // all due
    Engine engine(rp.url(), noop_handler, nullptr);
    rp.command({"CONFIG", "RESETSTAT"});
    Cpu a = cpu_now(rp);
    double t0 = mono_s();
    engine.start();
    double started = mono_s() - t0;
    while (engine.stat("items.acked") < int64_t(n) && mono_s() - t0 < 120) sleep_ms(1);
    double s = mono_s() - t0;
    Cpu b = cpu_now(rp);
    int64_t acked = engine.stat("items.acked");
    engine.print_stats();
    print_commandstats(rp, "keywatch e2e");
    printf(
        "    keywatch: %s tracked in %.1f s; engine started in %.0f ms; %s acked in %.2f s; "
        "sweep calls %s; %s; EVALSHA %.0f us/call\n",
        with_commas(double(n)).c_str(), write_s, started * 1000, with_commas(double(acked)).c_str(),
        s, with_commas(double(engine.stat("sweep.calls"))).c_str(),
        cpu_per_item(a, b, double(n), "engine").c_str(), usec_per_call(rp, "evalsha"));
    if (acked < int64_t(n)) return double(acked) / s;
    return double(n) / s;
}

double e2e_baseline(const Options &o, const keywatch::RedisProcess &rp) {
    uint64_t n = o.keys;
    ContextPtr c = connect_sync(rp.port());
    char key[32], score[32];
    size_t score_len =
        size_t(snprintf(score, sizeof score, "%lld", static_cast<long long>(wall_ms_int() - 1000)));
    pipelined(c.get(), 0, n, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        argv[0] = "ZADD", lens[0] = 4;
        argv[1] = "bench:due", lens[1] = 9;
        argv[2] = score, lens[2] = score_len;
        argv[3] = key;
        lens[3] = size_t(snprintf(key, sizeof key, "e%015llu", static_cast<unsigned long long>(i)));
        return 4;
    });
    std::string sha = rp.command({"SCRIPT", "LOAD", kPopScript});
    std::string now = std::to_string(wall_ms_int());
    const int64_t batch = engine_option("sweep.batch");
    Cpu a = cpu_now(rp);
    double t0 = mono_s();
    uint64_t popped = pop_due(c.get(), sha, "bench:due", now, n, batch);
    double s = mono_s() - t0;
    Cpu b = cpu_now(rp);
    printf(
        "    baseline: %s due members popped in %.2f s (Lua ZRANGEBYSCORE+ZREM, %lld per call); "
        "%s\n",
        with_commas(double(popped)).c_str(), s, static_cast<long long>(batch),
        cpu_per_item(a, b, double(popped), "client").c_str());
    return double(popped) / s;
}

// ---- 5. memory ----------------------------------------------------------------------------

struct Memory {
    double plain = 0, kw = 0, due_zset = 0;  // bytes per item
};

Memory memory_round(const Options &o, const keywatch::RedisProcess &rp, int round) {
    uint64_t n = o.keys;
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    char key[32];
    auto mkkey = [&](uint64_t i) {
        return size_t(snprintf(key, sizeof key, "m%015llu", static_cast<unsigned long long>(i)));
    };
    Memory m;
    auto plain = [&] {
        flushall(rp);
        int64_t before = info_int(rp, "memory", "used_memory");
        ContextPtr c = connect_sync(rp.port());
        pipelined(c.get(), 0, n, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
            argv[0] = "SET", lens[0] = 3;
            argv[1] = key, lens[1] = mkkey(i);
            argv[2] = kValue, lens[2] = 16;
            argv[3] = "PX", lens[3] = 2;
            argv[4] = "3600000", lens[4] = 7;
            return 5;
        });
        int64_t after = info_int(rp, "memory", "used_memory");
        m.plain = double(after - before) / double(n);
    };
    auto tracked = [&] {
        flushall(rp);
        Client c(rp.url());
        // Load the script and create nothing lasting before the first reading.
        c.check(kw_client_track(c.c, "warm", 4, "x", 1, 3600000, 0, nullptr), "kw_client_track");
        c.check(kw_client_untrack(c.c, "warm", 4, 1), "kw_client_untrack");
        int64_t before = info_int(rp, "memory", "used_memory");
        std::vector<int> statuses(1000);
        for (uint64_t i = 0; i < n;) {
            c.check(kw_client_pipeline_begin(c.c), "kw_client_pipeline_begin");
            for (int b = 0; b < 1000 && i < n; b++, i++) {
                size_t len = mkkey(i);
                c.check(kw_client_track(c.c, key, len, kValue, 16, 3600000, 0, nullptr),
                        "kw_client_track");
            }
            size_t count = 0;
            c.check(kw_client_pipeline_end(c.c, statuses.data(), statuses.size(), &count),
                    "kw_client_track (pipelined)");
        }
        int64_t after = info_int(rp, "memory", "used_memory");
        m.kw = double(after - before) / double(n);
        std::string usage = rp.command({"MEMORY", "USAGE", "kw:keys:{0}:due", "SAMPLES", "0"});
        m.due_zset = double(std::strtoll(usage.c_str(), nullptr, 10)) / double(n);
    };
    if (round % 2 == 0) {
        plain();
        tracked();
    } else {
        tracked();
        plain();
    }
    flushall(rp);
    printf(
        "    plain SET PX %.1f B/key, kw_client_track %.1f B/key (of which the due ZSET %.1f B) "
        "ratio %.2fx\n",
        m.plain, m.kw, m.due_zset, m.kw / m.plain);
    return m;
}

// ---- 6. adopt -----------------------------------------------------------------------------

// x with `digits` decimals.
std::string fixed(double x, int digits) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", digits, x);
    return buf;
}

// What adoption needs of notify-keyspace-events (set, expire, del..., expired).
void adopt_notifications(const keywatch::RedisProcess &rp) {
    std::string r = rp.command({"CONFIG", "SET", "notify-keyspace-events", "Exg$"});
    if (r != "OK") throw BenchError("CONFIG SET notify-keyspace-events Exg$: " + r);
}

// Plain SET <prefix><deadline, 13 digits>:<i> v PXAT deadline(i), the way an application
// that never heard of keywatch writes, from one connection in pipelines of 1000.
void write_plain(int port, const char *prefix, uint64_t n,
                 const std::function<int64_t(uint64_t)> &deadline) {
    ContextPtr c = connect_sync(port);
    char key[64], at[32];
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    pipelined(c.get(), 0, n, 1000, [&](uint64_t i, const char **argv, size_t *lens) {
        const int64_t d = deadline(i);
        argv[0] = "SET", lens[0] = 3;
        argv[1] = key;
        lens[1] = size_t(snprintf(key, sizeof key, "%s%013lld:%07llu", prefix,
                                  static_cast<long long>(d), static_cast<unsigned long long>(i)));
        argv[2] = kValue, lens[2] = 16;
        argv[3] = "PXAT", lens[3] = 4;
        argv[4] = at, lens[4] = size_t(snprintf(at, sizeof at, "%lld", static_cast<long long>(d)));
        return 5;
    });
}

// Waits until Redis has run no EVALSHA for 300 ms (the engines' adoptions are done), at most
// 30 s.
void await_quiet(const keywatch::RedisProcess &rp) {
    int64_t last = -1;
    double quiet_since = mono_s(), until = mono_s() + 30;
    while (mono_s() < until) {
        std::string stats = rp.command({"INFO", "commandstats"});
        const char *v = info_value(stats, "cmdstat_evalsha");
        const int64_t calls = v ? std::strtoll(strstr(v, "calls=") + 6, nullptr, 10) : 0;
        if (calls != last) {
            last = calls;
            quiet_since = mono_s();
        } else if (mono_s() - quiet_since >= 0.3) {
            return;
        }
        sleep_ms(20);
    }
}

// Where a pass's Redis CPU went, from INFO commandstats and INFO stats (reset at its start),
// in microseconds (or bytes, calls) per key written.
struct CostParts {
    double set = 0;       // the app's SET (with the keyevents it publishes to subscribers)
    double scripts = 0;   // EVALSHA and EVAL (adopt, claims, acks; track: its SET too)
    double commands = 0;  // every other command sent to Redis (PUBLISH, INFO, SCAN...)
    double outside = 0;   // the rest: reading and writing sockets (subscribers'
                          // messages), the event loop, cron
    double script_calls = 0, net_out = 0, writes = 0;
};

// usec= of each command in INFO commandstats ("set" -> usec).
std::map<std::string, double> command_usec(const std::string &info) {
    std::map<std::string, double> out;
    size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
        const size_t colon = info.find(':', pos);
        const size_t usec = info.find("usec=", colon);
        if (colon == std::string::npos || usec == std::string::npos) break;
        out[info.substr(pos + 8, colon - pos - 8)] = std::strtod(info.c_str() + usec + 5, nullptr);
        pos = colon;
    }
    return out;
}

// The commands scripts call (counted in commandstats too, and inside EVALSHA's time).
bool called_by_scripts(const std::string &cmd) {
    static const std::set<std::string> inner = {"del",
                                                "exists",
                                                "get",
                                                "hdel",
                                                "hexists",
                                                "hget",
                                                "hlen",
                                                "hmget",
                                                "hset",
                                                "hsetnx",
                                                "incr",
                                                "pexpiretime",
                                                "set",
                                                "time",
                                                "type",
                                                "xadd",
                                                "xdel",
                                                "xlen",
                                                "xrange",
                                                "zadd",
                                                "zcard",
                                                "zcount",
                                                "zmscore",
                                                "zrange",
                                                "zrangebyscore",
                                                "zrangestore",
                                                "zrem",
                                                "zremrangebyrank",
                                                "zremrangebyscore",
                                                "zscore",
                                                "pubsub|numsub",
                                                "pubsub|channels"};
    return inner.count(cmd) > 0;
}

CostParts cost_parts(const keywatch::RedisProcess &rp, double cpu_s, double n, bool app_sets) {
    const std::map<std::string, double> usec = command_usec(rp.command({"INFO", "commandstats"}));
    const std::string stats = rp.command({"INFO", "stats"});
    auto stat = [&](const char *name) {
        const char *v = info_value(stats, name);
        return v ? std::strtod(v, nullptr) : 0.0;
    };
    auto at = [&](const char *cmd) {
        auto it = usec.find(cmd);
        return it == usec.end() ? 0.0 : it->second;
    };
    CostParts c;
    c.set = app_sets ? at("set") / n : 0;
    c.scripts = (at("evalsha") + at("eval")) / n;
    for (const auto &kv : usec)
        if (kv.first != "evalsha" && kv.first != "eval" && kv.first != "set" &&
            !called_by_scripts(kv.first))
            c.commands += kv.second / n;
    c.outside = cpu_s * 1e6 / n - c.set - c.scripts - c.commands;
    const std::string info = rp.command({"INFO", "commandstats"});
    const char *calls = info_value(info, "cmdstat_evalsha");
    c.script_calls = calls ? std::strtod(strstr(calls, "calls=") + 6, nullptr) : 0;
    c.net_out = stat("total_net_output_bytes") / n;
    c.writes = stat("total_writes_processed") / n;
    return c;
}

std::string cost_text(const CostParts &c) {
    char buf[256];
    snprintf(buf, sizeof buf,
             "SET %.2f us, scripts %.2f us (%.0f EVALSHA), other commands %.2f us, outside "
             "commands %.2f us; out %.0f B/key, %.2f writes/key",
             c.set, c.scripts, c.script_calls, c.commands, c.outside, c.net_out, c.writes);
    return buf;
}

// The keyevents an engine with the rule prefix=a: (no snapshot) and a handler of `expired`
// subscribes to: `expired` in every db, the others (subscribed for adoption alone) in db 0.
const char *const kAdoptEvents[] = {"evicted", "del",         "set",       "expire",
                                    "persist", "rename_from", "rename_to", "move_from",
                                    "move_to", "copy_to",     "restore"};

// A plain subscriber that reads and drops what it hears, on its own thread: PSUBSCRIBE to
// the engine's patterns, or (channels) PSUBSCRIBE to `expired`'s and SUBSCRIBE to the
// others' exact channels. What Redis spends delivering an engine's notifications, apart
// from the scripts the engine runs.
class Listener {
  public:
    Listener(int port, bool channels) : c_(connect_sync(port)) {
        timeval tv{0, 100000};
        redisSetTimeout(c_.get(), tv);
        redisAppendCommand(c_.get(), "PSUBSCRIBE __keyevent@*__:expired");
        for (const char *e : kAdoptEvents)
            redisAppendCommand(
                c_.get(), channels ? "SUBSCRIBE __keyevent@0__:%s" : "PSUBSCRIBE __keyevent@0__:%s",
                e);
        for (size_t i = 0; i <= std::size(kAdoptEvents); i++) {
            void *r = nullptr;
            if (redisGetReply(c_.get(), &r) != REDIS_OK) throw BenchError("listener: subscribe");
            freeReplyObject(r);
        }
        thread_ = std::thread([this] {
            while (!stop_.load()) {
                void *r = nullptr;
                if (redisGetReply(c_.get(), &r) == REDIS_OK) {
                    freeReplyObject(r);
                    heard_++;
                } else if (c_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    c_->err = 0;  // the read timed out: look at stop_ again
                } else {
                    return;
                }
            }
        });
    }
    ~Listener() {
        stop_ = true;
        thread_.join();
    }
    int64_t heard() const { return heard_.load(); }

  private:
    ContextPtr c_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<int64_t> heard_{0};
};

// One pass of the rate and cost measure on an emptied server: `engines` engines with
// `rules` (0: none, the baseline), or with track the keys written by kw_client_track.
struct AdoptPass {
    double redis_cpu_s = 0, memory_b = 0, write_s = 0, adopted_s = 0;
    int64_t adopted = 0;
    CostParts parts;
};

// One pass of the cost measure: what runs beside the app's writes.
struct PassSpec {
    const char *name;
    int engines = 0;         // engines with the rule `rules`
    std::string rules;       // "": engines without adopt rules
    bool track = false;      // the keys are written with kw_client_track, not SET
    int listener = 0;        // 1: a Listener on the engine's patterns, 2: on channels
    bool to_expiry = false;  // the keys expire 3 s after the writing starts; the pass
                             // lasts until every one is delivered (or gone, with no engine)
    double *cpu = nullptr, *mem = nullptr;  // where its figures go (mem null: not kept)
};

AdoptPass adopt_pass(const Options &o, const keywatch::RedisProcess &rp, const PassSpec &v) {
    flushall(rp);
    std::vector<std::unique_ptr<Engine>> running;
    for (int i = 0; i < v.engines; i++) {
        ConfPairs conf;
        if (!v.rules.empty()) conf.push_back({"adopt.rules", v.rules});
        running.push_back(std::make_unique<Engine>(rp.url(), noop_handler, nullptr, conf));
        running.back()->start();
    }
    std::unique_ptr<Listener> listener;
    if (v.listener) listener = std::make_unique<Listener>(rp.port(), v.listener == 2);
    if (v.track) {  // load the script and create nothing lasting before the first reading
        Client c(rp.url());
        c.check(kw_client_track(c.c, "warm", 4, "x", 1, 3600000, 0, nullptr), "kw_client_track");
        c.check(kw_client_untrack(c.c, "warm", 4, 1), "kw_client_untrack");
    }
    // Settled: engines keep sweeping every sweep.interval, so Redis never goes quiet with
    // them; what they cost when idle is measured for a second and taken off the window.
    auto settle = [&] {
        if (running.empty()) {
            await_quiet(rp);
            return;
        }
        const double until = mono_s() + 30;  // the first catch-up scan (of an empty db)
        for (auto &e : running)
            while (!v.rules.empty() && e->stat("catchup.scans") < 1 && mono_s() < until)
                sleep_ms(5);
        sleep_ms(300);
    };
    settle();
    const Cpu idle_a = cpu_now(rp);
    const double idle_t0 = mono_s();
    sleep_ms(1000);
    const double idle_rate = (cpu_now(rp).redis - idle_a.redis) / (mono_s() - idle_t0);
    rp.command({"CONFIG", "RESETSTAT"});
    const int64_t mem0 = info_int(rp, "memory", "used_memory");
    AdoptPass p;
    Cpu a = cpu_now(rp);
    const double t0 = mono_s();
    const int64_t ttl = v.to_expiry ? 3000 : 600000, at = wall_ms_int() + ttl;
    if (v.track)
        track_parallel(
            rp.url(), "", 1, 100, o.keys,
            [&](uint64_t i, char *buf) {
                return size_t(snprintf(buf, 64, "a:%013lld:%07llu", static_cast<long long>(at),
                                       static_cast<unsigned long long>(i)));
            },
            [&](uint64_t) { return at - wall_ms_int(); });
    else
        write_plain(rp.port(), "a:", o.keys, [&](uint64_t) { return at; });
    p.write_s = mono_s() - t0;
    // Each key is adopted once, by whichever engine's script runs first (the others find it
    // unchanged).
    auto sum = [&](const char *stat) {
        int64_t total = 0;
        for (auto &e : running) total += e->stat(stat);
        return total;
    };
    if (v.engines > 0 && !v.rules.empty()) {
        while (sum("adopt.adopted") < int64_t(o.keys) && mono_s() - t0 < 120) sleep_ms(1);
        p.adopted_s = mono_s() - t0;
        p.adopted = sum("adopt.adopted");
    }
    if (v.to_expiry && v.engines > 0)
        while (sum("items.acked") < int64_t(o.keys) && mono_s() - t0 < 120) sleep_ms(5);
    else if (v.to_expiry)
        while (rp.command({"DBSIZE"}) != "0" && mono_s() - t0 < 120) sleep_ms(5);
    settle();
    Cpu b = cpu_now(rp);
    p.redis_cpu_s = std::max(0.0, b.redis - a.redis - idle_rate * (mono_s() - t0));
    p.memory_b = double(info_int(rp, "memory", "used_memory") - mem0);
    p.parts = cost_parts(rp, p.redis_cpu_s, double(o.keys), !v.track);
    print_commandstats(rp, "adopt pass");
    for (auto &e : running) {
        e->print_stats();
        e->stop();
    }
    return p;
}

// A one-connection GET loop: round-trip times (ms) while it runs.
class Probe {
  public:
    explicit Probe(int port) : c_(connect_sync(port)) {
        thread_ = std::thread([this] {
            while (!stop_.load()) {
                const double t = mono_s();
                redisReply *r = static_cast<redisReply *>(redisCommand(c_.get(), "GET a:probe"));
                if (!r) return;
                freeReplyObject(r);
                std::lock_guard<std::mutex> lock(mu_);
                rtt_.push_back((mono_s() - t) * 1000);
            }
        });
    }
    ~Probe() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    // The round trips since the last call, sorted.
    std::vector<double> take() {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<double> out;
        out.swap(rtt_);
        std::sort(out.begin(), out.end());
        return out;
    }

  private:
    ContextPtr c_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<double> rtt_;
};

std::string probe_text(const std::vector<double> &rtt) {
    if (rtt.empty()) return "no replies";
    char buf[128];
    snprintf(buf, sizeof buf, "p50 %.2f ms p99 %.2f ms max %.2f ms (%zu GETs)",
             percentile(rtt, rtt.size(), 0.5), percentile(rtt, rtt.size(), 0.99), rtt.back(),
             rtt.size());
    return buf;
}

struct CatchUp {
    double rate = 0, cpu_us = 0, probe_p99 = 0, probe_base_p99 = 0;
};

CatchUp catchup_round(const Options &o) {
    auto rp = fresh_server(o);
    adopt_notifications(*rp);
    write_background(rp->port(), o.background);
    const int64_t at = wall_ms_int() + 600000;
    write_plain(rp->port(), "a:", o.adopt_scan_keys, [&](uint64_t) { return at; });
    std::string dbsize_text = rp->command({"DBSIZE"});
    const double dbsize = double(std::strtoll(dbsize_text.c_str(), nullptr, 10));
    Probe probe(rp->port());
    sleep_ms(1000);
    const std::vector<double> before = probe.take();
    Engine engine(rp->url(), noop_handler, nullptr, {{"adopt.rules", "prefix=a:"}});
    rp->command({"CONFIG", "RESETSTAT"});
    Cpu a = cpu_now(*rp);
    const double t0 = mono_s();
    engine.start();
    while (engine.stat("catchup.scans") < 1 && mono_s() - t0 < 300) sleep_ms(5);
    const double secs = mono_s() - t0;
    Cpu b = cpu_now(*rp);
    const std::vector<double> during = probe.take();
    probe.stop();
    await_quiet(*rp);
    CatchUp c;
    c.rate = dbsize / secs;
    c.cpu_us = (b.redis - a.redis) * 1e6 / dbsize;
    c.probe_p99 = during.empty() ? kInf : percentile(during, during.size(), 0.99);
    c.probe_base_p99 = before.empty() ? kInf : percentile(before, before.size(), 0.99);
    print_commandstats(*rp, "catch-up scan");
    engine.print_stats();
    printf(
        "    catch-up: %s keys (%s matching) scanned in %.2f s: %s keys/s, Redis %.2f us per key "
        "scanned (adopts included); catchup.keys %s, adopt.adopted %s\n"
        "      GET probe before: %s\n      GET probe during: %s\n",
        with_commas(dbsize).c_str(), with_commas(double(o.adopt_scan_keys)).c_str(), secs,
        with_commas(c.rate).c_str(), c.cpu_us,
        with_commas(double(engine.stat("catchup.keys"))).c_str(),
        with_commas(double(engine.stat("adopt.adopted"))).c_str(), probe_text(before).c_str(),
        probe_text(during).c_str());
    engine.stop();
    return c;
}

// The lateness handler: adopted keys (a:...) and tracked keys (k:...) recorded apart.
struct SplitRecorder {
    explicit SplitRecorder(uint64_t n) : adopted(n), tracked(n) {}
    Recorder adopted, tracked;
};

int split_handler(kw_event_t *ev, void *opaque) {
    auto *s = static_cast<SplitRecorder *>(opaque);
    size_t len = 0;
    const char *key = static_cast<const char *>(kw_event_key(ev, &len));
    return record_handler(ev, len > 0 && key[0] == 'a' ? &s->adopted : &s->tracked);
}

struct AdoptLateness {
    Delivery adopted, tracked, native;
};

AdoptLateness adopt_lateness(const Options &o) {
    const uint64_t n = o.adopt_keys;
    AdoptLateness out;
    {
        auto rp = fresh_server(o);
        adopt_notifications(*rp);
        write_background(rp->port(), o.background);
        SplitRecorder rec(n);
        Engine engine(rp->url(), split_handler, &rec, {{"adopt.rules", "prefix=a:"}});
        engine.start();
        const double est =
            estimate_native_seconds(*rp, n) + estimate_track_seconds(*rp, o.threads, o.batch, n);
        const int64_t t0 = wall_ms_int() + int64_t(est * 1250) + o.lead_ms + 100;
        auto deadline = [&](uint64_t i) {
            return t0 + int64_t(double(o.spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
        };
        write_plain(rp->port(), "a:", n, deadline);
        track_parallel(
            rp->url(), "", o.threads, o.batch, n,
            [&](uint64_t i, char *buf) {
                return size_t(snprintf(buf, 64, "k:%013lld:%07llu",
                                       static_cast<long long>(deadline(i)),
                                       static_cast<unsigned long long>(i)));
            },
            [&](uint64_t i) { return deadline(i) - wall_ms_int(); });
        const double gap = double(t0) - wall_ms();
        const double last = double(deadline(n - 1));
        await_arrivals([&] { return std::min(rec.adopted.count(), rec.tracked.count()); }, n,
                       last + double(o.wait_ms));
        sleep_ms(50);
        engine.print_stats();
        const int64_t late = engine.stat("adopt.late"), adopted = engine.stat("adopt.adopted");
        engine.stop();
        out.adopted = summarize(rec.adopted.late, rec.adopted.at, rec.adopted.count(), n,
                                last + double(o.wait_ms));
        out.tracked = summarize(rec.tracked.late, rec.tracked.at, rec.tracked.count(), n,
                                last + double(o.wait_ms));
        printf(
            "    keywatch: %s background keys; %s adopted (SET PXAT) and %s tracked keys, first "
            "deadline %.1f s after the writing; adopt.adopted %s, adopt.late %s\n",
            with_commas(double(o.background)).c_str(), with_commas(double(n)).c_str(),
            with_commas(double(n)).c_str(), gap / 1000, with_commas(double(adopted)).c_str(),
            with_commas(double(late)).c_str());
    }
    Options native = o;
    native.keys = n;
    out.native = lateness_native(native);
    return out;
}

struct Adopt {
    double rate = 0;  // keys/s adopted (one engine)
    double cpu_base = 0, cpu_one = 0, cpu_two = 0, cpu_snap = 0, cpu_track = 0;  // us/key
    double cpu_listen = 0, cpu_listen_ch = 0;                     // a Listener (patterns, channels)
    double cpu_base_exp = 0, cpu_one_exp = 0, cpu_track_exp = 0;  // through expiry
    double mem_base = 0, mem_one = 0, mem_snap = 0, mem_track = 0;  // B/key
    CatchUp scan;
    AdoptLateness late;
};

Adopt adopt_round(const Options &o, int round) {
    Adopt r;
    if (o.adopt_parts.count("cost")) {
        auto rp = fresh_server(o);
        adopt_notifications(*rp);
        const double n = double(o.keys);
        // Alternated per round, so that a drift in the machine's load is shared out.
        double ignored = 0;
        std::vector<PassSpec> variants = {
            {"no engine (baseline)", 0, "", false, 0, false, &r.cpu_base, &r.mem_base},
            {"1 engine", 1, "prefix=a:", false, 0, false, &r.cpu_one, &r.mem_one},
            {"2 engines", 2, "prefix=a:", false, 0, false, &r.cpu_two, &ignored},
            {"kw_client_track", 0, "", true, 0, false, &r.cpu_track, &r.mem_track},
            {"listener, patterns", 0, "", false, 1, false, &r.cpu_listen, nullptr},
            {"listener, channels", 0, "", false, 2, false, &r.cpu_listen_ch, nullptr},
            {"no engine, to expiry", 0, "", false, 0, true, &r.cpu_base_exp, nullptr},
            {"1 engine, to expiry", 1, "prefix=a:", false, 0, true, &r.cpu_one_exp, nullptr},
            {"track, to expiry", 1, "", true, 0, true, &r.cpu_track_exp, nullptr}};
        if (o.adopt_snapshot)
            variants.push_back({"1 engine, snapshot", 1, "prefix=a: snapshot=true", false, 0, false,
                                &r.cpu_snap, &r.mem_snap});
        if (round % 2) std::reverse(variants.begin() + 1, variants.end());
        for (const PassSpec &v : variants) {
            AdoptPass p = adopt_pass(o, *rp, v);
            *v.cpu = p.redis_cpu_s * 1e6 / n;
            if (v.mem) *v.mem = p.memory_b / n;
            if (v.engines == 1 && !v.to_expiry && v.rules == "prefix=a:") r.rate = n / p.adopted_s;
            const std::string adopted = v.engines && !v.rules.empty()
                                            ? ", adopted " + with_commas(double(p.adopted)) +
                                                  " by " + fixed(p.adopted_s, 2) + " s"
                                            : "";
            printf(
                "    %-20s written in %.2f s%s; Redis %.2f us/key; used_memory +%.1f B/key\n"
                "      %s\n",
                v.name, p.write_s, adopted.c_str(), *v.cpu, p.memory_b / n,
                cost_text(p.parts).c_str());
        }
        printf(
            "    Redis CPU per key: notifications to one listener %.2f us (with channels %.2f "
            "us); through expiry: plain SET %.2f us, adopted +%.2f us, kw_client_track %.2f "
            "us\n",
            r.cpu_listen - r.cpu_base, r.cpu_listen_ch - r.cpu_base, r.cpu_base_exp,
            r.cpu_one_exp - r.cpu_base_exp, r.cpu_track_exp);
        flushall(*rp);
        const std::string snap_cpu =
            o.adopt_snapshot ? ", snapshot " + fixed(r.cpu_snap - r.cpu_base, 2) + " us" : "";
        const std::string snap_mem =
            o.adopt_snapshot ? ", snapshot +" + fixed(r.mem_snap - r.mem_base, 1) + " B" : "";
        printf(
            "    adoption %s keys/s; Redis CPU per key above the app's own SET: 1 engine %.2f us, "
            "2 engines %.2f us%s; kw_client_track %.2f us (its SET included), plain SET %.2f "
            "us\n    memory per key above plain SET PX (%.1f B): adopted %+.1f B%s, "
            "kw_client_track %+.1f B\n",
            with_commas(r.rate).c_str(), r.cpu_one - r.cpu_base, r.cpu_two - r.cpu_base,
            snap_cpu.c_str(), r.cpu_track, r.cpu_base, r.mem_base, r.mem_one - r.mem_base,
            snap_mem.c_str(), r.mem_track - r.mem_base);
        fflush(stdout);
    }
    if (o.adopt_parts.count("catchup")) r.scan = catchup_round(o);
    fflush(stdout);
    if (!o.adopt_parts.count("lateness")) return r;
    r.late = adopt_lateness(o);
    print_delivery("adopted", r.late.adopted, false);
    print_delivery("tracked", r.late.tracked, false);
    print_delivery("native", r.late.native, true);
    return r;
}

// ---- Main ---------------------------------------------------------------------------------

struct Results {
    std::vector<Delivery> lat_kw, lat_native;
    std::vector<Burst> burst_kw, burst_native;
    std::vector<Track> track;
    std::vector<E2e> e2e;
    std::vector<Memory> memory;
    std::vector<Adopt> adopt;
};

void row(const std::string &name, const std::string &kw, const std::string &base,
         const std::string &target, bool pass) {
    printf("  %-38s %-22s %-24s %-20s %s\n", name.c_str(), kw.c_str(), base.c_str(), target.c_str(),
           pass ? "PASS" : "FAIL");
}

void adopt_summary(const Options &o, const std::vector<Adopt> &a) {
    auto m = [&](double Adopt::*f) { return med(a, [f](const Adopt &x) { return x.*f; }); };
    if (o.adopt_parts.count("cost")) {
        row("adoption rate (1 engine)", fmt_rate(m(&Adopt::rate)), "-", "-", true);
        const double base = m(&Adopt::cpu_base);
        row("Redis CPU per adopted key", fixed(m(&Adopt::cpu_one) - base, 2) + " us",
            "track " + fixed(m(&Adopt::cpu_track), 2) + " us", "-", true);
        row("  with 2 engines", fixed(m(&Adopt::cpu_two) - base, 2) + " us",
            "SET PX " + fixed(base, 2) + " us", "-", true);
        row("memory per adopted key",
            "+" + fixed(m(&Adopt::mem_one) - m(&Adopt::mem_base), 1) + " B",
            "SET PX " + fixed(m(&Adopt::mem_base), 1) + " B", "-", true);
    }
    if (o.adopt_parts.count("catchup")) {
        const double scan = med(a, [](const Adopt &x) { return x.scan.rate; });
        row("catch-up scan rate", fmt_rate(scan),
            "probe p99 " + fmt_ms(med(a, [](const Adopt &x) { return x.scan.probe_p99; })) +
                " (idle " + fmt_ms(med(a, [](const Adopt &x) { return x.scan.probe_base_p99; })) +
                ")",
            ">= 200,000/s", scan >= 200000);
    }
    if (!o.adopt_parts.count("lateness")) return;
    const double ap99 = med(a, [](const Adopt &x) { return x.late.adopted.p99; });
    const double tp99 = med(a, [](const Adopt &x) { return x.late.tracked.p99; });
    row("adopted lateness p99 (+bg keys)", fmt_ms(ap99),
        "tracked " + fmt_ms(tp99) + ", native " +
            fmt_ms(med(a, [](const Adopt &x) { return x.late.native.p99; })),
        "<= 2x tracked", ap99 <= 2 * tp99);
    row("adopted lateness p50 / max",
        fmt_ms(med(a, [](const Adopt &x) { return x.late.adopted.p50; })) + " / " +
            fmt_ms(med(a, [](const Adopt &x) { return x.late.adopted.max; })),
        "tracked " + fmt_ms(med(a, [](const Adopt &x) { return x.late.tracked.p50; })) + " / " +
            fmt_ms(med(a, [](const Adopt &x) { return x.late.tracked.max; })),
        "-", true);
}

void summary(const Options &o, const Results &r) {
    printf("\n== Summary: medians of %d round(s) ==\n", o.rounds);
    printf("  %-38s %-22s %-24s %-20s %s\n", "measurement", "keywatch", "baseline", "target",
           "verdict");
    if (!r.lat_kw.empty()) {
        auto g = [](const Delivery &d) { return d.p99; };
        auto m = [](const Delivery &d) { return d.max; };
        auto p = [](const Delivery &d) { return d.p50; };
        auto w = [](const Delivery &d) { return double(d.within) / double(d.n); };
        double kp99 = med(r.lat_kw, g), kmax = med(r.lat_kw, m);
        row("lateness p50 (spread, +bg keys)", fmt_ms(med(r.lat_kw, p)),
            "native " + fmt_ms(med(r.lat_native, p)), "-", true);
        row("lateness p99", fmt_ms(kp99), "native " + fmt_ms(med(r.lat_native, g)), "<= 50 ms",
            kp99 <= 50);
        row("lateness max", fmt_ms(kmax), "native " + fmt_ms(med(r.lat_native, m)), "<= 250 ms",
            kmax <= 250);
        double kw = med(r.lat_kw, w);
        row("delivered by last deadline + " + fmt_ms(double(o.wait_ms)), fmt_pct(kw),
            "native " + fmt_pct(med(r.lat_native, w)), "100%", kw >= 1.0);
    }
    if (!r.burst_kw.empty()) {
        auto l = [](const Burst &b) { return b.last_ms; };
        auto rt = [](const Burst &b) { return b.rate; };
        auto p = [](const Burst &b) { return b.d.p99; };
        double last = med(r.burst_kw, l);
        row("burst: all started by deadline +", fmt_ms(last),
            "native " + fmt_ms(med(r.burst_native, l)), "<= 1 s", last <= 1000);
        row("burst p99 lateness", fmt_ms(med(r.burst_kw, p)),
            "native " + fmt_ms(med(r.burst_native, p)), "-", true);
        row("burst rate", fmt_rate(med(r.burst_kw, rt)),
            "native " + fmt_rate(med(r.burst_native, rt)), "-", true);
    }
    if (!r.track.empty()) {
        double ratio = med(r.track, [](const Track &t) { return t.kw / t.raw; });
        row("track throughput", fmt_rate(med(r.track, [](const Track &t) { return t.kw; })),
            "EVALSHA " + fmt_rate(med(r.track, [](const Track &t) { return t.raw; })),
            ">= 95% of EVALSHA", ratio >= 0.95);
        row("  kw / raw EVALSHA (per-round ratio)", fmt_pct(ratio),
            "SET PX " + fmt_rate(med(r.track, [](const Track &t) { return t.set; })), "-", true);
    }
    if (!r.e2e.empty()) {
        double kw = med(r.e2e, [](const E2e &e) { return e.kw; });
        row("expiries handled end to end", fmt_rate(kw),
            "Lua pop " + fmt_rate(med(r.e2e, [](const E2e &e) { return e.base; })), ">= 50,000/s",
            kw >= 50000);
    }
    if (!r.memory.empty()) {
        double ratio = med(r.memory, [](const Memory &m) { return m.kw / m.plain; });
        char kw[64], base[64], rt[64];
        snprintf(kw, sizeof kw, "%.1f B/key (%.2fx)",
                 med(r.memory, [](const Memory &m) { return m.kw; }), ratio);
        snprintf(base, sizeof base, "SET PX %.1f B/key",
                 med(r.memory, [](const Memory &m) { return m.plain; }));
        snprintf(rt, sizeof rt, "<= 2x");
        row("memory per tracked key", kw, base, rt, ratio <= 2.0);
    }
    if (!r.adopt.empty()) adopt_summary(o, r.adopt);
}

void run(const Options &o) {
    Results res;
    auto want = [&](const char *name) { return o.only.count(name) != 0; };
    for (int round = 0; round < o.rounds; round++) {
        printf("\n== Round %d/%d ==\n", round + 1, o.rounds);
        fflush(stdout);
        if (want("lateness")) {
            printf("  lateness: %s tracked keys over %.0f s, %s background keys with 1 h TTLs\n",
                   with_commas(double(o.keys)).c_str(), double(o.spread_ms) / 1000,
                   with_commas(double(o.background)).c_str());
            fflush(stdout);
            Delivery kw, nat;
            if (round % 2 == 0) {
                kw = lateness_keywatch(o);
                nat = lateness_native(o);
            } else {
                nat = lateness_native(o);
                kw = lateness_keywatch(o);
            }
            print_delivery("keywatch", kw, false);
            print_delivery("native", nat, true);
            res.lat_kw.push_back(kw);
            res.lat_native.push_back(nat);
            fflush(stdout);
        }
        if (want("burst")) {
            printf("  burst: %s keys sharing one deadline\n", with_commas(double(o.keys)).c_str());
            fflush(stdout);
            auto rp = fresh_server(o);
            Burst kw, nat;
            if (round % 2 == 0) {
                kw = burst_keywatch(o, *rp);
                flushall(*rp);
                nat = burst_native(o, *rp);
            } else {
                nat = burst_native(o, *rp);
                flushall(*rp);
                kw = burst_keywatch(o, *rp);
            }
            print_burst("keywatch", kw);
            print_burst("native", nat);
            res.burst_kw.push_back(kw);
            res.burst_native.push_back(nat);
            fflush(stdout);
        }
        if (want("track")) {
            printf("  track throughput\n");
            fflush(stdout);
            auto rp = fresh_server(o);
            res.track.push_back(track_round(o, *rp, round));
            fflush(stdout);
        }
        if (want("e2e")) {
            printf("  end to end: %s due tracked keys, no-op handler\n",
                   with_commas(double(o.keys)).c_str());
            fflush(stdout);
            auto rp = fresh_server(o);
            E2e e;
            if (round % 2 == 0) {
                e.kw = e2e_keywatch(o, *rp);
                flushall(*rp);
                e.base = e2e_baseline(o, *rp);
            } else {
                e.base = e2e_baseline(o, *rp);
                flushall(*rp);
                e.kw = e2e_keywatch(o, *rp);
            }
            printf("    keywatch %s, baseline %s\n", fmt_rate(e.kw).c_str(),
                   fmt_rate(e.base).c_str());
            res.e2e.push_back(e);
            fflush(stdout);
        }
        if (want("memory")) {
            printf("  memory: %s keys, 16-byte keys and values\n",
                   with_commas(double(o.keys)).c_str());
            fflush(stdout);
            auto rp = fresh_server(o);
            res.memory.push_back(memory_round(o, *rp, round));
            fflush(stdout);
        }
        if (want("adopt")) {
            printf("  adopt: %s keys another program writes, rule prefix=a:\n",
                   with_commas(double(o.keys)).c_str());
            fflush(stdout);
            res.adopt.push_back(adopt_round(o, round));
            fflush(stdout);
        }
    }
    summary(o, res);
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    if (!parse_args(argc, argv, &o)) return 1;
    // keywatch switches libevent to pthreads locking when its first loop starts; do it up
    // front so that the native subscriber runs on the same kind of event_base throughout.
    evthread_use_pthreads();
    signal(SIGPIPE, SIG_IGN);
    printf(
        "kw_bench_queue: keywatch %s, %d round(s), --keys %s, --background %s, "
        "--threads %d; redis-server with defaults + notify-keyspace-events Ex\n",
        kw_version_string(), o.rounds, with_commas(double(o.keys)).c_str(),
        with_commas(double(o.background)).c_str(), o.threads);
    try {
        run(o);
    } catch (const std::exception &e) {
        fflush(stdout);
        fprintf(stderr, "kw_bench_queue: %s\n", e.what());
        return 1;
    }
    return 0;
}
