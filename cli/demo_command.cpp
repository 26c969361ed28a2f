#include "cli/demo_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cli/client_session.h"
#include "cli/event_printer.h"
#include "cli/exit_status.h"
#include "cli/inspect_table.h"
#include "cli/redis_target.h"
#include "cli/redis_writer.h"
#include "cli/stop_signal.h"
#include "cli/time_text.h"
#include "cli/utf8.h"
#include "cli/watcher.h"
#include "core/base/clock.h"

namespace keywatch::cli {
namespace {

constexpr const char *kTaskQueue = "demo";

// A key the demo tracks, or (queue not "keys") the task it schedules.
struct DemoItem {
    std::string queue;  // "keys" or kTaskQueue
    std::string key;    // key, or task id
    std::string value;  // value, or payload
    int64_t delay_ms;   // TTL, or delay
    bool snapshot;      // keys: keep the value to hand over with the event
    std::string why;    // what this item shows, for the narration
};

// A tracked key or task as the handler received it.
struct Delivery {
    std::string event, source;
    int64_t deadline_ms = 0;
    int64_t handled_ms = 0;  // wall clock when the handler ran
};

// What the handlers saw, read by the main thread. Thread-safe.
struct DemoState {
    EventPrinter *printer;
    std::mutex mu;
    std::map<std::pair<std::string, std::string>, Delivery> delivered;  // (queue, key)
};

// A duration as the command line takes it ("1s", "1200ms").
std::string duration_arg(int64_t ms) {
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

int handle_demo_event(kw_event_t *ev, void *opaque) {
    bool printed = false;
    try {
        auto *state = static_cast<DemoState *>(opaque);
        const int64_t now = wall_ms();
        printed = state->printer->print(ev);
        const std::string queue = kw_event_queue(ev);
        if (printed && !queue.empty()) {
            size_t len = 0;
            const void *key = kw_event_key(ev, &len);
            std::lock_guard<std::mutex> lock(state->mu);
            state->delivered.emplace(
                std::make_pair(queue, std::string(static_cast<const char *>(key), key ? len : 0)),
                Delivery{kw_event_name(ev), kw_source_name(kw_event_source(ev)),
                         kw_event_deadline_ms(ev), now});
        }
    } catch (...) {
        printed = false;
    }
    return EventPrinter::result_for(ev, printed);
}

// The demo's engine: every default event of its keys, its tracked keys and its task queue.
int start_watcher(Watcher &watcher, const RedisTarget &target, const std::string &prefix,
                  const std::string &ns, const DemoArgs &a, DemoState *state, std::string *err) {
    WatchOptions opts;
    opts.url = target.url();
    opts.private_server = target.embedded();
    opts.events = "*";
    opts.prefix = prefix;
    opts.ns = ns;
    opts.queues = kTaskQueue;
    opts.notify_enable = a.notify_enable;
    opts.verbosity = a.verbosity;
    if (!watcher.configure(opts, &handle_demo_event, state, err)) return kExitBadInput;
    if (!watcher.start(err)) return kExitFailure;
    return kExitOk;
}

// Tracks the keys and schedules the task through the client, the way an application
// would; then shows a key written without keywatch (SET + DEL: live events only).
bool write_items(ClientSession &session, RedisWriter &writer, EventPrinter &printer,
                 const std::string &prefix, const std::vector<DemoItem> &items, std::string *err) {
    for (const auto &item : items) {
        int rc;
        std::string command;
        if (item.queue == "keys") {
            rc = kw_client_track(session.get(), item.key.data(), item.key.size(), item.value.data(),
                                 item.value.size(), item.delay_ms,
                                 item.snapshot ? KW_TRACK_SNAPSHOT : 0, nullptr);
            command = "track " + printable(item.key) + " --ttl " + duration_arg(item.delay_ms) +
                      (item.snapshot ? " --snapshot" : "");
        } else {
            rc = kw_client_schedule(session.get(), item.queue.c_str(), item.key.data(),
                                    item.key.size(), item.value.data(), item.value.size(), 0,
                                    item.delay_ms, 0, nullptr);
            command = "schedule " + item.queue + " " + printable(item.key) + " --in " +
                      duration_arg(item.delay_ms);
        }
        if (rc != KW_OK) {
            *err = command + ": " + cli_words(kw_client_last_error(session.get()));
            return false;
        }
        printer.note(command + "  (" + item.why + ")");
    }
    const std::string cart = prefix + "cart:bob";
    if (!writer.command({"SET", cart, "3 items"}, nullptr, err) ||
        !writer.command({"DEL", cart}, nullptr, err))
        return false;
    printer.note("SET " + printable(cart) + ", DEL " + printable(cart) +
                 "  (written without keywatch: live events only)");
    return true;
}

std::map<std::pair<std::string, std::string>, Delivery> snapshot(DemoState &state) {
    std::lock_guard<std::mutex> lock(state.mu);
    return state.delivered;
}

std::string missing_items(const std::vector<DemoItem> &items,
                          const std::map<std::pair<std::string, std::string>, Delivery> &got) {
    std::string out;
    for (const auto &item : items) {
        if (got.count({item.queue, item.key})) continue;
        if (!out.empty()) out += ", ";
        out += printable(item.key);
    }
    return out;
}

// Waits until every item has been delivered. False on timeout (*err empty) or a signal.
bool wait_for_deliveries(const std::vector<DemoItem> &items, DemoState &state, StopSignal &stop,
                         int64_t deadline_ms,
                         std::map<std::pair<std::string, std::string>, Delivery> *got,
                         std::string *err) {
    err->clear();
    for (;;) {
        *got = snapshot(state);
        if (got->size() >= items.size()) return true;
        if (wall_ms() >= deadline_ms) return false;
        if (stop.wait(20) != StopSignal::Reason::Timeout) {
            *err = "interrupted before every item had been delivered";
            return false;
        }
    }
}

void report(EventPrinter &printer, const std::vector<DemoItem> &items,
            std::map<std::pair<std::string, std::string>, Delivery> &got) {
    for (const auto &item : items) {
        const Delivery &d = got[{item.queue, item.key}];
        printer.note(d.event + " " + printable(item.key) + " (source " + d.source + "): handled " +
                     std::to_string(d.handled_ms - d.deadline_ms) + " ms after its deadline");
    }
    printer.note("all " + std::to_string(items.size()) +
                 " tracked keys and tasks arrived at their deadline: keywatch claims each from "
                 "its queue in Redis when it comes due, so none depends on a live notification "
                 "(or on a watcher running at that moment), and nothing had to touch the keys");
}

// The queues' figures, as `keywatch inspect` prints them.
void print_figures(EventPrinter &printer, ClientSession &session) {
    char *json = nullptr;
    if (kw_client_inspect_json(session.get(), &json) != KW_OK) {
        printer.note("inspect: " + cli_words(kw_client_last_error(session.get())));
        return;
    }
    std::vector<QueueFigures> queues;
    int64_t now = 0;
    std::string err;
    const bool ok = parse_inspect_json(json, &queues, &now, &err);
    kw_free(json);
    if (!ok) {
        printer.note(err);
        return;
    }
    std::string table = inspect_table(queues);
    std::string text = "the queues now (keywatch inspect):";
    for (size_t at = 0; at < table.size();) {
        const size_t nl = table.find('\n', at);
        text += "\n  " + table.substr(at, nl - at);
        at = nl + 1;
    }
    printer.note(text);
}

// On someone else's Redis: the demo's namespace leaves nothing behind.
void remove_namespace(RedisWriter &writer, EventPrinter &printer, const std::string &ns) {
    std::vector<std::string> del = {"DEL"};
    for (const char *queue : {"keys", kTaskQueue})
        for (const char *part : {"due", "inflight", "data", "dead", "done"})
            del.push_back(ns + ":" + queue + ":{0}:" + part);
    std::string err;
    if (!writer.command(del, nullptr, &err))
        printer.note("could not remove the demo's queues (namespace " + ns + "): " + err);
}

}  // namespace

CLI::App *add_demo_command(CLI::App &app, DemoArgs *a) {
    CLI::App *cmd = app.add_subcommand(
        "demo", "Show keywatch at work on a private redis-server, in a few seconds");
    cmd->add_option("--redis", a->redis,
                    "use this Redis instead of a private one (keys are prefixed "
                    "keywatch-demo:<pid>:, queues use namespace keywatch-demo-<pid>)")
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
    if (!parse_duration_option("--timeout", a.timeout, "give a positive duration, e.g. 10s",
                               &timeout_ms, &err)) {
        fprintf(stderr, "keywatch demo: %s\n", err.c_str());
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
    // On someone else's Redis, keep to keys and queues of our own.
    const std::string pid = std::to_string(getpid());
    const std::string prefix = target.embedded() ? "" : "keywatch-demo:" + pid + ":";
    const std::string ns = target.embedded() ? "" : "keywatch-demo-" + pid;

    DemoState state{&printer, {}, {}};
    Watcher watcher(&printer);
    const int status = start_watcher(watcher, target, prefix, ns, a, &state, &err);
    if (status != kExitOk) {
        printer.note(err);
        return status;
    }
    printer.note("watching " + redact_url(target.url()) +
                 " for expired, evicted, del, set, expire, persist, rename_from, rename_to; "
                 "serving tracked keys and the task queue '" +
                 kTaskQueue + "'");

    ClientSession session("demo");
    ClientArgs client;
    client.redis = target.url();
    client.ns = ns;
    // The task queue is listed by inspect even once it is empty.
    if (session.open(client, {{"queues", kTaskQueue}}) != kExitOk) return kExitFailure;
    RedisWriter writer;
    const std::vector<DemoItem> items = {
        {"keys", prefix + "session:alice", "alice's session", 1000, true,
         "tracked, its value comes with the event"},
        {kTaskQueue, "email:welcome:alice", "{\"to\":\"alice\",\"template\":\"welcome\"}", 1200,
         false, "a delayed task"},
        {"keys", prefix + "bin:\xCA\xFE", "\x89PNG", 1500, true,
         "binary key and value: printed as key_b64 and value_b64"},
        {"keys", prefix + "order:42", "awaiting payment", 2000, false, "tracked, no snapshot"},
    };
    if (!writer.connect(target.url(), &err) ||
        !write_items(session, writer, printer, prefix, items, &err)) {
        printer.note("demo writer: " + err);
        return kExitFailure;
    }
    std::map<std::pair<std::string, std::string>, Delivery> got;
    if (!wait_for_deliveries(items, state, stop, wall_ms() + timeout_ms, &got, &err)) {
        if (err.empty())
            err = "timed out after " + a.timeout + " waiting for " + missing_items(items, got);
        printer.note(err);
        watcher.stop();
        if (!ns.empty()) remove_namespace(writer, printer, ns);
        return kExitFailure;
    }
    watcher.stop();  // sends the last acknowledgements
    report(printer, items, got);
    print_figures(printer, session);
    if (!ns.empty()) remove_namespace(writer, printer, ns);
    printer.note(
        "next: keywatch track KEY VALUE --ttl 30s --redis URL, then keywatch watch --redis URL "
        "(see keywatch --help)");
    return kExitOk;
}

}  // namespace keywatch::cli
