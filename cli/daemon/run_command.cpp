#include "cli/daemon/run_command.h"

#include <CLI/CLI.hpp>

#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/daemon/daemon_config.h"
#include "cli/daemon/daemon_engine.h"
#include "cli/daemon/daemon_http.h"
#include "cli/daemon/daemon_log.h"
#include "cli/exit_status.h"
#include "cli/redis_target.h"
#include "cli/stop_signal.h"

namespace keywatch::cli {
namespace {

const char kFooter[] =
    "The config file (TOML) names the Redis to serve ([redis] url), the engine's options, "
    "the HTTP endpoints ([http] listen, token), the log ([log] format, level, file) and one "
    "[[handler]] table per plugin instance; examples/keywatch.toml shows every table, "
    "docs/daemon.md describes them.\n\n"
    "Signals: SIGTERM or SIGINT stop gracefully (in-flight handlers finish within "
    "stop.timeout, claims not started go back to their queues, programs the handlers still "
    "run then are ended); a second one exits at once (status 128+signal), ending every "
    "program keywatch started. SIGHUP reopens [log] file.\n\n"
    "Exit status: 0 fine (stopped by a signal, or --check found nothing wrong); 1 the job "
    "cannot be done (Redis unreachable or refusing, a plugin that cannot be loaded or "
    "refuses its options, the HTTP address in use, the log file cannot be opened); 2 bad "
    "input (the config file or the command line is invalid).";

void say(const RunArgs &args, const std::string &text) {
    std::fprintf(stderr, "keywatch run%s: %s\n", args.check ? " --check" : "", text.c_str());
}

// Reads the file (or the defaults with --embedded alone) and checks that it names a Redis,
// or that --embedded provides one. An exit status.
int load(const RunArgs &args, DaemonConfig *config) {
    std::string err;
    if (args.config.empty() && !args.embedded) {
        say(args,
            "--config FILE is required (or pass --embedded to try keywatch on a private "
            "redis-server)");
        return kExitBadInput;
    }
    if (!args.config.empty() && !load_daemon_config(args.config, config, &err)) {
        say(args, err);
        return kExitBadInput;
    }
    const std::string url = config->engine_option("redis.url");
    if (args.embedded && !url.empty()) {
        say(args, args.config +
                      ": [redis] url names a server, and --embedded starts a private "
                      "one: leave out one of them");
        return kExitBadInput;
    }
    if (!args.embedded && url.empty()) {
        say(args, args.config +
                      ": [redis] url is not set: name the Redis to serve (url = "
                      "\"redis://host:6379\"); a service never falls back to a "
                      "throw-away server (--embedded starts one to try keywatch)");
        return kExitBadInput;
    }
    if (!args.embedded && config->handlers.empty()) {
        say(args, args.config +
                      ": no [[handler]] table: name at least one plugin to run "
                      "(e.g. [[handler]] plugin = \"stream\", with [handler.options] "
                      "stream = \"name\"); examples/keywatch.toml shows them");
        return kExitBadInput;
    }
    return kExitOk;
}

// A fatal problem once the log is open: in the log, and on stderr as a plain line when
// the log goes to a file (whoever started the daemon sees why it ended) or for --check
// (whose report is plain text; then once, not also as a JSON line on stderr).
int fail(const RunArgs &args, const DaemonConfig &config, DaemonLog *log, int status,
         const std::string &text) {
    const bool to_file = !config.log.file.empty();
    if (to_file || !args.check) log->write(KW_LOG_ERROR, text);
    if (to_file || args.check) say(args, text);
    return status;
}

// --check: connect and subscribe as the daemon would (no handler runs, nothing is
// claimed, nothing written), say what it would do and what the engine noted meanwhile (the
// notify-keyspace-events flags start would set).
int check(const RunArgs &args, const DaemonConfig &config, DaemonEngine *engine, DaemonLog *log) {
    std::string err;
    if (!engine->check(&err)) return fail(args, config, log, kExitFailure, err);
    std::string out = "config " + (config.path.empty() ? "(none: --embedded)" : config.path) +
                      " is valid; every plugin loaded\n";
    for (const std::string &line : engine->describe()) out += "  " + line + "\n";
    std::string nodes;
    for (const std::string &node : engine->nodes()) nodes += (nodes.empty() ? "" : ", ") + node;
    out += "  connected and subscribed to: " + nodes + "\n";
    for (const std::string &note : engine->check_notes()) out += "  note: " + note + "\n";
    out += "  http: " +
           (config.http.enabled
                ? config.http.listen + (config.http.token.empty() ? " (no token)" : " (token set)")
                : std::string("off")) +
           "\n";
    out += "  log: " + std::string(config.log.format == LogFormat::Json ? "json" : "text") +
           ", level " + DaemonLog::level_name(config.log.level) + ", to " +
           (config.log.file.empty() ? "stderr" : config.log.file) + "\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    return kExitOk;
}

// Runs until a stop signal; SIGHUP reopens the log.
int serve(const RunArgs &args, const DaemonConfig &config, DaemonEngine *engine, DaemonLog *log,
          StopSignal *stop) {
    std::string err;
    DaemonHttp http;
    if (config.http.enabled &&
        !http.start(config, engine->engine(), engine->conf(), engine->handler_names(), log, &err,
                    engine->describe(false)))
        return fail(args, config, log, kExitFailure, err);
    if (!engine->start(&err)) return fail(args, config, log, kExitFailure, err);
    http.start_gauges();
    DaemonLog::Fields fields;
    for (const std::string &line : engine->describe()) log->write(KW_LOG_INFO, line);
    if (config.http.enabled) fields.emplace_back("http", http.address());
    log->write(KW_LOG_INFO, "running", fields);
    while (stop->wait(-1) == StopSignal::Reason::Reopen) log->reopen();
    const int sig = stop->signal_number();
    log->write(KW_LOG_INFO, "stopping: handlers in flight get up to stop.timeout",
               {{"signal", sig == SIGTERM  ? "SIGTERM"
                           : sig == SIGINT ? "SIGINT"
                                           : "none"}});
    if (!engine->stop())
        log->write(KW_LOG_WARN,
                   "handlers were still running when stop.timeout passed: the programs they "
                   "ran were ended and their items are retried; items not started went back "
                   "to their queues for another engine");
    http.stop();
    log->write(KW_LOG_INFO, "stopped");
    return kExitOk;
}

}  // namespace

CLI::App *add_run_command(CLI::App &app, RunArgs *args) {
    CLI::App *cmd = app.add_subcommand(
        "run", "Run the daemon: the engine, its handler plugins and the HTTP endpoints");
    cmd->footer(kFooter);
    cmd->add_option("--config", args->config, "the config file (TOML)")->type_name("FILE");
    cmd->add_flag("--check", args->check,
                  "validate the file, load every plugin, connect, say what would run, exit");
    cmd->add_flag("--embedded", args->embedded,
                  "start a private redis-server (like watch does) and print events with the "
                  "print plugin when no [[handler]] is configured; for trying keywatch out");
    return cmd;
}

int run_daemon(const RunArgs &args) {
    DaemonConfig config;
    if (int rc = load(args, &config); rc != kExitOk) return rc;
    std::string err;
    DaemonLog log;
    if (!log.open(config.log, &err)) {
        say(args, err);
        return kExitFailure;
    }
    // Signals first: a Ctrl-C while the private server starts must still stop it.
    StopSignal stop(StopSignal::HupMode::Reopen);
    RedisTarget target;  // declared before the engine: the server outlives it
    if (args.embedded) {
        if (!target.open("", &stop, &err)) return fail(args, config, &log, kExitFailure, err);
        log.write(KW_LOG_INFO, target.started_message());
    }
    DaemonEngine engine(&log);
    DaemonEngine::Options opts;
    opts.url = target.url();
    opts.print_default = args.embedded;
    opts.private_server = target.server_pid();
    if (int rc = engine.build(config, opts, &err); rc != kExitOk) {
        if (rc == kExitBadInput) {
            say(args, err);
            return rc;
        }
        return fail(args, config, &log, rc, err);
    }
    if (stop.stop_requested()) return kExitOk;
    return args.check ? check(args, config, &engine, &log)
                      : serve(args, config, &engine, &log, &stop);
}

}  // namespace keywatch::cli
