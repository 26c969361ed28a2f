// kw_bench_queue: the reliable-delivery figures of issue 3 ("Performance"), each printed
// beside a baseline measured in the same run on the same kind of server, repeated for
// several rounds (--rounds), with medians and a verdict against the targets.
//
// Sub-benchmarks (--only lateness,burst,track,e2e,memory; all by default)
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
//  track     kw_track throughput, P client threads (--threads) each with its own client,
//            pipelines of --batch; against a raw pipelined EVALSHA of the equivalent
//            SET-plus-ZADD script and plain pipelined SET PX, same threads and batches,
//            same server. Each variant runs twice, in the order A B C C B A, each pass on
//            an emptied server, so that drifting load on a shared machine is shared out.
//            16-byte keys and values. Target: keywatch >= 80% of the raw EVALSHA rate
//            (median of the per-round ratios).
//  e2e       N tracked keys, all already due, then a default engine with a no-op handler is
//            started; rate = N / (time from kw_engine_start until items.acked reaches N).
//            Baseline: a minimal at-most-once consumer on the same server: a Lua pop
//            (ZRANGEBYSCORE LIMIT 500 + ZREM) of N due members, no lease, no ack, no PTTL.
//            Target >= 50k/s.
//  memory    INFO used_memory delta per item on a fresh server: N plain SET k v PX 3600000
//            vs N kw_track (no snapshot), 16-byte keys and values, FLUSHALL between.
//            Target: tracked <= 2x plain.
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
#include "keywatch.h"
#include "core/redis_process.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

// ---- Clocks, numbers, text ------------------------------------------------------------

const double kInf = std::numeric_limits<double>::infinity();

// Wall clock in ms with microsecond resolution: comparable with Redis's TIME.
double wall_ms() {
    return double(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()) /
           1000.0;
}

int64_t wall_ms_int() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

double mono_s() {
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()) /
           1e9;
}

void sleep_ms(int64_t ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

double median(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Percentile q of `total` samples of which `sorted` holds the finite ones (ascending); the
// missing ones are infinitely late. Nearest rank: the ceil(q * total)-th smallest.
double percentile(const std::vector<double> &sorted, uint64_t total, double q) {
    if (total == 0) return std::nan("");
    uint64_t rank = uint64_t(std::ceil(q * double(total)));
    if (rank < 1) rank = 1;
    if (rank > sorted.size()) return kInf;
    return sorted[rank - 1];
}

std::string fmt_ms(double ms) {
    char buf[64];
    if (std::isnan(ms)) return "n/a";
    if (std::isinf(ms)) return "missed";
    if (std::fabs(ms) >= 10000)
        snprintf(buf, sizeof buf, "%.2f s", ms / 1000);
    else if (std::fabs(ms) >= 100)
        snprintf(buf, sizeof buf, "%.0f ms", ms);
    else
        snprintf(buf, sizeof buf, "%.1f ms", ms);
    return buf;
}

std::string with_commas(double v) {
    if (std::isnan(v)) return "n/a";
    std::string digits = std::to_string(static_cast<long long>(v + 0.5));
    std::string out;
    int n = 0;
    for (size_t i = digits.size(); i-- > 0;) {
        if (n && n % 3 == 0 && digits[i] != '-') out.insert(out.begin(), ',');
        out.insert(out.begin(), digits[i]);
        n++;
    }
    return out;
}

std::string fmt_rate(double per_s) {
    return with_commas(per_s) + "/s";
}

std::string fmt_pct(double x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f%%", x * 100);
    return buf;
}

// ---- Options ----------------------------------------------------------------------------

const char *const kAll[] = {"lateness", "burst", "track", "e2e", "memory"};

struct Options {
    int rounds = 3;
    std::set<std::string> only = {std::begin(kAll), std::end(kAll)};
    uint64_t keys = 100000;
    uint64_t background = 1000000;
    int threads = 4;
    int batch = 100;
    uint64_t track_ops = 0;  // 0: 2 * keys
    int64_t spread_ms = 10000;
    int64_t lead_ms = 2000;        // lateness: first deadline this long after writing ends
    int64_t burst_lead_ms = 3000;  // burst: the deadline this long after writing ends
    int64_t wait_ms = 30000;       // how long after the last deadline arrivals are awaited
    std::vector<std::pair<std::string, std::string>> conf;  // engine options
    bool verbose = false;
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_queue [options]\n"
            "  --rounds R        measured rounds (default 3); medians are reported\n"
            "  --only LIST       comma-separated: lateness,burst,track,e2e,memory (default all)\n"
            "  --keys N          tracked keys per run (default 100000)\n"
            "  --background N    keys with 1 h TTLs present during the lateness runs\n"
            "                    (default 1000000)\n"
            "  --threads P       client threads for kw_track and the track baselines (default 4)\n"
            "  --batch B         commands per pipeline in the track benchmark (default 100)\n"
            "  --track-ops N     commands per variant in the track benchmark (default 2*keys)\n"
            "  --spread-ms MS    lateness: deadlines spread over this long (default 10000)\n"
            "  --wait-ms MS      arrivals awaited this long after the last deadline\n"
            "                    (default 30000)\n"
            "  --conf NAME=VALUE keywatch engine option (repeatable), e.g. --conf workers=2\n"
            "  --verbose         engine stats and info log lines\n");
}

bool parse_uint(const std::string &text, uint64_t min, uint64_t max, uint64_t *out) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || v < min || v > max) return false;
    *out = v;
    return true;
}

