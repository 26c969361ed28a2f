// kw_bench_plugin: items handled per second end to end (N due tracked keys, engine started,
// until all are acked) through a no-op handler plugin loaded with dlopen, against the same
// no-op handler as a direct C callback, alternating in the same run on one private
// redis-server. Target: the plugin at least 95% of the callback. Medians of the rounds.
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using namespace kwbench;

struct Options {
    int rounds = 3;
    uint64_t keys = 100000;
    int threads = 4;
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_plugin [options]\n"
            "  --rounds R   measured rounds (default 3); medians are reported\n"
            "  --keys N     due tracked keys per run (default 100000)\n"
            "  --threads P  client threads writing the keys (default 4)\n"
            "  --conf NAME=VALUE keywatch engine option (repeatable)\n");
}

// One run: n keys due, then an engine with a C no-op handler or the no-op plugin; items/s.
double run_once(const keywatch::RedisProcess &rp, const Options &o, bool plugin) {
    auto key = [](uint64_t i, char *buf) {
        return size_t(snprintf(buf, 64, "p%015llu", static_cast<unsigned long long>(i)));
    };
    track_parallel(rp.url(), "", o.threads, 100, o.keys, key, [](uint64_t) { return int64_t(1); });
    sleep_ms(500);  // all due
    kw_conf_t *conf = make_conf(rp.url(), "", true);
    kw_engine_t *e = nullptr;
    char err[1024] = "";
    if (kw_engine_new(conf, &e, err, sizeof err) != KW_OK) throw BenchError(err);
    kw_conf_free(conf);
    kw_filter_t *f = kw_filter_new();
    kw_filter_set(f, "events", "expired", err, sizeof err);
    int rc = plugin ? kw_engine_add_plugin(e, KW_NOOP_PLUGIN, "noop", f, nullptr, err, sizeof err)
                    : kw_engine_add_handler(e, f, noop_handler, nullptr, nullptr);
    kw_filter_free(f);
    if (rc != KW_OK) throw BenchError(std::string("adding the handler: ") + err);
    double t0 = mono_s();
    if (kw_engine_start(e) != KW_OK) throw BenchError(kw_engine_last_error(e));
    int64_t acked = 0;
    while (acked < int64_t(o.keys) && mono_s() - t0 < 120) {
        sleep_ms(1);
        kw_engine_stat(e, "items.acked", &acked);
    }
    double s = mono_s() - t0;
    kw_engine_free(e);
    return double(acked) / s;
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    bool ok =
        parse_options(argc, argv, "kw_bench_plugin", usage,
                      [&o](const std::string &arg, const std::string &value) {
                          uint64_t n = 0;
                          bool good = true;
                          if (arg == "--rounds")
                              good = parse_uint(value, 1, 100, &n) && (o.rounds = int(n), true);
                          else if (arg == "--keys")
                              good = parse_uint(value, 100, 100000000ull, &o.keys);
                          else if (arg == "--threads")
                              good = parse_uint(value, 1, 64, &n) && (o.threads = int(n), true);
                          else
                              return Opt::kUnknown;
                          return good ? Opt::kOk : Opt::kBad;
                      });
    if (!ok) return 1;
    try {
        keywatch::RedisProcess::Options so;
        so.notify = "Ex";
        keywatch::RedisProcess rp(so);
        rp.start();
        std::vector<double> cb, pl;
        for (int r = 0; r < o.rounds; r++) {
            // Alternate which goes first, so a warming server favours neither.
            bool plugin_first = r % 2 == 1;
            for (int k = 0; k < 2; k++) {
                bool plugin = (k == 0) == plugin_first;
                rp.command({"FLUSHALL"});
                double rate = run_once(rp, o, plugin);
                (plugin ? pl : cb).push_back(rate);
                printf("  round %d: %-12s %s\n", r + 1, plugin ? "plugin" : "C callback",
                       fmt_rate(rate).c_str());
            }
        }
        double c = median(cb), p = median(pl);
        printf("\n== Summary: medians of %d round(s), %llu due tracked keys ==\n", o.rounds,
               static_cast<unsigned long long>(o.keys));
        printf("  C callback %s, no-op plugin %s: %.1f%% (target >= 95%%) %s\n",
               fmt_rate(c).c_str(), fmt_rate(p).c_str(), 100.0 * p / c,
               p >= 0.95 * c ? "ok" : "BELOW TARGET");
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_plugin: %s\n", e.what());
        return 1;
    }
    return 0;
}
