// `keywatch demo`: keywatch at work in a few seconds. Starts a private redis-server (or
// uses --redis), watches it, writes a few keys with short TTLs through a separate plain
// connection and prints the JSON lines as the keys expire. Exits 0 once every expected
// `expired` event has arrived, 1 on timeout.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keywatch::cli {

struct DemoArgs {
    std::string redis;  // empty: start a private redis-server
    bool notify_enable = false;
    std::string timeout = "15s";
    int verbosity = 0;
};

CLI::App *add_demo_command(CLI::App &app, DemoArgs *args);
int run_demo(const DemoArgs &args);

}  // namespace keywatch::cli