bool parse_args(int argc, char **argv, Options *o) {
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i], value;
        bool has_value = false;
        size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            exit(0);
        }
        if (arg == "--verbose") {
            o->verbose = true;
            continue;
        }
        if (!has_value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kw_bench_queue: %s needs a value\n", arg.c_str());
                return false;
            }
            value = argv[++i];
        }
        uint64_t n = 0;
        bool ok = true;
        if (arg == "--rounds") {
            ok = parse_uint(value, 1, 100, &n) && (o->rounds = int(n), true);
        } else if (arg == "--only") {
            o->only.clear();
            size_t start = 0;
            while (ok && start <= value.size()) {
                size_t comma = value.find(',', start);
                if (comma == std::string::npos) comma = value.size();
                std::string name = value.substr(start, comma - start);
                ok = std::find(std::begin(kAll), std::end(kAll), name) != std::end(kAll);
                o->only.insert(name);
                start = comma + 1;
            }
        } else if (arg == "--keys") {
            ok = parse_uint(value, 100, 100000000ull, &o->keys);
        } else if (arg == "--background") {
            ok = parse_uint(value, 0, 100000000ull, &o->background);
        } else if (arg == "--threads") {
            ok = parse_uint(value, 1, 64, &n) && (o->threads = int(n), true);
        } else if (arg == "--batch") {
            ok = parse_uint(value, 1, 100000, &n) && (o->batch = int(n), true);
        } else if (arg == "--track-ops") {
            ok = parse_uint(value, 100, 1000000000ull, &o->track_ops);
        } else if (arg == "--spread-ms") {
            ok = parse_uint(value, 0, 3600000, &n) && (o->spread_ms = int64_t(n), true);
        } else if (arg == "--wait-ms") {
            ok = parse_uint(value, 0, 3600000, &n) && (o->wait_ms = int64_t(n), true);
        } else if (arg == "--conf") {
            size_t e = value.find('=');
            ok = e != std::string::npos && e > 0;
            if (ok) o->conf.emplace_back(value.substr(0, e), value.substr(e + 1));
        } else {
            fprintf(stderr, "kw_bench_queue: unknown option %s (try --help)\n", arg.c_str());
            return false;
        }
        if (!ok) {
            fprintf(stderr, "kw_bench_queue: bad value '%s' for %s (try --help)\n", value.c_str(),
                    arg.c_str());
            return false;
        }
    }
    if (o->track_ops == 0) o->track_ops = 2 * o->keys;
    return true;
}

const Options *g_opts = nullptr;

// A failure of the benchmark itself (not of a target): aborts the run with exit 1.
struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- Redis helpers ----------------------------------------------------------------------

