// `keywatch watch`: print one JSON line per event until a signal or --duration: live Redis
// events, plus the tracked keys that come due and the tasks of --queues, each claimed and
// acknowledged once its line is written (unless --observe); with --adopt, also the keys
// other programs write with a TTL that match its patterns.
// Not thread-safe: the main thread parses and runs it (handlers run on the engine's workers).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace keywatch::cli {

struct WatchArgs {
    std::string redis;  // empty: start a private redis-server
    std::string events = "expired";
    std::string prefix;
    std::string glob;
    int db = -1;
    int workers = 1;
    bool notify_enable = false;
    std::string duration;  // empty: until SIGINT/SIGTERM
    std::string connect_timeout;
    int verbosity = 0;
    std::string ns;                  // --namespace
    std::string queues;              // --queues a,b: task queues to serve
    bool observe = false;            // --observe: claim nothing
    std::vector<std::string> conf;   // --conf NAME=VALUE
    std::vector<std::string> adopt;  // --adopt PATTERN (repeatable): adopt rules
};

// Registers the subcommand and its options on app; the values land in *args.
CLI::App *add_watch_command(CLI::App &app, WatchArgs *args);
// Runs it; returns the process exit status (0 ok, 1 failure, 2 bad input).
int run_watch(const WatchArgs &args);

}  // namespace keywatch::cli
