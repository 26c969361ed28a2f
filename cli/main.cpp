// keywatch: the command-line tool. `keywatch run --config FILE` is the daemon (plugins,
// metrics, health, logs); `keywatch watch` prints Redis keyspace events, tracked
// keys and tasks as JSON lines; `keywatch demo` shows it at work on a private
// redis-server; track/untrack/adopt, schedule/cancel/reschedule, inspect and dead
// list|replay|purge drive the reliable-delivery queues; `keywatch version`.
// It uses libkeywatch through the C API only (keywatch.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "cli/admin_commands.h"
#include "cli/check/check_command.h"
#include "cli/command.h"
#include "cli/daemon/run_command.h"
#include "cli/demo_command.h"
#include "cli/empty_values.h"
#include "cli/exit_status.h"
#include "cli/key_commands.h"
#include "cli/task_commands.h"
#include "cli/watch_command.h"
#include "keywatch.h"

namespace {

std::string version_text() {
    std::string text = std::string("keywatch ") + KW_VERSION_STRING;
    // The library loaded at run time may be a newer minor/patch of the same ABI.
    const char *loaded = kw_version_string();
    if (loaded && std::string(loaded) != KW_VERSION_STRING)
        text += std::string(" (libkeywatch ") + loaded + ")";
    return text;
}

// "keywatch track: " or "keywatch dead replay: " for messages, from the command line's words.
std::string verb_prefix(int argc, char **argv) {
    std::string verb = "keywatch";
    for (int i = 1; i < argc && i <= 2 && argv[i][0] != '-'; i++) {
        verb += std::string(" ") + argv[i];
        if (std::string(argv[i]) != "dead") break;
    }
    return verb + ": ";
}

// An empty option value is bad input (cli/empty_values.h). False once reported.
bool values_not_empty(const CLI::App *parsed, int argc, char **argv) {
    std::string err;
    const bool ok = parsed ? keywatch::cli::check_empty_values(*parsed, &err)
                           : keywatch::cli::check_empty_assignments(argc, argv, &err);
    if (!ok) std::fprintf(stderr, "%s%s\n", verb_prefix(argc, argv).c_str(), err.c_str());
    return ok;
}

int run(int argc, char **argv) {
    using namespace keywatch::cli;
    CLI::App app{"keywatch: Redis key expiry and keyspace events you can rely on", "keywatch"};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_text());
    // A refused option or value says which command refused it, like every other message.
    app.failure_message([prefix = verb_prefix(argc, argv)](const CLI::App *a, const CLI::Error &e) {
        return prefix + CLI::FailureMessage::simple(a, e);
    });

    WatchArgs watch_args;
    CLI::App *watch = add_watch_command(app, &watch_args);
    DemoArgs demo_args;
    CLI::App *demo = add_demo_command(app, &demo_args);
    RunArgs run_args;
    CLI::App *run_cmd = add_run_command(app, &run_args);
    Runner selected;  // set by the callback of the client verb that was parsed
    add_key_commands(app, &selected);
    add_task_commands(app, &selected);
    add_admin_commands(app, &selected);
    add_check_command(app, &selected);
    CLI::App *version = app.add_subcommand("version", "Print the version and exit");

    if (argc < 2) {
        std::fputs(app.help().c_str(), stderr);
        return kExitBadInput;
    }
    if (!values_not_empty(nullptr, argc, argv)) return kExitBadInput;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        // --help and --version are "errors" with status 0; everything else is bad input.
        const int status = app.exit(e);
        return status == 0 ? kExitOk : kExitBadInput;
    }
    if (!values_not_empty(&app, argc, argv)) return kExitBadInput;
    if (*watch) return run_watch(watch_args);
    if (*demo) return run_demo(demo_args);
    if (*run_cmd) return run_daemon(run_args);
    if (selected) return selected();
    if (*version) {
        std::printf("%s\n", version_text().c_str());
        return kExitOk;
    }
    return kExitBadInput;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "keywatch: error: %s\n", e.what());
        return keywatch::cli::kExitFailure;
    }
}
