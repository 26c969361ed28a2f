// Sentinel: how the master of a redis+sentinel:// URL is found. The sentinels are asked in
// the URL's order with SENTINEL get-master-addr-by-name; the address named is confirmed with
// ROLE (a sentinel's view can be stale); a sentinel that is down, does not know the name or
// names a node that is not a master is passed over for the next. The reply readers are
// shared by the blocking search (find_master: engine start, the Client, `keywatch check`)
// and the loop's (core/redis/master_finder.h). Pure functions and a blocking call on the
// caller's thread: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/redis/url.h"

namespace keywatch {

// The command asking a sentinel for the master's address.
std::vector<std::string> master_addr_command(const RedisUrl &url);
// The address in a get-master-addr-by-name reply ([ip, port]). False with *why when the
// reply is not one (nil: the sentinel does not know the name; an error).
bool parse_master_addr(const redisReply *r, const RedisUrl &url, Endpoint *out, std::string *why);
// The role in a ROLE reply ("master", "slave", "sentinel"; empty for anything else).
std::string role_of(const redisReply *r);
// The `+switch-master` message: true when it is about url.master_name.
bool is_switch_of(const std::string &payload, const RedisUrl &url);

// A master found: its URL (the sentinel URL's credentials, db and TLS, at its address) and
// the sentinel that named it ("host:port").
struct FoundMaster {
    RedisUrl url;
    std::string sentinel;
};

// Asks sentinel i of `url` for the master's address (not confirmed). KW_OK with *master, or
// a KW_ERR_* status with *why saying what it said.
int ask_sentinel(const RedisUrl &url, size_t i, int64_t timeout_ms, Endpoint *master,
                 std::string *why);

// Asks the sentinels of `url` in order until one names a node that answers ROLE as a
// master, within timeout_ms in all. KW_OK with *found; otherwise a KW_ERR_* status with *err
// naming what each sentinel said. A master that refuses AUTH ends the search at once
// (KW_ERR_AUTH: the credentials are the URL's, the same whoever named it).
int find_master(const RedisUrl &url, int64_t timeout_ms, FoundMaster *found, std::string *err);

}  // namespace keywatch
