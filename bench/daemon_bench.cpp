// kw_bench_daemon: issue 13's figures for the daemon, each beside its baseline measured in
// the same run on the same private redis-server (notify-keyspace-events "Ex"), alternating
// variants round by round, medians of --rounds (default 5).
//
// Sub-benchmarks (--only scrape,e2e; both by default)
//  scrape  The daemon's serving side in this process, built from the daemon's own objects:
//          an engine with a no-op handler and DaemonHttp (the HttpServer with /metrics,
//          /healthz and /readyz, Metrics, the queue gauges read every 10 s as the daemon's
//          default), exactly as `keywatch run` wires them. Each run:
//          N tracked keys (--keys), all due, then the engine starts and drains them at its
//          full rate (well above 50k events/s here: the rate is printed); rate = N / (time
//          from kw_engine_start until items.acked reaches N), as kw_bench_queue's e2e.
//          Variant "scraped": a thread GETs /metrics over HTTP once a second during the run
//          (first scrape 1 s after start), timing each request from connect to the last
//          byte; variant "not scraped": nobody scrapes. Figures: ms per scrape (median and
//          max of every scrape of every round; target < 5 ms), the exposition's size, the
//          throughput scraped / not scraped (the medians' ratio, and the median of the
//          per-round ratios, the verdict's: on a shared machine adjacent runs share the
//          load best; target >= 95%), and 100 scrapes back to back once each scraped run
//          has drained: their median time and this process's CPU per scrape (client and
//          server side), which bounds what one scrape a second can take from the engine.
//          Also: the time of one read of the queue gauges (kw_client_inspect_json) with N
//          tracked keys alive, the Redis-side cost the daemon pays every queue_interval.
//  e2e     The daemon binary (`keywatch run --config FILE`, [[handler]] the no-op plugin
//          bench/noop_plugin.c, HTTP on a free port, log level warn) against kw_bench_queue's
//          engine figure measured here the same way: N tracked keys, all due, then either an
//          in-process engine with a no-op C handler is started (time from kw_engine_start)
//          or the daemon is spawned (time from the spawn: process start, config, plugin
//          load and connection included); rate = N / (time until the key queue is empty in
//          Redis: ZCARD of its due and in-flight sets, both 0, polled every 2 ms, the same
//          probe for both). Target: daemon >= 95% of the engine (median of the per-round
//          ratios; the medians' ratio is printed too). A third variant, the daemon with
//          [http] enabled = false, shows what the HTTP side (its queue gauges' first read
//          of Redis at start above all) takes from the drain. Each run also prints CPU per
//          item, Redis's and keywatch's (the engine's process, or the daemon's), which a
//          loaded machine disturbs less than the rates.
//
// Each sub-benchmark starts with one run that is not counted (the first run of a process
// on a fresh server is slower). The machine's 1-minute load average is printed beside
// each run: on a shared machine it says how much the figures can be trusted.
//
// Exit status: 0 whatever the verdict; 1 when the benchmark itself could not run.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "bench_util.h"
#include "cli/daemon/daemon_config.h"
#include "cli/daemon/daemon_http.h"
#include "cli/daemon/daemon_log.h"
#include "cli/tests/http_get.h"

extern char **environ;

namespace {

using namespace kwbench;

const char *const kAll[] = {"scrape", "e2e"};

struct Options {
    int rounds = 5;
    uint64_t keys = 300000;
    int threads = 4;
    std::set<std::string> only = {"scrape", "e2e"};
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_daemon [options]\n"
            "  --rounds R   rounds per variant (default 5); medians are reported\n"
            "  --keys N     due tracked keys per run (default 300000)\n"
            "  --threads P  client threads writing the keys (default 4)\n"
            "  --only LIST  comma-separated: scrape,e2e (default both)\n"
            "  --verbose    the engine's log lines and statistics\n");
}

