// bench_util.h: what the benchmarks (kw_bench_queue, kw_bench_cluster, kw_bench_tls, the
// plugin and daemon ones) share: clocks, statistics and formatting, option parsing, blocking
// hiredis helpers, thin wrappers of the keywatch C API (conf, client, engine with a C
// callback or a plugin, a handler that records lateness, a no-op handler), a raw hiredis +
// libevent keyevent subscriber, the delivery and burst figures, and the end-to-end
// baseline's pop script. Header-only: each benchmark is one translation unit that includes
// it once.
// Thread-safety is noted where a helper is used from the engine's threads (the handlers'
// recorders); everything else runs on the benchmark's main thread.
#pragma once

#include "embedded/redis_process.h"
#include "keywatch.h"

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
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

namespace kwbench {

// ---- Clocks, numbers, text ------------------------------------------------------------

inline const double kInf = std::numeric_limits<double>::infinity();

// Wall clock in ms with microsecond resolution: comparable with Redis's TIME.
inline double wall_ms() {
    return double(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()) /
           1000.0;
}

inline int64_t wall_ms_int() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

inline double mono_s() {
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()) /
           1e9;
}

inline void sleep_ms(int64_t ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

inline double median(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Median of f(element) over v.
template <typename T, typename F>
double med(const std::vector<T> &v, F &&f) {
    std::vector<double> x;
    for (auto &e : v) x.push_back(f(e));
    return median(x);
}

// Percentile q of `total` samples of which `sorted` holds the finite ones (ascending); the
// missing ones are infinitely late. Nearest rank: the ceil(q * total)-th smallest.
inline double percentile(const std::vector<double> &sorted, uint64_t total, double q) {
    if (total == 0) return std::nan("");
    uint64_t rank = uint64_t(std::ceil(q * double(total)));
    if (rank < 1) rank = 1;
    if (rank > sorted.size()) return kInf;
    return sorted[rank - 1];
}

inline std::string fmt_ms(double ms) {
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

inline std::string with_commas(double v) {
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

// Wall-clock time of day, "HH:MM:SS.mmm" (UTC), to line up log lines with events.
inline std::string fmt_clock(double wall) {
    time_t secs = time_t(wall / 1000);
    tm t{};
    gmtime_r(&secs, &t);
    char buf[32];
    snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", t.tm_hour, t.tm_min, t.tm_sec,
             int(std::fmod(wall, 1000.0)));
    return buf;
}

inline std::string fmt_rate(double per_s) {
    return with_commas(per_s) + "/s";
}

inline std::string fmt_pct(double x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f%%", x * 100);
    return buf;
}

// ---- Options --------------------------------------------------------------------------

// What every benchmark's engines and log sink need from the command line.
struct BenchEnv {
    bool verbose = false;
    std::vector<std::pair<std::string, std::string>> conf;  // engine options (--conf)
};

inline BenchEnv &env() {
    static BenchEnv e;
    return e;
}

inline bool parse_uint(const std::string &text, uint64_t min, uint64_t max, uint64_t *out) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || v < min || v > max) return false;
    *out = v;
    return true;
}

// What an option handler says about one option.
enum class Opt { kOk, kBad, kUnknown };

// Walks argv: "--name=value" or "--name value"; --help/-h prints usage and exits 0;
// --verbose sets env().verbose; --conf NAME=VALUE (repeatable) adds an engine option. Every
// other option goes to fn(name, value). False (with a message) on a missing value, an
// unknown option or a bad value.
inline bool parse_options(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                          const std::function<Opt(const std::string &, const std::string &)> &fn) {
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
            env().verbose = true;
            continue;
        }
        if (!has_value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", prog, arg.c_str());
                return false;
            }
            value = argv[++i];
        }
        Opt r = Opt::kOk;
        if (arg == "--conf") {
            size_t e = value.find('=');
            if (e != std::string::npos && e > 0)
                env().conf.emplace_back(value.substr(0, e), value.substr(e + 1));
            else
                r = Opt::kBad;
        } else {
            r = fn(arg, value);
        }
        if (r == Opt::kUnknown) {
            fprintf(stderr, "%s: unknown option %s (try --help)\n", prog, arg.c_str());
            return false;
        }
        if (r == Opt::kBad) {
            fprintf(stderr, "%s: bad value '%s' for %s (try --help)\n", prog, value.c_str(),
                    arg.c_str());
            return false;
        }
    }
    return true;
}