struct ContextDeleter {
    void operator()(redisContext *c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

ContextPtr connect_sync(int port) {
    timeval tv{5, 0};
    ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, tv));
    if (!c || c->err)
        throw BenchError("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                         (c ? c->errstr : "out of memory"));
    timeval ct{60, 0};
    redisSetTimeout(c.get(), ct);
    return c;
}

keywatch::RedisProcess::Options server_options() {
    keywatch::RedisProcess::Options o;
    o.notify = "Ex";  // Redis defaults plus the expired keyevents
    return o;
}

std::unique_ptr<keywatch::RedisProcess> fresh_server() {
    auto rp = std::make_unique<keywatch::RedisProcess>(server_options());
    rp->start();
    return rp;
}

int64_t info_int(const keywatch::RedisProcess &rp, const std::string &section,
                 const std::string &name) {
    std::string info = rp.command({"INFO", section});
    size_t pos = info.find("\n" + name + ":");
    if (pos == std::string::npos) pos = info.rfind(name + ":", 0) == 0 ? 0 : std::string::npos;
    if (pos == std::string::npos) throw BenchError("INFO " + section + " has no " + name);
    if (info[pos] == '\n') pos++;
    return std::strtoll(info.c_str() + pos + name.size() + 1, nullptr, 10);
}

double info_double(const keywatch::RedisProcess &rp, const std::string &section,
                   const std::string &name) {
    std::string info = rp.command({"INFO", section});
    size_t pos = info.find(name + ":");
    while (pos != std::string::npos && pos > 0 && info[pos - 1] != '\n')
        pos = info.find(name + ":", pos + 1);
    if (pos == std::string::npos) throw BenchError("INFO " + section + " has no " + name);
    return std::strtod(info.c_str() + pos + name.size() + 1, nullptr);
}

// CPU seconds used so far by redis-server (INFO cpu, user + sys) and by this process.
struct Cpu {
    double redis = 0, self = 0;
};

Cpu cpu_now(const keywatch::RedisProcess &rp) {
    Cpu c;
    c.redis = info_double(rp, "cpu", "used_cpu_user") + info_double(rp, "cpu", "used_cpu_sys");
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    c.self = double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
    return c;
}

// "Redis X us, client Y us" per item between two readings.
std::string cpu_per_item(const Cpu &a, const Cpu &b, double items, const char *self_name) {
    char buf[128];
    snprintf(buf, sizeof buf, "CPU per item: redis %.1f us, %s %.1f us",
             (b.redis - a.redis) * 1e6 / items, self_name, (b.self - a.self) * 1e6 / items);
    return buf;
}

// "redis X% of a core, <self_name> Y%" between two readings `seconds` apart.
std::string cpu_util(const Cpu &a, const Cpu &b, double seconds, const char *self_name) {
    char buf[128];
    snprintf(buf, sizeof buf, "CPU: redis %.0f%% of a core, %s %.0f%%",
             (b.redis - a.redis) * 100 / seconds, self_name, (b.self - a.self) * 100 / seconds);
    return buf;
}

// usec_per_call of one command from INFO commandstats (0 if it was not called).
double usec_per_call(const keywatch::RedisProcess &rp, const std::string &cmd) {
    std::string info = rp.command({"INFO", "commandstats"});
    size_t pos = info.find("cmdstat_" + cmd + ":");
    if (pos == std::string::npos) return 0;
    size_t u = info.find("usec_per_call=", pos);
    return u == std::string::npos ? 0 : std::strtod(info.c_str() + u + 14, nullptr);
}

// --verbose: INFO commandstats (commands called from scripts are counted too), compact.
void print_commandstats(const keywatch::RedisProcess &rp, const char *what) {
    if (!g_opts->verbose) return;
    std::string info = rp.command({"INFO", "commandstats"});
    printf("      commandstats (%s):\n", what);
    size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
        size_t end = info.find_first_of("\r\n", pos);
        std::string line = info.substr(pos + 8, end - pos - 8);
        size_t rej = line.find(",rejected_calls");
        if (rej != std::string::npos) line = line.substr(0, rej);
        printf("        %s\n", line.c_str());
        pos = end;
    }
}

void flushall(const keywatch::RedisProcess &rp) {
    std::string r = rp.command({"FLUSHALL", "SYNC"});
    if (r != "OK") throw BenchError("FLUSHALL: " + r);
}

// Sends commands [begin, end) in pipelines of `batch`, one batch in flight; fill(i, argv,
// lens) describes command i and returns its argc (the buffers may be reused: hiredis
// copies the command when it is appended). Throws on a connection error or error reply.
template <typename Fill>
void pipelined(redisContext *c, uint64_t begin, uint64_t end, int batch, Fill &&fill) {
    const char *argv[16];
    size_t lens[16];
    for (uint64_t i = begin; i < end;) {
        uint64_t stop = std::min<uint64_t>(end, i + uint64_t(batch));
        for (uint64_t j = i; j < stop; j++) {
            int argc = fill(j, argv, lens);
            redisAppendCommandArgv(c, argc, argv, lens);
        }
        for (uint64_t j = i; j < stop; j++) {
            void *raw = nullptr;
            if (redisGetReply(c, &raw) != REDIS_OK)
                throw BenchError(std::string("pipelined command: ") + c->errstr);
            auto *r = static_cast<redisReply *>(raw);
            if (r->type == REDIS_REPLY_ERROR) {
                std::string e(r->str, r->len);
                freeReplyObject(r);
                throw BenchError("pipelined command: " + e);
            }
            freeReplyObject(r);
        }
        i = stop;
    }
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

// ---- keywatch helpers -------------------------------------------------------------------

void on_log(kw_log_level level, const char *message, void *) {
    if (level < KW_LOG_WARN && !g_opts->verbose) return;
    // The same warning from every engine (e.g. about notify flags) is printed once.
    static std::mutex mu;
    static std::set<std::string> seen;
    std::string shape;
    for (const char *p = message; *p; p++)
        if (*p < '0' || *p > '9') shape += *p;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (!seen.insert(shape).second) return;
    }
    fprintf(stderr, "    [keywatch %s] %s\n",
            level >= KW_LOG_ERROR  ? "error"
            : level == KW_LOG_WARN ? "warning"
                                   : "info",
            message);
}

