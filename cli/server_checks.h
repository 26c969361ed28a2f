// The per-server part of `keywatch check`: Redis version, CONFIG, notify-keyspace-events,
// persistence, maxmemory-policy and the server's clock, read over one connection with
// commands that change nothing (HELLO, INFO, CONFIG GET, TIME). Each adds its line to the
// report. Not thread-safe: one caller per connection.
#pragma once

#include <cstdint>
#include <string>

#include "cli/check_report.h"

namespace keywatch {
class BlockingRedis;
}

namespace keywatch::cli {

struct ServerFacts {
    bool clock_read = false;
    int64_t clock_offset_ms = 0;  // the server's TIME minus this host's clock (midpoint)
};

// need_flags: the notify-keyspace-events flags keywatch needs ("E" plus one per event).
ServerFacts check_server(BlockingRedis &c, const std::string &need_flags, int64_t timeout_ms,
                         CheckReport *report);

}  // namespace keywatch::cli
