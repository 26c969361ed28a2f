// The per-server part of `keywatch check`: Redis version, role, CONFIG,
// notify-keyspace-events (on replicas too), persistence, maxmemory-policy and the clock,
// read over one connection with commands that change nothing (HELLO, INFO, CONFIG GET,
// TIME). Each adds its line to the report. Not thread-safe: one caller per connection.
#pragma once

#include <cstdint>
#include <string>

#include "cli/check/check_report.h"

namespace keywatch {
class BlockingRedis;
}

namespace keywatch::cli {

struct ServerFacts {
    bool clock_read = false;
    int64_t clock_offset_ms = 0;  // the server's TIME minus this host's clock (midpoint)
};

// need_flags: the notify-keyspace-events flags keywatch needs ("E" plus one per event).
// standalone: also check that the server is the master (a cluster's masters come from its
// topology).
ServerFacts check_server(BlockingRedis &c, const std::string &need_flags, bool standalone,
                         int64_t timeout_ms, CheckReport *report);

// A replica: whether a failover to it would keep the keyspace events (the setting is per
// server and not replicated). A warning at most: nothing is wrong until it is promoted.
void check_replica(BlockingRedis &c, const std::string &need_flags, int64_t timeout_ms,
                   CheckReport *report);

}  // namespace keywatch::cli