kw_conf_t *make_conf(const std::string &url, const std::string &ns, bool engine_options) {
    kw_conf_t *conf = kw_conf_new();
    if (!conf) throw BenchError("kw_conf_new: out of memory");
    char err[512];
    auto set = [&](const std::string &name, const std::string &value) {
        if (kw_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != KW_OK) {
            kw_conf_free(conf);
            throw BenchError("kw_conf_set " + name + "=" + value + ": " + err);
        }
    };
    set("redis.url", url);
    if (!ns.empty()) set("namespace", ns);
    if (engine_options)
        for (auto &kv : g_opts->conf) set(kv.first, kv.second);
    return conf;
}

struct Client {
    kw_client_t *c = nullptr;
    Client(const std::string &url, const std::string &ns = "") {
        kw_conf_t *conf = make_conf(url, ns, false);
        char err[512] = "";
        int rc = kw_client_new(conf, &c, err, sizeof err);
        kw_conf_free(conf);
        if (rc != KW_OK) throw BenchError(std::string("kw_client_new: ") + err);
    }
    ~Client() { kw_client_free(c); }
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    void check(int rc, const char *what) {
        if (rc != KW_OK)
            throw BenchError(std::string(what) + ": " + kw_err_name(rc) + ": " +
                             kw_client_last_error(c));
    }
};

struct Engine {
    kw_engine_t *e = nullptr;
    Engine(const std::string &url, kw_handler_fn fn, void *opaque) {
        kw_conf_t *conf = make_conf(url, "", true);
        char err[512] = "";
        int rc = kw_engine_new(conf, &e, err, sizeof err);
        kw_conf_free(conf);
        if (rc != KW_OK) throw BenchError(std::string("kw_engine_new: ") + err);
        kw_filter_t *f = kw_filter_new();
        rc = kw_filter_set(f, "events", "expired", err, sizeof err);
        if (rc == KW_OK) rc = kw_engine_add_handler(e, f, fn, opaque);
        kw_filter_free(f);
        if (rc == KW_OK) rc = kw_engine_set_log_cb(e, on_log, nullptr);
        if (rc != KW_OK) throw BenchError(std::string("engine set-up: ") + kw_strerror(rc));
    }
    void start() {
        int rc = kw_engine_start(e);
        if (rc != KW_OK)
            throw BenchError(std::string("kw_engine_start: ") + kw_err_name(rc) + ": " +
                             kw_engine_last_error(e));
    }
    int64_t stat(const char *name) {
        int64_t v = 0;
        kw_engine_stat(e, name, &v);
        return v;
    }
    void print_stats() {
        if (!g_opts->verbose) return;
        char *json = kw_engine_stats_json(e);
        if (json) printf("      engine stats: %s\n", json);
        kw_free(json);
    }
    // Joins the workers: what handlers wrote is complete and visible afterwards.
    void stop() {
        int rc = kw_engine_stop(e, 5000);
        if (rc != KW_OK)
            fprintf(stderr, "    kw_engine_stop: %s: %s\n", kw_err_name(rc),
                    kw_engine_last_error(e));
    }
    ~Engine() {
        if (!e) return;
        kw_engine_stop(e, 5000);
        kw_engine_free(e);
    }
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;
};

// What a handler records: per first delivery of a tracked key, its lateness and when the
// handler started. Slots are claimed with an atomic index; read after the engine stopped
// or after the count says they are written (the count is bumped after the write).
struct Recorder {
    explicit Recorder(uint64_t cap) : late(cap), at(cap) {}
    std::vector<double> late, at;
    std::atomic<uint64_t> slot{0}, written{0}, other{0};
    std::atomic<uint64_t> by_source[4] = {};

    uint64_t count() const { return std::min<uint64_t>(written.load(), late.size()); }
};

int record_handler(const kw_event_t *ev, void *opaque) {
    double now = wall_ms();
    auto *r = static_cast<Recorder *>(opaque);
    if (kw_event_attempt(ev) != 1 || strcmp(kw_event_queue(ev), "keys") != 0) {
        r->other.fetch_add(1, std::memory_order_relaxed);
        return KW_RESULT_ACK;
    }
    uint64_t i = r->slot.fetch_add(1, std::memory_order_relaxed);
    if (i < r->late.size()) {
        r->late[i] = now - double(kw_event_deadline_ms(ev));
        r->at[i] = now;
    }
    int s = kw_event_source(ev);
    if (s >= 0 && s < 4) r->by_source[s].fetch_add(1, std::memory_order_relaxed);
    r->written.fetch_add(1, std::memory_order_release);
    return KW_RESULT_ACK;
}

