// kw_queue_worker: a watcher process for the multi-process reliable-delivery tests. It runs
// one engine serving the key-tracking queue (and task queues, if named) and appends one
// line per delivered item to OUTFILE:  <queue> TAB <hex of key> TAB <source> TAB <attempt>
// TAB <pid> TAB <event ts ms> TAB <deadline ms> TAB <wall ms when handled>. The tests kill it
// with SIGKILL or stop it with SIGTERM.
//
//   kw_queue_worker URL OUTFILE [--lease DUR] [--sleep-ms N] [--queues a,b] [--workers N]
//                   [--adopt RULES]
//
// It prints "ready" on stdout once the engine has started.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "keywatch.h"

namespace {

FILE *out = nullptr;
std::mutex out_mu;
int sleep_ms = 0;
volatile sig_atomic_t stop_requested = 0;

int handle(kw_event_t *ev, void *) {
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    size_t len = 0;
    const auto *key = static_cast<const unsigned char *>(kw_event_key(ev, &len));
    std::string hex;
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        hex.push_back(digits[key[i] >> 4]);
        hex.push_back(digits[key[i] & 15]);
    }
    std::lock_guard<std::mutex> lock(out_mu);
    const long long handled = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    fprintf(out, "%s\t%s\t%d\t%d\t%d\t%lld\t%lld\t%lld\n", kw_event_queue(ev), hex.c_str(),
            kw_event_source(ev), kw_event_attempt(ev), static_cast<int>(getpid()),
            static_cast<long long>(kw_event_ts_ms(ev)),
            static_cast<long long>(kw_event_deadline_ms(ev)), handled);
    fflush(out);
    return KW_RESULT_ACK;
}

void on_signal(int) {
    stop_requested = 1;
}

bool conf(kw_conf_t *c, const char *name, const std::string &value) {
    char err[512];
    if (kw_conf_set(c, name, value.c_str(), err, sizeof err) != KW_OK) {
        fprintf(stderr, "kw_queue_worker: %s\n", err);
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: kw_queue_worker URL OUTFILE [--lease DUR] [--sleep-ms N] "
                "[--queues a,b] [--workers N] [--adopt RULES]\n");
        return 2;
    }
    kw_conf_t *c = kw_conf_new();
    if (!conf(c, "redis.url", argv[1])) return 2;
    std::string queues;
    for (int i = 3; i + 1 < argc; i += 2) {
        std::string opt = argv[i], val = argv[i + 1];
        if (opt == "--lease") {
            if (!conf(c, "lease", val)) return 2;
        } else if (opt == "--sleep-ms") {
            sleep_ms = std::stoi(val);
        } else if (opt == "--queues") {
            queues = val;
            if (!conf(c, "queues", val)) return 2;
        } else if (opt == "--workers") {
            if (!conf(c, "workers", val)) return 2;
        } else if (opt == "--adopt") {
            if (!conf(c, "adopt.rules", val)) return 2;
        } else {
            fprintf(stderr, "kw_queue_worker: unknown option %s\n", opt.c_str());
            return 2;
        }
    }
    out = fopen(argv[2], "a");
    if (!out) {
        perror(argv[2]);
        return 2;
    }
    char err[512];
    kw_engine_t *e = nullptr;
    if (kw_engine_new(c, &e, err, sizeof err) != KW_OK) {
        fprintf(stderr, "kw_queue_worker: %s\n", err);
        return 1;
    }
    kw_filter_t *f = kw_filter_new();
    kw_filter_set(f, "events", queues.empty() ? "expired" : "expired,task", err, sizeof err);
    kw_engine_add_handler(e, f, handle, nullptr, nullptr);
    kw_filter_free(f);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (kw_engine_start(e) != KW_OK) {
        fprintf(stderr, "kw_queue_worker: %s\n", kw_engine_last_error(e));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    while (!stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kw_engine_stop(e, 5000);
    kw_engine_free(e);
    kw_conf_free(c);
    fclose(out);
    return 0;
}
