// kw_bench_tls: what TLS costs keywatch, measured beside plaintext in the same run.
//
// Method
//  - One private redis-server with a plain port and a tls-port (a throw-away CA made with the
//    openssl CLI, tests/support/test_certificates.h; no client certificate required), so both
//    variants talk to the same server and data set. keywatch reaches it as
//    redis://127.0.0.1:PORT (plain) or rediss://127.0.0.1:TLS_PORT with tls.ca_file (TLS).
//  - Each round runs the three measures for both variants, alternating which goes first;
//    FLUSHALL between measures. Medians over --rounds, and the ratio TLS / plain.
//  - live: an engine with one no-op handler for `set` (untracked keys, live notifications);
//    a plain-port publisher writes --events `SET kwtls:<i> v` in pipelines of 100. Rate =
//    (received - 1) / (last arrival - first arrival).
//  - track: one kw_client_t, pipelines of 100 kw_client_track (1 h TTL), --tracks of them.
//    Rate = tracks / seconds.
//  - e2e: --items keys tracked with one shared deadline 2 s ahead, an engine (no-op handler
//    for `expired`) claims and acks them; rate = (items - 1) / (last delivery - first).
// Only keywatch's connections change between the variants; the publisher and the set-up
// always use the plain port.
//
// Exit status: 0 whatever the figures; 1 when the benchmark itself could not run.
#include "bench_util.h"

#include <event2/thread.h>

#include <map>
#include <thread>

#include "tests/support/test_certificates.h"

namespace {

using namespace kwbench;

struct Options {
    uint64_t rounds = 3;
    uint64_t events = 200000;
    uint64_t tracks = 50000;
    uint64_t items = 20000;
} opts;

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_tls [options]\n"
            "  --rounds R   measured rounds (default 3), plain and TLS alternating\n"
            "  --events N   live: SET commands flooded per run (default 200000)\n"
            "  --tracks N   track: kw_client_track calls per run (default 50000)\n"
            "  --items N    e2e: tracked keys sharing one deadline (default 20000)\n"
            "  --conf NAME=VALUE  an engine option (repeatable); --verbose\n");
}

struct Variant {
    const char *name;
    std::string url;
    ConfPairs tls;  // the tls.* options (empty for plain)
};

// Arrivals counted by a handler: how many, the first's and the last's time.
struct Arrivals {
    std::atomic<uint64_t> n{0};
    std::atomic<double> first{0}, last{0};
    double rate() const {
        const double span = last.load() - first.load();
        return n.load() > 1 && span > 0 ? double(n.load() - 1) / span : 0;
    }
};

int count_handler(kw_event_t *, void *opaque) {
    auto *a = static_cast<Arrivals *>(opaque);
    const double now = mono_s();
    if (a->n.fetch_add(1, std::memory_order_relaxed) == 0) a->first.store(now);
    a->last.store(now);
    return KW_RESULT_ACK;
}

// Waits until n arrived, or nothing arrived for 5 s.
void await(const Arrivals &a, uint64_t n) {
    uint64_t seen = a.n.load();
    double quiet_since = mono_s();
    while (a.n.load() < n) {
        sleep_ms(20);
        if (a.n.load() != seen) {
            seen = a.n.load();
            quiet_since = mono_s();
        } else if (mono_s() - quiet_since > 5) {
            fprintf(stderr, "    only %llu of %llu arrived\n", (unsigned long long)seen,
                    (unsigned long long)n);
            return;
        }
    }
}

// An engine for `v` with a counting handler for `event`.
std::unique_ptr<kw_engine_t, decltype(&kw_engine_free)> engine_for(const Variant &v,
                                                                   const char *event, Arrivals *a) {
    kw_conf_t *conf = make_conf(v.url, "", true, v.tls);
    kw_engine_t *e = nullptr;
    char err[512] = "";
    int rc = kw_engine_new(conf, &e, err, sizeof err);
    kw_conf_free(conf);
    if (rc != KW_OK) throw BenchError(std::string("kw_engine_new: ") + err);
    std::unique_ptr<kw_engine_t, decltype(&kw_engine_free)> out(e, &kw_engine_free);
    kw_filter_t *f = kw_filter_new();
    rc = kw_filter_set(f, "events", event, err, sizeof err);
    if (rc == KW_OK) rc = kw_engine_add_handler(e, f, count_handler, a, nullptr);
    kw_filter_free(f);
    if (rc == KW_OK) rc = kw_engine_set_log_cb(e, on_log, nullptr);
    if (rc == KW_OK) rc = kw_engine_start(e);
    if (rc != KW_OK)
        throw BenchError(std::string("engine: ") + kw_err_name(rc) + ": " +
                         kw_engine_last_error(e));
    return out;
}

double live(const keywatch::RedisProcess &rp, const Variant &v) {
    Arrivals a;
    auto e = engine_for(v, "set", &a);
    auto c = connect_sync(rp.port());
    char key[32];
    pipelined(c.get(), 0, opts.events, 100, [&](uint64_t i, const char **argv, size_t *lens) {
        argv[0] = "SET";
        lens[0] = 3;
        lens[1] = size_t(snprintf(key, sizeof key, "kwtls:%llu", (unsigned long long)i));
        argv[1] = key;
        argv[2] = "v";
        lens[2] = 1;
        return 3;
    });
    await(a, opts.events);
    kw_engine_stop(e.get(), 5000);
    return a.rate();
}

