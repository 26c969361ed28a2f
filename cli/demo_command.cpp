#include "cli/demo_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cli/event_printer.h"
#include "cli/exit_status.h"
#include "cli/redis_target.h"
#include "cli/redis_writer.h"
#include "cli/stop_signal.h"
#include "cli/watcher.h"
#include "core/duration.h"

namespace keywatch::cli {
namespace {

struct DemoKey {
    std::string key;
    int64_t ttl_ms;
    std::string value;
    std::string why;  // what this key shows, for the narration
    int64_t written_ms = 0;
};

// What the handler saw, read by the main thread. Thread-safe.
struct DemoState {
    EventPrinter *printer;
    std::mutex mu;
    std::map<std::string, int64_t> expired;  // key -> ts_ms of its expired event
};

int64_t wall_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Key bytes for a human: printable ASCII as is, anything else as \xHH.
std::string printable(const std::string &bytes) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : bytes) {
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

int handle_demo_event(const kw_event_t *ev, void *opaque) {
    try {
        auto *state = static_cast<DemoState *>(opaque);
        const EventRecord record = read_event(ev);
        state->printer->print(record);
        if (record.event == "expired") {
            std::lock_guard<std::mutex> lock(state->mu);
            state->expired.emplace(std::string(record.key), record.ts_ms);
        }
        return KW_RESULT_ACK;
    } catch (...) {
        return KW_RESULT_REJECT;
    }
}

// SETs each key with its TTL, then shows a non-expiry event (SET + DEL).
bool write_keys(RedisWriter &writer, EventPrinter &printer, const std::string &prefix,
                std::vector<DemoKey> &keys, std::string *err) {
    for (auto &k : keys) {
        if (!writer.command({"SET", k.key, k.value, "PX", std::to_string(k.ttl_ms)}, nullptr, err))
            return false;
        k.written_ms = wall_ms();
        printer.note("SET " + printable(k.key) + " PX " + std::to_string(k.ttl_ms) + "  (" + k.why +
                     ")");
    }
    const std::string cart = prefix + "cart:bob";
    if (!writer.command({"SET", cart, "3 items"}, nullptr, err) ||
        !writer.command({"DEL", cart}, nullptr, err))
        return false;
    printer.note("SET " + printable(cart) + ", DEL " + printable(cart) +
                 "  (no TTL: deleted by hand)");
    return true;
}

// Reads each key whose TTL has run out (EXISTS), so that Redis deletes it and publishes
// `expired` now rather than whenever its sampling expire cycle finds it.
bool touch_due_keys(RedisWriter &writer, const std::vector<DemoKey> &keys,
                    const std::map<std::string, int64_t> &expired, std::string *err) {
    const int64_t now = wall_ms();
    for (const auto &k : keys) {
        if (expired.count(k.key) || now < k.written_ms + k.ttl_ms) continue;
        if (!writer.command({"EXISTS", k.key}, nullptr, err)) return false;
    }
    return true;
}

std::map<std::string, int64_t> snapshot(DemoState &state) {
    std::lock_guard<std::mutex> lock(state.mu);
    return state.expired;
}

std::string missing_keys(const std::vector<DemoKey> &keys,
                         const std::map<std::string, int64_t> &expired) {
    std::string out;
    for (const auto &k : keys) {
        if (expired.count(k.key)) continue;
        if (!out.empty()) out += ", ";
        out += printable(k.key);
    }
    return out;
}

// The demo's engine: every default event, only the demo's keys when on a shared Redis.
int start_watcher(Watcher &watcher, const RedisTarget &target, const std::string &prefix,
                  const DemoArgs &a, DemoState *state, std::string *err) {
    WatchOptions opts;
    opts.url = target.url();
    opts.private_server = target.embedded();
    opts.events = "*";
    opts.prefix = prefix;
    opts.notify_enable = a.notify_enable;
    opts.verbosity = a.verbosity;
    if (!watcher.configure(opts, &handle_demo_event, state, err)) return kExitBadInput;
    if (!watcher.start(err)) return kExitFailure;
    return kExitOk;
}

// Waits until every key's expired event has arrived, touching due keys meanwhile. False
// on timeout (*err empty), a signal or a failed write (*err says which).
bool wait_for_expiries(RedisWriter &writer, const std::vector<DemoKey> &keys, DemoState &state,
                       StopSignal &stop, int64_t deadline_ms,
                       std::map<std::string, int64_t> *expired, std::string *err) {
    err->clear();
    for (;;) {
        *expired = snapshot(state);
        if (expired->size() >= keys.size()) return true;
        if (wall_ms() >= deadline_ms) return false;
        if (!touch_due_keys(writer, keys, *expired, err)) {
            *err = "demo writer: " + *err;
            return false;
        }
        if (stop.wait(25) != StopSignal::Reason::Timeout) {
            *err = "interrupted before every key had expired";
            return false;
        }
    }
}

void report(EventPrinter &printer, const std::vector<DemoKey> &keys,
            std::map<std::string, int64_t> &expired) {
    for (const auto &k : keys) {
        const int64_t late = expired[k.key] - (k.written_ms + k.ttl_ms);
        printer.note("expired event for " + printable(k.key) + " arrived " + std::to_string(late) +
                     " ms after its TTL ran out");
    }
    printer.note("all " + std::to_string(keys.size()) + " expiries delivered");
    printer.note(
        "(the demo read each key with EXISTS once its TTL had run out, so Redis deleted it and "
        "published `expired` at once; left alone, Redis finds expired keys lazily or in a "
        "sampling cycle that can be seconds late under load)");
    printer.note("next: keywatch watch --redis redis://HOST:6379 --events expired,del");
}

}  // namespace

CLI::App *add_demo_command(CLI::App &app, DemoArgs *a) {
    CLI::App *cmd = app.add_subcommand(
        "demo", "Start a private redis-server, write keys with short TTLs, print their events");
    cmd->add_option("--redis", a->redis,
                    "use this Redis instead of a private one (keys are prefixed "
                    "keywatch-demo:<pid>:)")
        ->envname("KEYWATCH_REDIS_URL");
    cmd->add_flag("--notify-enable", a->notify_enable,
                  "turn on notify-keyspace-events on that server if needed (CONFIG SET)");
    cmd->add_option("--timeout", a->timeout, "give up after this long")->capture_default_str();
    cmd->add_flag("-v,--verbose", a->verbosity,
                  "log connection states and info messages to stderr (-vv: debug)");
    return cmd;
}

int run_demo(const DemoArgs &a) {
    std::string err;
    int64_t timeout_ms = 0;
    if (!keywatch::parse_duration_ms(a.timeout, &timeout_ms, &err)) {
        fprintf(stderr, "keywatch demo: --timeout: %s\n", err.c_str());
        return kExitBadInput;
    }

    StopSignal stop;
    EventPrinter printer(&stop);
    RedisTarget target;  // outlives the watcher
    if (!target.open(a.redis, &stop, &err)) {
        printer.note(err);
        return kExitFailure;
    }
    if (target.embedded()) printer.note(target.started_message());
    if (stop.stop_requested()) return kExitFailure;  // a signal arrived while the server started
    // On someone else's Redis, keep to keys of our own.
    const std::string prefix =
        target.embedded() ? "" : "keywatch-demo:" + std::to_string(getpid()) + ":";

    DemoState state{&printer, {}, {}};
    Watcher watcher(&printer);
    const int status = start_watcher(watcher, target, prefix, a, &state, &err);
    if (status != kExitOk) {
        printer.note(err);
        return status;
    }
    printer.note("watching " + redact_url(target.url()) +
                 " for expired, evicted, del, set, expire, persist, rename_from, rename_to");

    RedisWriter writer;
    std::vector<DemoKey> keys = {
        {prefix + "session:alice", 1000, "alice's session", "expires in 1s"},
        {prefix + "bin:\xCA\xFE", 1500, "\x89PNG", "not UTF-8: printed as key_b64"},
        {prefix + "order:42", 2000, "awaiting payment", "expires in 2s"},
    };
    if (!writer.connect(target.url(), &err) || !write_keys(writer, printer, prefix, keys, &err)) {
        printer.note("demo writer: " + err);
        return kExitFailure;
    }
    std::map<std::string, int64_t> expired;
    if (!wait_for_expiries(writer, keys, state, stop, wall_ms() + timeout_ms, &expired, &err)) {
        if (err.empty())
            err = "timed out after " + a.timeout + " waiting for the expired events of " +
                  missing_keys(keys, expired) +
                  (target.embedded() ? ""
                                     : "; does that server have notify-keyspace-events "
                                       "with E and x? Re-run with --notify-enable");
        printer.note(err);
        return kExitFailure;
    }
    report(printer, keys, expired);
    return kExitOk;
}

}  // namespace keywatch::cli