// N due tracked keys (TTL 1 ms), written by P threads; waits until all are due.
void write_due_keys(const keywatch::RedisProcess &rp, const Options &o) {
    rp.command({"FLUSHALL"});
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "d%015llu", static_cast<unsigned long long>(i)));
    };
    track_parallel(rp.url(), "", o.threads, 100, o.keys, key, [](uint64_t) { return int64_t(1); });
    sleep_ms(500);
}

// ---- scrape ----------------------------------------------------------------------------

struct ScrapeRun {
    double rate = 0;
    std::vector<double> scrape_ms;
    size_t bytes = 0;
    std::string error;            // a scrape that did not answer 200
    std::vector<double> idle_ms;  // back-to-back scrapes after the drain
    double idle_cpu_ms = 0;       // this process's CPU per idle scrape (client and server)
};

constexpr int kIdleScrapes = 100;

// "load average 1.52 (1 min)": the machine is shared; the figures mean more beside it.
std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one;
    in >> one;
    return "load average " + (one.empty() ? std::string("n/a") : one) + " (1 min)";
}

ScrapeRun scrape_run(const keywatch::RedisProcess &rp, const Options &o, bool scraped) {
    write_due_keys(rp, o);
    Engine engine(rp.url(), noop_handler, nullptr);
    kw_conf_t *conf = make_conf(rp.url(), "", false);
    keywatch::cli::DaemonConfig config;  // the daemon's defaults (queue gauges every 10 s)
    config.http.listen = "127.0.0.1:0";
    keywatch::cli::DaemonLog log;
    keywatch::cli::DaemonHttp http;
    std::string err;
    bool started = http.start(config, engine.e, conf, {"noop"}, &log, &err);
    kw_conf_free(conf);
    if (!started) throw BenchError(err);
    const std::string address = http.address();
    ScrapeRun run;
    std::atomic<bool> done{false};
    std::thread scraper;
    double t0 = mono_s();
    if (scraped)
        scraper = std::thread([&] {
            for (double next = t0 + 1; !done.load(); next += 1) {
                while (mono_s() < next && !done.load()) sleep_ms(1);
                if (done.load()) break;
                double s = mono_s();
                kwtest::HttpReply r = kwtest::http_get(address, "/metrics");
                run.scrape_ms.push_back((mono_s() - s) * 1000);
                if (r.status != 200) run.error = "a scrape failed: " + r.body;
                run.bytes = r.body.size();
            }
        });
    engine.start();
    while (engine.stat("items.acked") < int64_t(o.keys) && mono_s() - t0 < 120) sleep_ms(1);
    double s = mono_s() - t0;
    done = true;
    if (scraper.joinable()) scraper.join();
    if (!run.error.empty()) throw BenchError(run.error);
    int64_t acked = engine.stat("items.acked");
    engine.print_stats();
    run.rate = double(acked) / s;
    if (scraped) {  // the same scrape with nothing else running: the cost itself
        double cpu0 = self_cpu_s();
        for (int i = 0; i < kIdleScrapes; i++) {
            double t = mono_s();
            kwtest::http_get(address, "/metrics");
            run.idle_ms.push_back((mono_s() - t) * 1000);
        }
        run.idle_cpu_ms = (self_cpu_s() - cpu0) * 1000 / kIdleScrapes;
    }
    return run;
}

// One read of the queue gauges (kw_client_inspect_json, what QueueGauges does every
// [metrics] queue_interval) with N tracked keys alive (1 h TTLs) in Redis: it SCANs the
// keyspace for the queue keys, so its cost grows with the number of keys. Median of 5, ms.
struct GaugeRead {
    double ms = 0, redis_cpu_ms = 0;  // medians
};