// kw_client_track calls of `n` keys named <prefix><i> with ttl(i), pipelines of 100; seconds.
double track(const Variant &v, uint64_t n, const char *prefix,
             const std::function<int64_t()> &ttl) {
    kw_conf_t *conf = make_conf(v.url, "", false, v.tls);
    kw_client_t *c = nullptr;
    char err[512] = "";
    int rc = kw_client_new(conf, &c, err, sizeof err);
    kw_conf_free(conf);
    if (rc != KW_OK) throw BenchError(std::string("kw_client_new: ") + err);
    std::unique_ptr<kw_client_t, decltype(&kw_client_free)> own(c, &kw_client_free);
    char key[48];
    const double t0 = mono_s();
    for (uint64_t i = 0; i < n;) {
        kw_client_pipeline_begin(c);
        for (int b = 0; b < 100 && i < n; b++, i++) {
            const int len = snprintf(key, sizeof key, "%s%llu", prefix, (unsigned long long)i);
            kw_client_track(c, key, size_t(len), "v", 1, std::max<int64_t>(ttl(), 1), 0, nullptr);
        }
        size_t done = 0;
        if (kw_client_pipeline_end(c, nullptr, 0, &done) != KW_OK)
            throw BenchError(std::string("kw_client_track: ") + kw_client_last_error(c));
    }
    return mono_s() - t0;
}

double e2e(const Variant &v) {
    Arrivals a;
    auto e = engine_for(v, "expired", &a);
    const int64_t deadline = wall_ms_int() + 2000;
    track(v, opts.items, "kwe2e:", [&] { return deadline - wall_ms_int(); });
    await(a, opts.items);
    kw_engine_stop(e.get(), 5000);
    return a.rate();
}

void print_row(const char *what, const std::vector<double> &plain, const std::vector<double> &tls,
               const char *unit) {
    const double p = median(plain), t = median(tls);
    std::string all;
    for (size_t i = 0; i < plain.size(); i++)
        all += (i ? ", " : "") + with_commas(plain[i]) + " / " + with_commas(tls[i]);
    printf("  %-6s plain %10s %s   TLS %10s %s   TLS/plain %5.2f   (rounds: %s)\n", what,
           with_commas(p).c_str(), unit, with_commas(t).c_str(), unit, p > 0 ? t / p : 0,
           all.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    if (!parse_options(argc, argv, "kw_bench_tls", usage,
                       [](const std::string &name, const std::string &value) {
                           uint64_t *slot = name == "--rounds"   ? &opts.rounds
                                            : name == "--events" ? &opts.events
                                            : name == "--tracks" ? &opts.tracks
                                            : name == "--items"  ? &opts.items
                                                                 : nullptr;
                           if (!slot) return Opt::kUnknown;
                           return parse_uint(value, 1, 100000000, slot) ? Opt::kOk : Opt::kBad;
                       }))
        return 1;
    try {
        evthread_use_pthreads();
        keywatch::TestCertificates pki;
        const int tls_port = keywatch::RedisProcess::free_port();
        keywatch::RedisProcess::Options o;
        o.notify = "KEA";
        o.extra = pki.server_args(tls_port, "no");
        keywatch::RedisProcess rp(o);
        rp.start();
        const Variant plain{"plain", rp.url(), {}};
        const Variant tls{"TLS",
                          "rediss://127.0.0.1:" + std::to_string(tls_port),
                          {{"tls.ca_file", pki.path("ca.crt")}}};
        printf("kw_bench_tls: %llu rounds; live %llu events, track %llu calls, e2e %llu items\n",
               (unsigned long long)opts.rounds, (unsigned long long)opts.events,
               (unsigned long long)opts.tracks, (unsigned long long)opts.items);
        std::map<std::string, std::vector<double>> rates;  // "<measure>/<variant>"
        for (uint64_t r = 0; r < opts.rounds; r++) {
            const Variant *order[2] = {&plain, &tls};
            if (r % 2) std::swap(order[0], order[1]);
            for (const Variant *v : order) {
                flushall(rp);
                rates[std::string("live/") + v->name].push_back(live(rp, *v));
                flushall(rp);
                const double s = track(*v, opts.tracks, "kwtr:", [] { return 3600000; });
                rates[std::string("track/") + v->name].push_back(double(opts.tracks) / s);
                flushall(rp);
                rates[std::string("e2e/") + v->name].push_back(e2e(*v));
                printf("  round %llu %-5s live %s, track %s, e2e %s\n", (unsigned long long)r + 1,
                       v->name, fmt_rate(rates[std::string("live/") + v->name].back()).c_str(),
                       fmt_rate(rates[std::string("track/") + v->name].back()).c_str(),
                       fmt_rate(rates[std::string("e2e/") + v->name].back()).c_str());
                fflush(stdout);
            }
        }
        printf("medians (plain / TLS per round in brackets):\n");
        print_row("live", rates["live/plain"], rates["live/TLS"], "events/s");
        print_row("track", rates["track/plain"], rates["track/TLS"], "calls/s");
        print_row("e2e", rates["e2e/plain"], rates["e2e/TLS"], "items/s");
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_tls: %s\n", e.what());
        return 1;
    }
    return 0;
}