int noop_handler(const kw_event_t *, void *) {
    return KW_RESULT_ACK;
}

// Tracks keys [0, n) with `threads` clients (thread t takes every index i with i % threads
// == t), in pipelines of `batch`. key(i, buf) writes the key and returns its length;
// ttl(i) is evaluated when the command is queued. Returns the seconds it took.
double track_parallel(const std::string &url, const std::string &ns, int threads, int batch,
                      uint64_t n, const std::function<size_t(uint64_t, char *)> &key,
                      const std::function<int64_t(uint64_t)> &ttl) {
    std::vector<std::unique_ptr<Client>> clients;
    for (int t = 0; t < threads; t++) clients.push_back(std::make_unique<Client>(url, ns));
    std::vector<std::string> errors(static_cast<size_t>(threads));
    static const char kValue[] = "vvvvvvvvvvvvvvvv";
    double t0 = mono_s();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            Client &c = *clients[size_t(t)];
            std::vector<int> statuses(static_cast<size_t>(batch));
            char buf[64];
            try {
                uint64_t i = uint64_t(t);
                while (i < n) {
                    c.check(kw_client_pipeline_begin(c.c), "kw_client_pipeline_begin");
                    for (int b = 0; b < batch && i < n; b++, i += uint64_t(threads)) {
                        size_t len = key(i, buf);
                        c.check(kw_track(c.c, buf, len, kValue, 16, std::max<int64_t>(ttl(i), 1), 0,
                                         nullptr),
                                "kw_track");
                    }
                    size_t count = 0;
                    c.check(kw_client_pipeline_end(c.c, statuses.data(), statuses.size(), &count),
                            "kw_track (pipelined)");
                }
            } catch (const std::exception &e) {
                errors[size_t(t)] = e.what();
            }
        });
    }
    for (auto &th : pool) th.join();
    for (auto &e : errors)
        if (!e.empty()) throw BenchError(e);
    return mono_s() - t0;
}

