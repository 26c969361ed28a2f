// kw_bench_sentinel: issue 25's Sentinel failover figure: the time from kill -9 of the master
// to the first delivery from the replica the sentinels promote, through a redis+sentinel://
// URL, with tracked keys due before and after the kill. Each round starts a fresh deployment
// (tests/support/redis_sentinel.h: 3 sentinels, a master, 2 replicas; down-after 1 s) and
// checks that every key was delivered; the median of the rounds is printed with each round.
//
//   kw_bench_sentinel [--rounds N (default 3)] [--keys N (default 5000)]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tests/support/redis_sentinel.h"

namespace {

// What the handler sees, from the engine's workers.
struct FirstFromNew {
    std::string old_node;                // the master killed
    std::atomic<double> killed_ms{0};    // set just before the kill
    std::atomic<double> first_ms{0};     // the first delivery from another node after it
    std::atomic<uint64_t> delivered{0};  // every delivery
};

int on_expired(kw_event_t *ev, void *opaque) {
    auto *f = static_cast<FirstFromNew *>(opaque);
    const char *node = kw_event_node(ev);
    double zero = 0;
    if (f->killed_ms.load() > 0 && node && f->old_node != node)
        f->first_ms.compare_exchange_strong(zero, kwbench::wall_ms());
    f->delivered.fetch_add(1);
    return KW_RESULT_ACK;
}

// One round; returns kill -9 -> first delivery from the new master, in ms.
double round_ms(int round, uint64_t keys) {
    keywatch::RedisSentinels deployment;
    deployment.start();
    FirstFromNew f;
    f.old_node = "127.0.0.1:" + std::to_string(deployment.node(0).port());
    kwbench::Engine engine(deployment.url(), on_expired, &f);
    engine.start();
    // Due from 0.5 s to 6.5 s from now: the kill falls in the middle of them.
    kwbench::track_parallel(
        deployment.url(), "", 1, 1000, keys,
        [](uint64_t i, char *buf) {
            return static_cast<size_t>(snprintf(buf, 64, "s:%llu", (unsigned long long)i));
        },
        [keys](uint64_t i) { return 500 + static_cast<int64_t>(i * 6000 / keys); });
    while (f.delivered.load() < keys / 4) kwbench::sleep_ms(10);
    f.killed_ms = kwbench::wall_ms();
    deployment.node(0).kill9();
    const double deadline = kwbench::wall_ms() + 60000;
    while ((f.first_ms.load() == 0 || f.delivered.load() < keys) && kwbench::wall_ms() < deadline)
        kwbench::sleep_ms(10);
    const double ms = f.first_ms.load() - f.killed_ms.load();
    printf(
        "  round %d: kill -9 -> first delivery from the new master %s; %llu deliveries of "
        "%llu keys\n",
        round, kwbench::fmt_ms(ms).c_str(), (unsigned long long)f.delivered.load(),
        (unsigned long long)keys);
    if (f.delivered.load() < keys) throw kwbench::BenchError("keys were not all delivered");
    engine.stop();
    return ms;
}

}  // namespace

int main(int argc, char **argv) {
    int rounds = 3;
    uint64_t keys = 5000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds")) rounds = std::max(1, atoi(argv[i + 1]));
        if (!strcmp(argv[i], "--keys")) keys = std::max(100, atoi(argv[i + 1]));
    }
    try {
        std::vector<double> ms;
        for (int r = 1; r <= rounds; r++) ms.push_back(round_ms(r, keys));
        printf("sentinel failover: kill -9 -> first delivery, median of %d rounds: %s\n", rounds,
               kwbench::fmt_ms(kwbench::median(ms)).c_str());
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_sentinel: %s\n", e.what());
        return 1;
    }
    return 0;
}