GaugeRead gauge_read(const keywatch::RedisProcess &rp, const Options &o) {
    rp.command({"FLUSHALL"});
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "g%015llu", static_cast<unsigned long long>(i)));
    };
    track_parallel(rp.url(), "", o.threads, 100, o.keys, key,
                   [](uint64_t) { return int64_t(3600 * 1000); });
    Client client(rp.url());
    std::vector<double> ms, cpu;
    for (int i = 0; i < 5; i++) {
        char *json = nullptr;
        double c = redis_cpu_s(rp), t = mono_s();
        client.check(kw_client_inspect_json(client.c, &json), "kw_client_inspect_json");
        ms.push_back((mono_s() - t) * 1000);
        cpu.push_back((redis_cpu_s(rp) - c) * 1000);
        kw_free(json);
    }
    rp.command({"FLUSHALL"});
    return {median(ms), median(cpu)};
}

void bench_scrape(const keywatch::RedisProcess &rp, const Options &o) {
    printf("\n== scrape: /metrics once a second while %s due tracked keys drain ==\n",
           with_commas(double(o.keys)).c_str());
    std::vector<double> with, without, all_ms, idle_ms, idle_cpu_ms, ratios;
    size_t bytes = 0;
    GaugeRead g = gauge_read(rp, o);
    printf(
        "  one read of the queue gauges from Redis (every [metrics] queue_interval, not per "
        "scrape) with %s tracked keys alive in Redis: %s, Redis CPU %s (medians of 5)\n",
        with_commas(double(o.keys)).c_str(), fmt_ms(g.ms).c_str(), fmt_ms(g.redis_cpu_ms).c_str());
    printf("  warm-up (not counted): %s\n", fmt_rate(scrape_run(rp, o, false).rate).c_str());
    for (int r = 0; r < o.rounds; r++) {
        for (int k = 0; k < 2; k++) {
            bool scraped = (k == 0) == (r % 2 == 0);
            ScrapeRun run = scrape_run(rp, o, scraped);
            (scraped ? with : without).push_back(run.rate);
            all_ms.insert(all_ms.end(), run.scrape_ms.begin(), run.scrape_ms.end());
            idle_ms.insert(idle_ms.end(), run.idle_ms.begin(), run.idle_ms.end());
            if (scraped) idle_cpu_ms.push_back(run.idle_cpu_ms);
            if (run.bytes) bytes = run.bytes;
            std::string ms;
            for (double m : run.scrape_ms) ms += (ms.empty() ? "" : ", ") + fmt_ms(m);
            printf("  round %d: %-12s %s%s%s  (%s)\n", r + 1, scraped ? "scraped" : "not scraped",
                   fmt_rate(run.rate).c_str(), scraped ? "; scrapes: " : "", ms.c_str(),
                   load_average().c_str());
        }
        ratios.push_back(with.back() / without.back());
    }
    double w = median(with), wo = median(without), ratio = median(ratios);
    double max_ms = all_ms.empty() ? std::nan("") : *std::max_element(all_ms.begin(), all_ms.end());
    printf(
        "  -> per scrape: median %s, max %s over %zu scrapes (%zu bytes each; target < 5 ms) "
        "%s\n",
        fmt_ms(median(all_ms)).c_str(), fmt_ms(max_ms).c_str(), all_ms.size(), bytes,
        median(all_ms) < 5 ? "ok" : "ABOVE TARGET");
    printf(
        "  -> per scrape with the engine idle (%zu back to back after the drains): median %s, "
        "CPU %.2f ms (client and server): at one scrape a second %.3f%% of a core\n",
        idle_ms.size(), fmt_ms(median(idle_ms)).c_str(), median(idle_cpu_ms),
        median(idle_cpu_ms) / 10);
    printf(
        "  -> throughput: scraped %s, not scraped %s (medians: %.1f%%); median of the "
        "per-round ratios %.1f%% (target >= 95%%) %s\n",
        fmt_rate(w).c_str(), fmt_rate(wo).c_str(), 100 * w / wo, 100 * ratio,
        ratio >= 0.95 ? "ok" : "BELOW TARGET");
}

// ---- e2e -------------------------------------------------------------------------------