// How long tracking n keys will take here and now, measured on a small sample in a
// namespace no engine serves (removed afterwards). Used to place deadlines after the
// writing ends.
double estimate_track_seconds(const keywatch::RedisProcess &rp, int threads, uint64_t n) {
    uint64_t sample = std::min<uint64_t>(n, uint64_t(threads) * 500);
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "cal:%012llu", static_cast<unsigned long long>(i)));
    };
    double s = track_parallel(rp.url(), "kwcal", threads, 100, sample, key,
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

// ---- The native subscriber ----------------------------------------------------------------

// A raw hiredis + libevent subscriber on __keyevent@0__:expired. For keys of the form
// "<p>:<deadline ms, 13 digits>:..." it records (arrival - deadline) and the arrival time.
class NativeSubscriber {
  public:
    NativeSubscriber(int port, uint64_t cap) : port_(port) {
        late_.reserve(cap);
        at_.reserve(cap);
    }
    ~NativeSubscriber() { stop(); }

    void start() {
        thread_ = std::thread([this] { run(); });
        double deadline = mono_s() + 5;
        while (state_.load() == kStarting && mono_s() < deadline) sleep_ms(1);
        if (state_.load() != kReady) {
            stop();
            throw BenchError("native subscriber: " + (detail_.empty()
                                                          ? std::string("no SUBSCRIBE reply in 5 s")
                                                          : detail_));
        }
    }
    void stop() {
        if (!thread_.joinable()) return;
        stop_ = true;
        thread_.join();
    }
    uint64_t count() const { return received_.load(); }
    // After stop() only.
    const std::vector<double> &late() const { return late_; }
    const std::vector<double> &at() const { return at_; }
    int disconnects() const { return disconnects_.load(); }

  private:
    enum { kStarting, kReady, kFailed };

    void run() {
        event_base *base = event_base_new();
        tick_ = event_new(base, -1, EV_PERSIST, on_tick, this);
        timeval tv{0, 20000};
        event_add(tick_, &tv);
        ac_ = redisAsyncConnect("127.0.0.1", port_);
        if (!ac_ || ac_->err) {
            detail_ = std::string("connect: ") + (ac_ ? ac_->errstr : "out of memory");
            state_ = kFailed;
            if (ac_) redisAsyncFree(ac_);
            ac_ = nullptr;
        } else {
            ac_->data = this;
            redisLibeventAttach(ac_, base);
            redisAsyncSetConnectCallback(ac_, on_connect);
            redisAsyncSetDisconnectCallback(ac_, on_disconnect);
            redisAsyncCommand(ac_, on_reply, this, "SUBSCRIBE __keyevent@0__:expired");
        }
        event_base_dispatch(base);
        event_free(tick_);
        event_base_free(base);
    }

    static void on_connect(const redisAsyncContext *ac, int status) {
        auto *self = static_cast<NativeSubscriber *>(ac->data);
        if (status != REDIS_OK) {
            self->detail_ = std::string("connect: ") + ac->errstr;
            self->state_ = kFailed;
            self->ac_ = nullptr;
        }
    }
    static void on_disconnect(const redisAsyncContext *ac, int status) {
        auto *self = static_cast<NativeSubscriber *>(ac->data);
        self->ac_ = nullptr;
        if (status == REDIS_OK) return;
        self->disconnects_++;
        self->state_ = kFailed;
    }
    static void on_reply(redisAsyncContext *, void *reply, void *privdata) {
        double now = wall_ms();
        auto *self = static_cast<NativeSubscriber *>(privdata);
        auto *r = static_cast<redisReply *>(reply);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
        const redisReply *kind = r->element[0];
        if (kind->len == 7 && memcmp(kind->str, "message", 7) == 0) {
            const redisReply *key = r->element[2];
            if (key->type != REDIS_REPLY_STRING || key->len < 16 || key->str[1] != ':') return;
            int64_t deadline = std::strtoll(key->str + 2, nullptr, 10);
            self->late_.push_back(now - double(deadline));
            self->at_.push_back(now);
            self->received_.fetch_add(1, std::memory_order_release);
        } else if (kind->len == 9 && memcmp(kind->str, "subscribe", 9) == 0) {
            self->state_ = kReady;
        }
    }
    static void on_tick(evutil_socket_t, short, void *arg) {
        auto *self = static_cast<NativeSubscriber *>(arg);
        if (!self->stop_.load()) return;
        if (self->ac_) redisAsyncDisconnect(self->ac_);
        event_del(self->tick_);
    }

    int port_;
    std::thread thread_;
    event *tick_ = nullptr;
    redisAsyncContext *ac_ = nullptr;
    std::atomic<int> state_{kStarting};
    std::atomic<bool> stop_{false};
    std::atomic<int> disconnects_{0};
    std::atomic<uint64_t> received_{0};
    std::string detail_;
    std::vector<double> late_, at_;  // loop thread until stop()
};

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

// ---- Delivery figures ---------------------------------------------------------------------

struct Delivery {
    uint64_t n = 0;                       // keys expected
    uint64_t delivered = 0;               // arrived at all
    uint64_t within = 0;                  // arrived no later than the window's end
    double p50 = 0, p99 = 0, max = 0;     // over all n; a missing key is infinitely late
    double dp50 = 0, dp99 = 0, dmax = 0;  // over the delivered ones only
    double first_at = 0, last_at = 0;     // wall ms of the first and last arrival
    uint64_t src[4] = {0, 0, 0, 0};
    double write_s = 0;  // time the writing took
    double gap_ms = 0;   // first deadline minus end of writing
};

Delivery summarize(const std::vector<double> &late_in, const std::vector<double> &at,
                   uint64_t count, uint64_t n, double window_end) {
    Delivery d;
    d.n = n;
    std::vector<double> late;
    late.reserve(count);
    d.first_at = kInf;
    d.last_at = -kInf;
    for (uint64_t i = 0; i < count; i++) {
        if (at[i] > window_end) continue;
        late.push_back(late_in[i]);
        d.first_at = std::min(d.first_at, at[i]);
        d.last_at = std::max(d.last_at, at[i]);
    }
    d.delivered = count;
    d.within = late.size();
    std::sort(late.begin(), late.end());
    d.p50 = percentile(late, n, 0.50);
    d.p99 = percentile(late, n, 0.99);
    d.max = late.size() >= n && !late.empty() ? late.back() : kInf;
    d.dp50 = percentile(late, late.size(), 0.50);
    d.dp99 = percentile(late, late.size(), 0.99);
    d.dmax = late.empty() ? std::nan("") : late.back();
    return d;
}

void print_delivery(const char *label, const Delivery &d, bool show_delivered_only) {
    printf("    %-9s p50 %-9s p99 %-9s max %-9s  within window %s/%s (%s)", label,
           fmt_ms(d.p50).c_str(), fmt_ms(d.p99).c_str(), fmt_ms(d.max).c_str(),
           with_commas(double(d.within)).c_str(), with_commas(double(d.n)).c_str(),
           fmt_pct(double(d.within) / double(d.n)).c_str());
    if (show_delivered_only && d.within > 0 && d.within < d.n)
        printf("; of those: p50 %s p99 %s max %s", fmt_ms(d.dp50).c_str(), fmt_ms(d.dp99).c_str(),
               fmt_ms(d.dmax).c_str());
    printf("\n");
}

// Waits until `count()` reaches n or the wall clock passes until_ms.
template <typename Count>
void await_arrivals(Count &&count, uint64_t n, double until_ms) {
    while (count() < n && wall_ms() < until_ms) sleep_ms(20);
}

// ---- 1. lateness ------------------------------------------------------------------------

Delivery lateness_keywatch(const Options &o) {
    auto rp = fresh_server();
    double t = mono_s();
    write_background(rp->port(), o.background);
    double bg_s = mono_s() - t;
    Recorder rec(o.keys);
    Engine engine(rp->url(), record_handler, &rec);
    engine.start();
    double est = estimate_track_seconds(*rp, o.threads, o.keys);
    int64_t t0 = wall_ms_int() + int64_t(est * 1250) + o.lead_ms + 100;
    uint64_t n = o.keys;
    auto deadline = [&](uint64_t i) {
        return t0 + int64_t(double(o.spread_ms) * double(i) / double(n > 1 ? n - 1 : 1));
    };
    double write_s = track_parallel(
        rp->url(), "", o.threads, 100, n,
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
    auto rp = fresh_server();
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

struct Burst {
    Delivery d;
    double last_ms = 0;  // last handler start (arrival) minus the shared deadline
    double rate = 0;     // n / (last - first arrival)
};

Burst finish_burst(Delivery d, int64_t deadline) {
    Burst b;
    b.d = d;
    b.last_ms = d.within == d.n ? d.last_at - double(deadline) : kInf;
    double span = (d.last_at - d.first_at) / 1000;
    b.rate = d.within > 1 && span > 0 ? double(d.within) / span : std::nan("");
    return b;
}

Burst burst_keywatch(const Options &o, const keywatch::RedisProcess &rp) {
    Recorder rec(o.keys);
    Engine engine(rp.url(), record_handler, &rec);
    engine.start();
    uint64_t n = o.keys;
    double est = estimate_track_seconds(rp, o.threads, n);
    int64_t deadline = wall_ms_int() + int64_t(est * 1250) + o.burst_lead_ms + 100;
    double write_s = track_parallel(
        rp.url(), "", o.threads, 100, n,
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
    printf(
        "    keywatch: %s tracked in %.1f s, deadline %.1f s after; sources: sweep %s, "
        "notification %s; sweep calls %s; until all acked: %s; EVALSHA %.0f us/call\n",
        with_commas(double(n)).c_str(), write_s, gap / 1000,
        with_commas(double(d.src[KW_SOURCE_SWEEP])).c_str(),
        with_commas(double(d.src[KW_SOURCE_NOTIFICATION])).c_str(),
        with_commas(double(sweeps)).c_str(), cpu_per_item(a, b, double(n), "engine").c_str(),
        usec_per_call(rp, "evalsha"));
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
    return finish_burst(d, deadline);
}

void print_burst(const char *label, const Burst &b) {
    printf(
        "    %-9s all in by deadline + %-9s rate %-12s lateness p50 %s p99 %s max %s; "
        "delivered %s/%s\n",
        label, fmt_ms(b.last_ms).c_str(), fmt_rate(b.rate).c_str(), fmt_ms(b.d.p50).c_str(),
        fmt_ms(b.d.p99).c_str(), fmt_ms(b.d.max).c_str(), with_commas(double(b.d.within)).c_str(),
        with_commas(double(b.d.n)).c_str());
}

// ---- 3. track throughput ------------------------------------------------------------------

const char *const kEquivalentScript =
    "redis.call('SET',KEYS[1],ARGV[1],'PX',ARGV[2]); "
    "redis.call('ZADD',KEYS[2],ARGV[3],KEYS[1])";

// Runs `threads` workers over ops [0, total): worker t takes [t*per, (t+1)*per) in batches
// of `batch` via fn(t, begin, end). Per-thread set-up (connections) happens before the
// clock starts. Returns the seconds the work took (total must be a multiple of threads).
double run_threads(int threads, uint64_t total, int batch, const std::function<void(int)> &setup,
                   const std::function<void(int, uint64_t, uint64_t)> &fn) {
    for (int t = 0; t < threads; t++) setup(t);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::string> errors(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    uint64_t per = total / uint64_t(threads);
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready++;
            while (!go.load()) std::this_thread::yield();
            try {
                uint64_t begin = uint64_t(t) * per, end = begin + per;
                for (uint64_t i = begin; i < end; i += uint64_t(batch))
                    fn(t, i, std::min(end, i + uint64_t(batch)));
            } catch (const std::exception &e) {
                errors[size_t(t)] = e.what();
            }
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    double t0 = mono_s();
    go = true;
    for (auto &th : pool) th.join();
    double s = mono_s() - t0;
    for (auto &e : errors)
        if (!e.empty()) throw BenchError(e);
    return s;
}

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
                    c.check(kw_track(c.c, &keys[i * 16], 16, kValue, 16, 3600000, 0, nullptr),
                            "kw_track");
                size_t count = 0;
                c.check(kw_client_pipeline_end(c.c, statuses, 1024, &count),
                        "kw_track (pipelined)");
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
    const char *names[3] = {"kw_track", "raw EVALSHA", "plain SET"};
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
        "    kw_track %-13s raw EVALSHA %-13s plain SET PX %-13s kw/raw %s (%d threads, "
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

const char *const kPopScript =
    "local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, "
    "tonumber(ARGV[2])) "
    "if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end "
    "return #ids";

double e2e_keywatch(const Options &o, const keywatch::RedisProcess &rp) {
    uint64_t n = o.keys;
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "e%015llu", static_cast<unsigned long long>(i)));
    };
    double write_s =
        track_parallel(rp.url(), "", o.threads, 100, n, key, [](uint64_t) { return int64_t(1); });
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
    uint64_t popped = 0;
    Cpu a = cpu_now(rp);
    double t0 = mono_s();
    while (popped < n) {
        auto *r = static_cast<redisReply *>(
            redisCommand(c.get(), "EVALSHA %s 1 bench:due %s 500", sha.c_str(), now.c_str()));
        if (!r) throw BenchError(std::string("pop: ") + c->errstr);
        if (r->type != REDIS_REPLY_INTEGER) {
            std::string e = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "?";
            freeReplyObject(r);
            throw BenchError("pop: " + e);
        }
        long long got = r->integer;
        freeReplyObject(r);
        if (got == 0) break;
        popped += uint64_t(got);
    }
    double s = mono_s() - t0;
    Cpu b = cpu_now(rp);
    printf(
        "    baseline: %s due members popped in %.2f s (Lua ZRANGEBYSCORE+ZREM, 500 per call); "
        "%s\n",
        with_commas(double(popped)).c_str(), s,
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
        c.check(kw_track(c.c, "warm", 4, "x", 1, 3600000, 0, nullptr), "kw_track");
        c.check(kw_untrack(c.c, "warm", 4, 1), "kw_untrack");
        int64_t before = info_int(rp, "memory", "used_memory");
        std::vector<int> statuses(1000);
        for (uint64_t i = 0; i < n;) {
            c.check(kw_client_pipeline_begin(c.c), "kw_client_pipeline_begin");
            for (int b = 0; b < 1000 && i < n; b++, i++) {
                size_t len = mkkey(i);
                c.check(kw_track(c.c, key, len, kValue, 16, 3600000, 0, nullptr), "kw_track");
            }
            size_t count = 0;
            c.check(kw_client_pipeline_end(c.c, statuses.data(), statuses.size(), &count),
                    "kw_track (pipelined)");
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
        "    plain SET PX %.1f B/key, kw_track %.1f B/key (of which the due ZSET %.1f B) "
        "ratio %.2fx\n",
        m.plain, m.kw, m.due_zset, m.kw / m.plain);
    return m;
}

// ---- Main ---------------------------------------------------------------------------------

struct Results {
    std::vector<Delivery> lat_kw, lat_native;
    std::vector<Burst> burst_kw, burst_native;
    std::vector<Track> track;
    std::vector<E2e> e2e;
    std::vector<Memory> memory;
};

template <typename T, typename F>
double med(const std::vector<T> &v, F &&f) {
    std::vector<double> x;
    for (auto &e : v) x.push_back(f(e));
    return median(x);
}

void row(const std::string &name, const std::string &kw, const std::string &base,
         const std::string &target, bool pass) {
    printf("  %-38s %-22s %-24s %-20s %s\n", name.c_str(), kw.c_str(), base.c_str(), target.c_str(),
           pass ? "PASS" : "FAIL");
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
            ">= 80% of EVALSHA", ratio >= 0.8);
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
            auto rp = fresh_server();
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
            auto rp = fresh_server();
            res.track.push_back(track_round(o, *rp, round));
            fflush(stdout);
        }
        if (want("e2e")) {
            printf("  end to end: %s due tracked keys, no-op handler\n",
                   with_commas(double(o.keys)).c_str());
            fflush(stdout);
            auto rp = fresh_server();
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
            auto rp = fresh_server();
            res.memory.push_back(memory_round(o, *rp, round));
            fflush(stdout);
        }
    }
    summary(o, res);
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    if (!parse_args(argc, argv, &o)) return 1;
    g_opts = &o;
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