// --only LIST: comma-separated names, each one of `all`.
template <typename Names>
Opt parse_only(const std::string &value, const Names &all, std::set<std::string> *only) {
    only->clear();
    size_t start = 0;
    while (start <= value.size()) {
        size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        std::string name = value.substr(start, comma - start);
        if (std::find(std::begin(all), std::end(all), name) == std::end(all)) return Opt::kBad;
        only->insert(name);
        start = comma + 1;
    }
    return Opt::kOk;
}

// A failure of the benchmark itself (not of a target): aborts the run with exit 1.
struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- Redis helpers ----------------------------------------------------------------------

struct ContextDeleter {
    void operator()(redisContext *c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

inline ContextPtr connect_sync(int port) {
    timeval tv{5, 0};
    ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, tv));
    if (!c || c->err)
        throw BenchError("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                         (c ? c->errstr : "out of memory"));
    timeval ct{60, 0};
    redisSetTimeout(c.get(), ct);
    return c;
}

// The text after "name:" in an INFO reply, or nullptr.
inline const char *info_value(const std::string &info, const std::string &name) {
    size_t pos = info.find(name + ":");
    while (pos != std::string::npos && pos > 0 && info[pos - 1] != '\n')
        pos = info.find(name + ":", pos + 1);
    return pos == std::string::npos ? nullptr : info.c_str() + pos + name.size() + 1;
}

inline int64_t info_int(const keywatch::RedisProcess &rp, const std::string &section,
                        const std::string &name) {
    std::string info = rp.command({"INFO", section});
    const char *v = info_value(info, name);
    if (!v) throw BenchError("INFO " + section + " has no " + name);
    return std::strtoll(v, nullptr, 10);
}

inline double info_double(const keywatch::RedisProcess &rp, const std::string &section,
                          const std::string &name) {
    std::string info = rp.command({"INFO", section});
    const char *v = info_value(info, name);
    if (!v) throw BenchError("INFO " + section + " has no " + name);
    return std::strtod(v, nullptr);
}

// Redis's CPU seconds so far (INFO cpu, user + sys).
inline double redis_cpu_s(const keywatch::RedisProcess &rp) {
    return info_double(rp, "cpu", "used_cpu_user") + info_double(rp, "cpu", "used_cpu_sys");
}

// This process's CPU seconds so far.
inline double self_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

// CPU seconds used so far by redis-server(s) and by this process; `replicas` only on a
// cluster (not counted in `redis`).
struct Cpu {
    double redis = 0, replicas = 0, self = 0;
};

// The CPU used between two readings, per process group: "redis R<redis_suffix>[, replicas
// P], <self_name> S", each difference times `scale` printed with `fmt` (one double, unit
// included); replicas only on a cluster.
inline std::string cpu_parts(const Cpu &a, const Cpu &b, double scale, const char *fmt,
                             const char *redis_suffix, const char *self_name) {
    auto val = [&](double d) {
        char v[32];
        snprintf(v, sizeof v, fmt, d * scale);
        return std::string(v);
    };
    std::string out = "redis " + val(b.redis - a.redis) + redis_suffix;
    if (b.replicas > 0) out += ", replicas " + val(b.replicas - a.replicas);
    return out + ", " + self_name + " " + val(b.self - a.self);
}

// "CPU: redis X% of a core, <self_name> Y%" between two readings `seconds` apart.
inline std::string cpu_util(const Cpu &a, const Cpu &b, double seconds, const char *self_name) {
    return "CPU: " + cpu_parts(a, b, 100 / seconds, "%.0f%%", " of a core", self_name);
}

// "CPU per item: redis X us, <self_name> Y us" between two readings.
inline std::string cpu_per_item(const Cpu &a, const Cpu &b, double items, const char *self_name) {
    return "CPU per item: " + cpu_parts(a, b, 1e6 / items, "%.1f us", "", self_name);
}

// usec_per_call of one command from INFO commandstats (0 if it was not called).
inline double usec_per_call(const keywatch::RedisProcess &rp, const std::string &cmd) {
    std::string info = rp.command({"INFO", "commandstats"});
    size_t pos = info.find("cmdstat_" + cmd + ":");
    if (pos == std::string::npos) return 0;
    size_t u = info.find("usec_per_call=", pos);
    return u == std::string::npos ? 0 : std::strtod(info.c_str() + u + 14, nullptr);
}

// --verbose: INFO commandstats (commands called from scripts are counted too), compact.
inline void print_commandstats(const keywatch::RedisProcess &rp, const char *what) {
    if (!env().verbose) return;
    std::string info = rp.command({"INFO", "commandstats"});
    printf("      commandstats (%s):\n", what);
    size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
        size_t end = info.find_first_of("\r\n", pos);
        std::string line = info.substr(pos + 8, end - pos - 8);
        for (const char *zero : {",rejected_calls=0", ",failed_calls=0"}) {
            size_t z = line.find(zero);
            if (z != std::string::npos) line.erase(z, strlen(zero));
        }
        printf("        %s\n", line.c_str());
        pos = end;
    }
}

