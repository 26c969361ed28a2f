// `keywatch run --config FILE [--check] [--embedded]`: the daemon. Reads the config file,
// builds the engine and its plugin handlers, serves /metrics, /healthz and /readyz, logs
// JSON lines (or text) and runs until SIGTERM/SIGINT (graceful; a second signal exits at
// once); SIGHUP reopens the log file. --check validates the file, loads every plugin,
// connects, says what it would do and exits. --embedded starts a private redis-server and
// uses the print plugin when no handler is configured.
// Exit statuses (cli/exit_status.h): 0 fine, 1 the job cannot be done, 2 bad input.
// Not thread-safe: the main thread parses and runs it.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keywatch::cli {

struct RunArgs {
    std::string config;  // --config FILE ("" only with --embedded)
    bool check = false;
    bool embedded = false;
};

// Registers the subcommand and its options on app; the values land in *args.
CLI::App *add_run_command(CLI::App &app, RunArgs *args);
// Runs it; returns the process exit status.
int run_daemon(const RunArgs &args);

}  // namespace keywatch::cli
