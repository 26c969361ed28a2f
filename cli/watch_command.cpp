#include "cli/watch_command.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cli/client_session.h"
#include "cli/empty_values.h"
#include "cli/event_names.h"
#include "cli/event_printer.h"
#include "cli/exit_status.h"
#include "cli/redis_target.h"
#include "cli/stop_signal.h"
#include "cli/watcher.h"
#include "cli/time_text.h"
#include "core/queue/adopt_rules.h"
#include "core/redis/url.h"

namespace keywatch::cli {
namespace {

// The events that claim tracked keys: "expired" (or "*"), as the engine decides.
bool wants_tracked_keys(const std::string &events) {
    if (events == "*") return true;
    size_t start = 0;
    while (start <= events.size()) {
        const size_t comma = events.find(',', start);
        if (events.compare(start, comma == std::string::npos ? std::string::npos : comma - start,
                           "expired") == 0)
            return true;
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return false;
}

// The key filter that keeps this watch from claiming tracked keys, or "" if none: the
// engine claims every tracked key that comes due, and one outside the filter would be
// acknowledged without being printed.
std::string key_filter_option(const WatchArgs &a, const std::string &url) {
    if (!a.prefix.empty()) return "--prefix";
    if (!a.glob.empty()) return "--glob";
    if (a.db >= 0) {
        RedisUrl parsed;
        std::string ignored;
        // Tracked keys live in the URL's database: --db naming it filters nothing out.
        if (!parse_redis_url(url, &parsed, &ignored) || parsed.db != a.db) return "--db";
    }
    return "";
}

std::string describe(const WatchArgs &a, const std::string &events) {
    std::string what = (events == "*" ? std::string("all default") : events) + " events";
    if (!a.prefix.empty()) what += ", keys starting with '" + a.prefix + "'";
    if (!a.glob.empty()) what += ", keys matching '" + a.glob + "'";
    if (a.db >= 0) what += ", db " + std::to_string(a.db);
    return what;
}

// Why --adopt cannot go with the other options, or "": adopted keys are tracked keys, which
// this watch claims only with expired among the events and no key filter.
std::string adopt_conflict(const WatchArgs &a, const std::string &events, const std::string &url) {
    if (a.adopt.empty()) return "";
    if (!wants_tracked_keys(events))
        return "--adopt: adopted keys are delivered as expired events, which --events '" +
               a.events + "' leaves out: add expired to --events";
    const std::string filter = key_filter_option(a, url.empty() ? kDefaultRedisUrl : url);
    if (filter.empty()) return "";
    return "--adopt with " + filter +
           ": the watch would have to acknowledge adopted keys outside " + filter +
           " without printing them: leave out " + filter +
           " (the --adopt patterns choose the keys)";
}

// --adopt's patterns as adopt.rules text: one "pattern=" rule each (the library decides
// prefix or glob).
std::string adopt_rules_text(const std::vector<std::string> &patterns) {
    std::string text;
    for (const std::string &p : patterns)
        text += (text.empty() ? "pattern=" : ";pattern=") + escape_adopt_value(p);
    return text;
}

std::string delivery_note(const WatchArgs &a, bool track) {
    const std::string ns = a.ns.empty() ? "kw" : a.ns;
    if (a.observe)
        return "observing only (--observe): tracked keys and tasks are left to the engines that "
               "serve them";
    std::vector<std::string> parts;
    if (track)
        parts.push_back("tracked keys of namespace '" + ns + "'" +
                        (a.adopt.empty() ? "" : " (with the keys --adopt adopts)"));
    if (!a.queues.empty())
        parts.push_back("tasks of queue" +
                        std::string(a.queues.find(',') == std::string::npos ? " " : "s ") +
                        a.queues);
    if (parts.empty()) return "";
    std::string text = "also claiming " + parts[0];
    if (parts.size() > 1) text += " and " + parts[1];
    return text + ": each is acknowledged once its line is written";
}

WatchOptions watch_options(const WatchArgs &a, const std::string &events, const std::string &url,
                           bool embedded, bool track,
                           const std::vector<std::pair<std::string, std::string>> &conf) {
    WatchOptions opts;
    opts.url = url;
    opts.private_server = embedded;
    opts.events = events;
    opts.prefix = a.prefix;
    opts.glob = a.glob;
    opts.db = a.db;
    opts.workers = a.workers;
    opts.notify_enable = a.notify_enable;
    opts.connect_timeout = a.connect_timeout;
    opts.verbosity = a.verbosity;
    opts.ns = a.ns;
    opts.track = track;
    opts.queues = a.queues;
    opts.adopt_rules = adopt_rules_text(a.adopt);
    opts.conf = conf;
    return opts;
}

}  // namespace

CLI::App *add_watch_command(CLI::App &app, WatchArgs *a) {
    CLI::App *cmd = app.add_subcommand(
        "watch", "Print events as JSON lines: live events, tracked keys, tasks of --queues");
    cmd->footer(
        "Runs until Ctrl-C or --duration. Tracked keys that come due, and tasks of --queues, "
        "are claimed, printed, then acknowledged: another engine of the same namespace does "
        "not get them.\n\n"
        "What watch promises: an item is acknowledged once its line was written to stdout. A "
        "pipe cannot tell what its reader consumed: a reader that stops early (| head -3) or "
        "crashes loses the lines already written to the pipe. So stdout is for people and "
        "for scripts that read every line. To hand items to another program reliably, run "
        "`keywatch run` with the exec, stream or webhook handler plugin (acked only when "
        "the program exits 0, the stream entry is written, the URL answers 2xx), or use the "
        "C API (kw_engine_add_handler: ack only when the work is done). Use --observe to "
        "print live events without claiming anything, beside the engines that do the work.");
    cmd->add_option("--redis", a->redis,
                    "redis://[user:password@]host:port[/db][?db=N] or unix:///path/to.sock "
                    "(default: start a private redis-server)")
        ->envname("KEYWATCH_REDIS_URL");
    cmd->add_option("--events", a->events,
                    "comma-separated event names (expired,evicted,del,set,expire,persist,"
                    "rename_from,rename_to,...) or '*' for all of those")
        ->capture_default_str();
    cmd->add_option("--prefix", a->prefix,
                    "only keys starting with this text (tracked keys are then not claimed)");
    cmd->add_option("--glob", a->glob,
                    "only keys matching this Redis-style glob (* ? [a-z]; tracked keys are then "
                    "not claimed)");
    cmd->add_option("--db", a->db, "only events from this database number (default: any)")
        ->check(CLI::Validator(
            [](std::string &text) -> std::string {
                if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
                    text.size() < 10)
                    return "";
                return "'" + text + "' is not a database number (0, 1, 2, ...)";
            },
            "", "database number"));
    CLI::Option *queues = cmd->add_option(
        "--queues", a->queues, "comma-separated task queues to serve: their tasks are printed");
    CLI::Option *observe = cmd->add_flag(
        "--observe", a->observe,
        "only print live events: claim no tracked key and no task (leave them to other engines)");
    observe->excludes(queues);
    CLI::Option *adopt = cmd->add_option(
        "--adopt", a->adopt,
        "PATTERN: also claim and print the keys other programs write with a TTL that match it "
        "(a glob if it has * ? or [, else a prefix), delivered at their deadline like tracked "
        "keys (repeatable; not with --observe, which claims nothing)");
    adopt->type_name("PATTERN")->allow_extra_args(false);
    observe->excludes(adopt);
    cmd->add_option("--namespace", a->ns, "prefix of keywatch's keys in Redis (default kw)");
    cmd->add_option("--workers", a->workers,
                    "handler threads; more than 1 may print lines out of arrival order")
        ->capture_default_str();
    cmd->add_flag("--notify-enable", a->notify_enable,
                  "turn on the notify-keyspace-events flags the watch needs (CONFIG SET)");
    cmd->add_option("--duration", a->duration,
                    "stop after this long, e.g. 500ms, 30s, 5m, 1h (default: until Ctrl-C)");
    cmd->add_option("--connect-timeout", a->connect_timeout,
                    "keep trying to connect (refused or unreachable, or Redis still loading "
                    "its data) for this long, then give up (default 5s)");
    cmd->add_option("-c,--conf", a->conf,
                    "NAME=VALUE: any library option, e.g. lease=10s or max_attempts=3 "
                    "(repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false);  // one NAME=VALUE per -c: never swallow the positionals
    cmd->add_flag("-v,--verbose", a->verbosity,
                  "log connection states and info messages to stderr (-vv: debug)");
    return cmd;
}

int run_watch(const WatchArgs &a) {
    std::string err;
    std::string events;
    if (!parse_event_list(a.events, false, &events, &err)) {
        fprintf(stderr, "keywatch watch: %s\n", err.c_str());
        return kExitBadInput;
    }
    int64_t duration_ms = -1;
    if (!a.duration.empty() &&
        !parse_duration_option("--duration", a.duration, "give how long to watch, e.g. 30s",
                               &duration_ms, &err)) {
        fprintf(stderr, "keywatch watch: %s\n", err.c_str());
        return kExitBadInput;
    }
    if (duration_ms == 0) {
        fprintf(stderr,
                "keywatch watch: --duration: '%s' would stop at once: give how long to watch "
                "(e.g. 30s), or leave --duration out to watch until Ctrl-C\n",
                a.duration.c_str());
        return kExitBadInput;
    }
    std::vector<std::pair<std::string, std::string>> conf;
    std::string url;  // empty: the private server
    if (!split_conf(a.conf, &conf, &err) || !resolve_redis_url(a.redis, &conf, &url, &err) ||
        !(err = adopt_conflict(a, events, url)).empty() ||
        !Watcher::check(watch_options(a, events, url, url.empty(), !a.observe, conf), &err)) {
        fprintf(stderr, "keywatch watch: %s\n", err.c_str());
        return kExitBadInput;
    }

    // Signals first: a Ctrl-C while the server starts must still stop it.
    StopSignal stop;
    EventPrinter printer(&stop);
    RedisTarget target;  // declared before the watcher: the server outlives the engine
    if (url.empty() && !empty_env_note("KEYWATCH_REDIS_URL").empty())
        printer.note(empty_env_note("KEYWATCH_REDIS_URL"));
    if (!target.open(url, &stop, &err)) {
        printer.note(err);
        return kExitFailure;
    }
    if (target.embedded()) printer.note(target.started_message());
    if (stop.stop_requested()) return kExitOk;  // a signal arrived while the server started

    bool track = !a.observe && wants_tracked_keys(events);
    const std::string filter_option = track ? key_filter_option(a, target.url()) : "";
    if (!filter_option.empty()) {
        track = false;
        printer.note(filter_option +
                     ": tracked keys are not claimed by this watch (it would have to "
                     "acknowledge those outside " +
                     filter_option +
                     " without printing them); their live notifications are printed. Leave out " +
                     filter_option + " to claim and print every tracked key");
    }
    const WatchOptions opts =
        watch_options(a, events, target.url(), target.embedded(), track, conf);
    Watcher watcher(&printer);
    if (!watcher.configure(opts, &EventPrinter::handle, &printer, &err)) {
        printer.note(err);
        return kExitBadInput;
    }
    if (!watcher.start(&err)) {
        printer.note(err);
        return kExitFailure;
    }
    const std::string delivery = delivery_note(a, track);
    printer.note("watching " + describe(a, events) + " on " + redact_url(target.url()) +
                 (duration_ms >= 0 ? " for " + a.duration : std::string(" (Ctrl-C to stop)")) +
                 (delivery.empty() ? "" : "; " + delivery));

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