inline void flushall(const keywatch::RedisProcess &rp) {
    std::string r = rp.command({"FLUSHALL", "SYNC"});
    if (r != "OK") throw BenchError("FLUSHALL: " + r);
}

// Reads one reply per command appended to c; throws on a connection error or error reply.
inline void read_replies(redisContext *c, uint64_t count, const char *what) {
    for (uint64_t j = 0; j < count; j++) {
        void *raw = nullptr;
        if (redisGetReply(c, &raw) != REDIS_OK)
            throw BenchError(std::string(what) + ": " + c->errstr);
        auto *r = static_cast<redisReply *>(raw);
        if (r->type == REDIS_REPLY_ERROR) {
            std::string e(r->str, r->len);
            freeReplyObject(r);
            throw BenchError(std::string(what) + ": " + e);
        }
        freeReplyObject(r);
    }
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
        read_replies(c, stop - i, "pipelined command");
        i = stop;
    }
}

// The raw track equivalent: SET with a TTL plus ZADD of the key into a due set.
inline const char *const kEquivalentScript =
    "redis.call('SET',KEYS[1],ARGV[1],'PX',ARGV[2]); "
    "redis.call('ZADD',KEYS[2],ARGV[3],KEYS[1])";

// The end-to-end baseline, a minimal at-most-once consumer: pops up to ARGV[2] members of
// the due set KEYS[1] with a score <= ARGV[1] (no lease, no ack, no PTTL); returns how many.
inline const char *const kPopScript =
    "local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, "
    "tonumber(ARGV[2])) "
    "if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end "
    "return #ids";