// Polls ZCARD of the key queue's due and in-flight sets every 2 ms until both are 0;
// seconds since t0, or -1 after 120 s.
double wait_queue_empty(const keywatch::RedisProcess &rp, double t0) {
    ContextPtr c = connect_sync(rp.port());
    while (mono_s() - t0 < 120) {
        redisAppendCommand(c.get(), "ZCARD kw:keys:{0}:due");
        redisAppendCommand(c.get(), "ZCARD kw:keys:{0}:inflight");
        long long left = 0;
        for (int i = 0; i < 2; i++) {
            void *reply = nullptr;
            if (redisGetReply(c.get(), &reply) != REDIS_OK) throw BenchError("ZCARD failed");
            left += static_cast<redisReply *>(reply)->integer;
            freeReplyObject(reply);
        }
        if (left == 0) return mono_s() - t0;
        sleep_ms(2);
    }
    return -1;
}

// One e2e run: items/s, and CPU per item in us: Redis's from the start until the queue
// is empty, keywatch's over its whole life (start to stop: this process's for the engine,
// the child's for the daemon). CPU figures suffer less than rates from a loaded machine.
struct E2eRun {
    double rate = 0, redis_us = 0, keywatch_us = 0;
};

E2eRun e2e_engine(const keywatch::RedisProcess &rp, const Options &o) {
    write_due_keys(rp, o);
    E2eRun run;
    const double cpu0 = self_cpu_s(), redis0 = redis_cpu_s(rp);
    {
        Engine engine(rp.url(), noop_handler, nullptr);
        double t0 = mono_s();
        engine.start();
        double s = wait_queue_empty(rp, t0);
        run.redis_us = (redis_cpu_s(rp) - redis0) * 1e6 / double(o.keys);
        run.rate = s > 0 ? double(o.keys) / s : 0;
        engine.print_stats();
        engine.stop();
    }
    run.keywatch_us = (self_cpu_s() - cpu0) * 1e6 / double(o.keys);
    return run;
}

// http: the HTTP server and its queue gauges on (as deployed) or off ([http] enabled =
// false), to see what they take.
std::string write_config(const keywatch::RedisProcess &rp, bool http) {
    std::string path = rp.dir() + "/daemon-bench.toml";
    std::ofstream f(path);
    f << "[redis]\nurl = \"" << rp.url() << "\"\n\n"
      << "[http]\nlisten = \"127.0.0.1:0\"\nenabled = " << (http ? "true" : "false") << "\n\n"
      << "[log]\nlevel = \"" << (env().verbose ? "info" : "warn") << "\"\n\n"
      << "[[handler]]\nplugin = \"" << KW_NOOP_PLUGIN << "\"\nname = \"noop\"\n"
      << "events = [\"expired\"]\n";
    if (!f) throw BenchError("cannot write " + path);
    return path;
}

E2eRun e2e_daemon(const keywatch::RedisProcess &rp, const Options &o, bool http) {
    write_due_keys(rp, o);
    const double redis0 = redis_cpu_s(rp);
    std::string config = write_config(rp, http), log = rp.dir() + "/daemon-bench.log";
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    posix_spawn_file_actions_addopen(&io, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&io, 1, 2);
    std::vector<std::string> args = {KW_CLI, "run", "--config", config};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    double t0 = mono_s();
    int rc = posix_spawn(&pid, KW_CLI, &io, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&io);
    if (rc != 0) throw BenchError(std::string("cannot start ") + KW_CLI + ": " + strerror(rc));
    double s = wait_queue_empty(rp, t0);
    E2eRun run;
    run.redis_us = (redis_cpu_s(rp) - redis0) * 1e6 / double(o.keys);
    kill(pid, SIGTERM);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    run.keywatch_us = (double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6) *
                      1e6 / double(o.keys);
    if (s < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::ifstream in(log);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        throw BenchError(
            "the daemon did not drain the queue or did not exit 0 on SIGTERM "
            "(status " +
            std::to_string(status) + "); its log:\n" + text);
    }
    run.rate = double(o.keys) / s;
    return run;
}

