// `keywatch demo`: keywatch at work in a few seconds. Starts a private redis-server (or
// uses --redis), serves it, tracks a few keys with short TTLs (kw_client_track) and schedules one
// delayed task (kw_client_schedule), prints every event as a JSON line and how late each tracked
// key and the task arrived, then the queues' figures (as `keywatch inspect` shows them).
// Exits 0 once every expected delivery has arrived, 1 on timeout.
// Not thread-safe: the main thread parses and runs it (handlers run on the engine's workers).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keywatch::cli {

struct DemoArgs {
    std::string redis;  // empty: start a private redis-server
    bool notify_enable = false;
    std::string timeout = "10s";
    int verbosity = 0;
};

CLI::App *add_demo_command(CLI::App &app, DemoArgs *args);
int run_demo(const DemoArgs &args);

}  // namespace keywatch::cli
