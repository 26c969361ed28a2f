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

// The arrival rate at an engine for `v` counting `event`, while feed() brings n of them about.
double arrival_rate(const Variant &v, const char *event, uint64_t n,
                    const std::function<void()> &feed) {
    Arrivals a;
    Engine e(v.url, count_handler, &a, v.tls, event);
    e.start();
    feed();
    await(a, n);
    e.stop();
    return a.rate();
}

double live(const keywatch::RedisProcess &rp, const Variant &v) {
    return arrival_rate(v, "set", opts.events, [&] {
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
    });
}

// kw_client_track calls of `n` keys named <prefix><i> with ttl(), one client, pipelines of
// 100; seconds.
double track(const Variant &v, uint64_t n, const char *prefix,
             const std::function<int64_t()> &ttl) {
    return track_parallel(
        v.url, "", 1, 100, n,
        [prefix](uint64_t i, char *buf) {
            return size_t(snprintf(buf, 64, "%s%llu", prefix, (unsigned long long)i));
        },
        [&ttl](uint64_t) { return ttl(); }, v.tls);
}

double e2e(const Variant &v) {
    const int64_t deadline = wall_ms_int() + 2000;
    return arrival_rate(v, "expired", opts.items, [&] {
        track(v, opts.items, "kwe2e:", [&] { return deadline - wall_ms_int(); });
    });
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
        // Each measure's rate for one variant.
        struct Measure {
            const char *name, *unit;
            std::function<double(const Variant &)> rate;
        };
        const Measure measures[] = {
            {"live", "events/s", [&](const Variant &v) { return live(rp, v); }},
            {"track", "calls/s",
             [](const Variant &v) {
                 return double(opts.tracks) /
                        track(v, opts.tracks, "kwtr:", [] { return 3600000; });
             }},
            {"e2e", "items/s", e2e},
        };
        std::map<std::string, std::map<std::string, std::vector<double>>>
            rates;  // [measure][variant]
        for (uint64_t r = 0; r < opts.rounds; r++) {
            const Variant *order[2] = {&plain, &tls};
            if (r % 2) std::swap(order[0], order[1]);
            for (const Variant *v : order) {
                std::string line;
                for (const Measure &m : measures) {
                    flushall(rp);
                    auto &got = rates[m.name][v->name];
                    got.push_back(m.rate(*v));
                    line += (line.empty() ? "" : ", ") + std::string(m.name) + " " +
                            fmt_rate(got.back());
                }
                printf("  round %llu %-5s %s\n", (unsigned long long)r + 1, v->name, line.c_str());
                fflush(stdout);
            }
        }
        printf("medians (plain / TLS per round in brackets):\n");
        for (const Measure &m : measures)
            print_row(m.name, rates[m.name][plain.name], rates[m.name][tls.name], m.unit);
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_tls: %s\n", e.what());
        return 1;
    }
    return 0;
}