void bench_e2e(const keywatch::RedisProcess &rp, const Options &o) {
    printf(
        "\n== e2e: %s due tracked keys, the daemon binary + no-op plugin vs the engine + "
        "no-op C handler ==\n",
        with_commas(double(o.keys)).c_str());
    // 0 engine, 1 daemon as deployed, 2 daemon with [http] enabled = false (no queue gauges).
    const char *names[] = {"engine", "daemon", "daemon, HTTP off"};
    std::vector<double> rates[3], ratios[3], redis_us[3], keywatch_us[3];
    printf("  warm-up (not counted): engine %s\n", fmt_rate(e2e_engine(rp, o).rate).c_str());
    for (int r = 0; r < o.rounds; r++) {
        double round[3];
        for (int k = 0; k < 3; k++) {
            int v = (k + r) % 3;  // each variant takes each place in turn
            E2eRun run = v == 0 ? e2e_engine(rp, o) : e2e_daemon(rp, o, v == 1);
            round[v] = run.rate;
            rates[v].push_back(run.rate);
            redis_us[v].push_back(run.redis_us);
            keywatch_us[v].push_back(run.keywatch_us);
            printf("  round %d: %-17s %s; CPU per item: redis %.1f us, keywatch %.1f us  (%s)\n",
                   r + 1, names[v], fmt_rate(run.rate).c_str(), run.redis_us, run.keywatch_us,
                   load_average().c_str());
        }
        for (int v = 1; v < 3; v++) ratios[v].push_back(round[v] / round[0]);
    }
    const double e = median(rates[0]);
    printf("  -> engine: CPU per item (medians): redis %.1f us, keywatch %.1f us\n",
           median(redis_us[0]), median(keywatch_us[0]));
    for (int v = 1; v < 3; v++) {
        const double d = median(rates[v]), ratio = median(ratios[v]);
        printf(
            "  -> %s %s, engine (kw_bench_queue's e2e figure) %s (medians: %.1f%%); median "
            "of the per-round ratios %.1f%% (target >= 95%%) %s; CPU per item (medians): "
            "redis %.1f us, keywatch %.1f us\n",
            names[v], fmt_rate(d).c_str(), fmt_rate(e).c_str(), 100 * d / e, 100 * ratio,
            ratio >= 0.95 ? "ok" : "BELOW TARGET", median(redis_us[v]), median(keywatch_us[v]));
    }
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    bool ok =
        parse_options(argc, argv, "kw_bench_daemon", usage,
                      [&o](const std::string &arg, const std::string &value) {
                          uint64_t n = 0;
                          bool good = true;
                          if (arg == "--rounds")
                              good = parse_uint(value, 1, 100, &n) && (o.rounds = int(n), true);
                          else if (arg == "--keys")
                              good = parse_uint(value, 100, 100000000ull, &o.keys);
                          else if (arg == "--threads")
                              good = parse_uint(value, 1, 64, &n) && (o.threads = int(n), true);
                          else if (arg == "--only")
                              return parse_only(value, kAll, &o.only);
                          else
                              return Opt::kUnknown;
                          return good ? Opt::kOk : Opt::kBad;
                      });
    if (!ok) return 1;
    setvbuf(stdout, nullptr, _IOLBF, 0);  // lines as they come, also into a file
    try {
        keywatch::RedisProcess::Options so;
        so.notify = "Ex";
        keywatch::RedisProcess rp(so);
        rp.start();
        printf("kw_bench_daemon: %d round(s) per variant, %s keys per run, %u cores\n", o.rounds,
               with_commas(double(o.keys)).c_str(), std::thread::hardware_concurrency());
        printf("  before: %s\n", load_average().c_str());
        if (o.only.count("scrape")) bench_scrape(rp, o);
        if (o.only.count("e2e")) bench_e2e(rp, o);
        printf("\n  after: %s\n", load_average().c_str());
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_daemon: %s\n", e.what());
        return 1;
    }
    return 0;
}
