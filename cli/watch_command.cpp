#include "cli/watch_command.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>

#include "cli/event_names.h"
#include "cli/event_printer.h"
#include "cli/exit_status.h"
#include "cli/redis_target.h"
#include "cli/stop_signal.h"
#include "cli/watcher.h"
#include "core/duration.h"

namespace keywatch::cli {
namespace {

std::string describe(const WatchArgs &a, const std::string &events) {
    std::string what = (events == "*" ? std::string("all default") : events) + " events";
    if (!a.prefix.empty()) what += ", keys starting with '" + a.prefix + "'";
    if (!a.glob.empty()) what += ", keys matching '" + a.glob + "'";
    if (a.db >= 0) what += ", db " + std::to_string(a.db);
    return what;
}

WatchOptions watch_options(const WatchArgs &a, const std::string &events,
                           const RedisTarget &target) {
    WatchOptions opts;
    opts.url = target.url();
    opts.private_server = target.embedded();
    opts.events = events;
    opts.prefix = a.prefix;
    opts.glob = a.glob;
    opts.db = a.db;
    opts.workers = a.workers;
    opts.notify_enable = a.notify_enable;
    opts.connect_timeout = a.connect_timeout;
    opts.verbosity = a.verbosity;
    return opts;
}

}  // namespace

CLI::App *add_watch_command(CLI::App &app, WatchArgs *a) {
    CLI::App *cmd = app.add_subcommand(
        "watch", "Print one JSON line per keyspace event until Ctrl-C or --duration");
    cmd->add_option("--redis", a->redis,
                    "redis://[user:password@]host:port[/db] or unix:///path/to.sock "
                    "(default: start a private redis-server)")
        ->envname("KEYWATCH_REDIS_URL");
    cmd->add_option("--events", a->events,
                    "comma-separated event names (expired,evicted,del,set,expire,persist,"
                    "rename_from,rename_to,...) or '*' for all of those")
        ->capture_default_str();
    cmd->add_option("--prefix", a->prefix, "only keys starting with this text");
    cmd->add_option("--glob", a->glob, "only keys matching this Redis-style glob (* ? [a-z])");
    cmd->add_option("--db", a->db, "only events from this database number (default: any)")
        ->check(CLI::Validator(
            [](std::string &text) -> std::string {
                if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
                    text.size() < 10)
                    return "";
                return "'" + text + "' is not a database number (0, 1, 2, ...)";
            },
            "", "database number"));
    cmd->add_option("--workers", a->workers,
                    "handler threads; more than 1 may print lines out of arrival order")
        ->capture_default_str();
    cmd->add_flag("--notify-enable", a->notify_enable,
                  "turn on the notify-keyspace-events flags the watch needs (CONFIG SET)");
    cmd->add_option("--duration", a->duration,
                    "stop after this long, e.g. 500ms, 30s, 5m, 1h (default: until Ctrl-C)");
    cmd->add_option("--connect-timeout", a->connect_timeout,
                    "give up connecting after this long (default 5s)");
    cmd->add_flag("-v,--verbose", a->verbosity,
                  "log connection states and info messages to stderr (-vv: debug)");
    return cmd;
}

int run_watch(const WatchArgs &a) {
    std::string err;
    std::string events;
    if (!parse_event_list(a.events, &events, &err)) {
        fprintf(stderr, "keywatch watch: %s\n", err.c_str());
        return kExitBadInput;
    }
    int64_t duration_ms = -1;
    if (!a.duration.empty() && !keywatch::parse_duration_ms(a.duration, &duration_ms, &err)) {
        fprintf(stderr, "keywatch watch: --duration: %s\n", err.c_str());
        return kExitBadInput;
    }

    // Signals first: a Ctrl-C while the server starts must still stop it.
    StopSignal stop;
    EventPrinter printer(&stop);
    RedisTarget target;  // declared before the watcher: the server outlives the engine
    if (!target.open(a.redis, &stop, &err)) {
        printer.note(err);
        return kExitFailure;
    }
    if (target.embedded()) printer.note(target.started_message());
    if (stop.stop_requested()) return kExitOk;  // a signal arrived while the server started

    const WatchOptions opts = watch_options(a, events, target);
    Watcher watcher(&printer);
    if (!watcher.configure(opts, &EventPrinter::handle, &printer, &err)) {
        printer.note(err);
        return kExitBadInput;
    }
    if (!watcher.start(&err)) {
        printer.note(err);
        return kExitFailure;
    }
    printer.note("watching " + describe(a, events) + " on " + redact_url(target.url()) +
                 (duration_ms >= 0 ? " for " + a.duration : std::string(" (Ctrl-C to stop)")));

    stop.wait(duration_ms);
    watcher.stop();
    const int64_t dropped = watcher.stat("events.dropped") + watcher.stat("events.abandoned");
    if (dropped > 0)
        printer.note("warning: " + std::to_string(dropped) +
                     " events were not printed (the output could not keep up)");
    if (a.verbosity >= 1)
        printer.note("stopped after " + std::to_string(printer.lines()) + " events");
    if (printer.failed()) {
        printer.note(printer.error());
        return kExitFailure;
    }
    return kExitOk;
}

}  // namespace keywatch::cli