// Pops the due set `due_key` on c with kPopScript (loaded as `sha`), `batch` members a call
// with a score <= now_ms, until n are popped or a call pops nothing. Returns how many it
// popped.
inline uint64_t pop_due(redisContext *c, const std::string &sha, const std::string &due_key,
                        const std::string &now_ms, uint64_t n, int64_t batch) {
    uint64_t popped = 0;
    const std::string limit = std::to_string(batch);
    while (popped < n) {
        auto *r =
            static_cast<redisReply *>(redisCommand(c, "EVALSHA %s 1 %s %s %s", sha.c_str(),
                                                   due_key.c_str(), now_ms.c_str(), limit.c_str()));
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
    return popped;
}

// Runs `threads` workers over ops [0, total): worker t takes [t*per, (t+1)*per) in batches
// of `batch` via fn(t, begin, end). Per-thread set-up (connections) happens before the
// clock starts. Returns the seconds the work took (total must be a multiple of threads).
inline double run_threads(int threads, uint64_t total, int batch,
                          const std::function<void(int)> &setup,
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

// ---- keywatch helpers -------------------------------------------------------------------

inline void on_log(kw_log_level level, const char *message, void *) {
    if (level < KW_LOG_WARN && !env().verbose) return;
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
    // --verbose: with the time, to line the engine's steps up with the benchmark's.
    std::string when = env().verbose ? fmt_clock(wall_ms()) + " " : "";
    fprintf(stderr, "    [%skeywatch %s] %s\n", when.c_str(),
            level >= KW_LOG_ERROR  ? "error"
            : level == KW_LOG_WARN ? "warning"
                                   : "info",
            message);
}

using ConfPairs = std::vector<std::pair<std::string, std::string>>;

// A configuration for `url`; with engine_options, the --conf options too, then `extra`.
inline kw_conf_t *make_conf(const std::string &url, const std::string &ns, bool engine_options,
                            const ConfPairs &extra = {}) {
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
        for (auto &kv : env().conf) set(kv.first, kv.second);
    for (auto &kv : extra) set(kv.first, kv.second);
    return conf;
}

// An integer engine option as the engines get it (its default, or --conf's), e.g.
// "sweep.batch" (the Lua pop baselines take as many per call as a claim does) or "lease"
// (ms).
inline int64_t engine_option(const char *name) {
    kw_conf_t *conf = make_conf("redis://127.0.0.1:6379", "", true);
    char buf[64];
    int rc = kw_conf_get(conf, name, buf, sizeof buf);
    kw_conf_free(conf);
    if (rc != KW_OK) throw BenchError(std::string("kw_conf_get ") + name + " failed");
    return std::stoll(buf);
}

struct Client {
    kw_client_t *c = nullptr;
    // `extra`: more options, e.g. tls.* for a rediss:// url.
    Client(const std::string &url, const std::string &ns = "", const ConfPairs &extra = {}) {
        kw_conf_t *conf = make_conf(url, ns, false, extra);
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

// An engine with the --conf options (then `extra`) and one handler for `event`: the C
// callback fn(opaque), or (the second form) the plugin `name` loaded from `path` with its
// options (name/value pairs).
struct Engine {
    kw_engine_t *e = nullptr;
    Engine(const std::string &url, kw_handler_fn fn, void *opaque, const ConfPairs &extra = {},
           const char *event = "expired") {
        create(url, extra);
        add(event, [&](kw_filter_t *f, char *, size_t) {
            return kw_engine_add_handler(e, f, fn, opaque, nullptr);
        });
    }
    Engine(const std::string &url, const std::string &path, const std::string &name,
           const ConfPairs &options, const char *event = "expired") {
        create(url, {});
        std::vector<const char *> argv;
        for (const auto &nv : options) {
            argv.push_back(nv.first.c_str());
            argv.push_back(nv.second.c_str());
        }
        argv.push_back(nullptr);
        add(event, [&](kw_filter_t *f, char *err, size_t size) {
            return kw_engine_add_plugin(e, path.c_str(), name.c_str(), f, argv.data(), err, size);
        });
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
        if (!env().verbose) return;
        char *json = nullptr;
        kw_engine_stats_json(e, &json);
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

  private:
    void create(const std::string &url, const ConfPairs &extra) {
        kw_conf_t *conf = make_conf(url, "", true, extra);
        char err[512] = "";
        int rc = kw_engine_new(conf, &e, err, sizeof err);
        kw_conf_free(conf);
        if (rc != KW_OK) throw BenchError(std::string("kw_engine_new: ") + err);
    }
    // Adds the handler add_to(filter for `event`, err, size) registers, and the log callback;
    // frees the engine and throws on a failure (a destructor does not run for a constructor
    // that throws).
    void add(const char *event, const std::function<int(kw_filter_t *, char *, size_t)> &add_to) {
        char err[1024] = "";
        kw_filter_t *f = kw_filter_new();
        int rc = kw_filter_set(f, "events", event, err, sizeof err);
        if (rc == KW_OK) rc = add_to(f, err, sizeof err);
        kw_filter_free(f);
        if (rc == KW_OK) rc = kw_engine_set_log_cb(e, on_log, nullptr);
        if (rc != KW_OK) {
            std::string what = std::string("engine set-up: ") + kw_err_name(rc) + ": " +
                               (err[0] ? err : kw_engine_last_error(e));
            kw_engine_free(e);
            e = nullptr;
            throw BenchError(what);
        }
    }
};

// A handler that acks every event and does nothing else.
inline int noop_handler(kw_event_t *, void *) {
    return KW_RESULT_ACK;
}

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

inline int record_handler(kw_event_t *ev, void *opaque) {
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

// Tracks keys [0, n) with `threads` clients (thread t takes every index i with i % threads
// == t), in pipelines of `batch`. key(i, buf) writes the key and returns its length;
// ttl(i) is evaluated when the command is queued; `extra`: more client options (tls.*).
// Returns the seconds it took.
inline double track_parallel(const std::string &url, const std::string &ns, int threads, int batch,
                             uint64_t n, const std::function<size_t(uint64_t, char *)> &key,
                             const std::function<int64_t(uint64_t)> &ttl,
                             const ConfPairs &extra = {}) {
    std::vector<std::unique_ptr<Client>> clients;
    for (int t = 0; t < threads; t++) clients.push_back(std::make_unique<Client>(url, ns, extra));
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
                        c.check(kw_client_track(c.c, buf, len, kValue, 16,
                                                std::max<int64_t>(ttl(i), 1), 0, nullptr),
                                "kw_client_track");
                    }
                    size_t count = 0;
                    c.check(kw_client_pipeline_end(c.c, statuses.data(), statuses.size(), &count),
                            "kw_client_track (pipelined)");
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

// ---- The native subscriber ----------------------------------------------------------------

// A raw hiredis + libevent subscriber on __keyevent@0__:expired of one server. For keys of
// the form "<p>:<deadline ms, 13 digits>:..." it records (arrival - deadline) and the
// arrival time.
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

inline Delivery summarize(const std::vector<double> &late_in, const std::vector<double> &at,
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

inline void print_delivery(const char *label, const Delivery &d, bool show_delivered_only) {
    printf("    %-9s p50 %-9s p99 %-9s max %-9s  within window %s/%s (%s)", label,
           fmt_ms(d.p50).c_str(), fmt_ms(d.p99).c_str(), fmt_ms(d.max).c_str(),
           with_commas(double(d.within)).c_str(), with_commas(double(d.n)).c_str(),
           fmt_pct(double(d.within) / double(d.n)).c_str());
    if (show_delivered_only && d.within > 0 && d.within < d.n)
        printf("; of those: p50 %s p99 %s max %s", fmt_ms(d.dp50).c_str(), fmt_ms(d.dp99).c_str(),
               fmt_ms(d.dmax).c_str());
    printf("\n");
}

// A burst: n keys sharing one deadline.
struct Burst {
    Delivery d;
    double last_ms = 0;  // last handler start (arrival) minus the shared deadline
    double rate = 0;     // n / (last - first arrival)
};

inline Burst finish_burst(Delivery d, int64_t deadline) {
    Burst b;
    b.d = d;
    b.last_ms = d.within == d.n ? d.last_at - double(deadline) : kInf;
    double span = (d.last_at - d.first_at) / 1000;
    b.rate = d.within > 1 && span > 0 ? double(d.within) / span : std::nan("");
    return b;
}

inline void print_burst(const char *label, const Burst &b) {
    printf(
        "    %-9s all in by deadline + %-9s rate %-12s lateness p50 %s p99 %s max %s; "
        "delivered %s/%s\n",
        label, fmt_ms(b.last_ms).c_str(), fmt_rate(b.rate).c_str(), fmt_ms(b.d.p50).c_str(),
        fmt_ms(b.d.p99).c_str(), fmt_ms(b.d.max).c_str(), with_commas(double(b.d.within)).c_str(),
        with_commas(double(b.d.n)).c_str());
}

// Waits until `count()` reaches n or the wall clock passes until_ms.
template <typename Count>
void await_arrivals(Count &&count, uint64_t n, double until_ms) {
    while (count() < n && wall_ms() < until_ms) sleep_ms(20);
}

}  // namespace kwbench
