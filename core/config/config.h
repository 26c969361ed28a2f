// Engine configuration: typed fields behind the C API's name/value strings. Every default
// lives here, once; each component gets its slice through core/engine/config_slices.h,
// and the client's router through router_options (core/client/client.h).
// Not thread-safe: the engine copies it at creation and never changes its copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/backoff.h"
#include "core/queue/adopt_rules.h"
#include "core/redis/url.h"

namespace keywatch {

struct Config {
    std::string url_text = "redis://127.0.0.1:6379";
    RedisUrl url = default_url();                 // the first of seeds
    std::vector<RedisUrl> seeds;                  // every URL in redis.url (empty: just url)
    bool user_set = false, password_set = false;  // override the URL's
    std::string user, password;
    int64_t connect_timeout_ms = 5000;
    bool notify_enable = false;
    int workers = default_workers();  // the cores, 1 to 4
    int64_t queue_size = 65536;
    int64_t reconnect_min_ms = 100;
    int64_t reconnect_max_ms = 10000;
    int64_t health_interval_ms = 1000;
    int64_t health_timeout_ms = 5000;
    int64_t stop_timeout_ms = 10000;
    int64_t command_timeout_ms = 10000;
    std::string mode = "auto";  // redis.mode: auto | standalone | cluster
    int64_t cluster_refresh_ms = 5000;
    // cluster.migration_wait: how long a slot queue migrating in is swept again while its
    // new master still answers MOVED
    int64_t migration_wait_ms = 60000;
    TlsOptions tls;            // tls.*: used by rediss:// URLs
    SentinelOptions sentinel;  // sentinel.*: used by redis+sentinel:// URLs

    // Reliable delivery (see scripts.h for the data in Redis).
    std::string ns = "kw";            // namespace of every key keywatch writes
    std::vector<std::string> queues;  // task queues this engine serves
    bool track_enable = true;         // serve the key-tracking queue
    int64_t lease_ms = 30000;
    int64_t hold_timeout_ms = 300000;  // leases renewed up to this long after the claim
    int64_t retry_base_ms = 1000;
    int64_t retry_max_ms = 300000;
    int64_t max_attempts = 5;
    int64_t sweep_batch = 1000;
    int64_t sweep_interval_ms = 100;
    int64_t scan_interval_ms = 30000;
    int64_t done_window_ms = 10000;
    // queue.done_mode: auto (a claim no other engine can hear is alone: no done records) |
    // always (every claim keeps done records)
    std::string done_mode = "auto";
    bool dedupe_enable = false;
    int64_t dedupe_ttl_ms = 60000;
    int64_t key_limit = 1 << 20;     // bytes
    int64_t value_limit = 16 << 20;  // bytes

    // Zero-change adoption: keys other programs write, tracked when their TTL is set
    // (adopt.rules, parsed and formatted by core/queue/adopt_rules.h), and the catch-up scan
    // that finds those set while no engine listened (catchup.*).
    std::vector<AdoptRule> adopt_rules;
    bool catchup_enable = true;
    int64_t catchup_count = 1000;   // SCAN COUNT
    int64_t catchup_rate = 250000;  // keys scanned per second per master, at most

    // Sets one option from text. Returns 0 (KW_OK) or a KW_ERR_* status with *err saying
    // what was wrong and what to do; on failure the config is unchanged.
    int set(const std::string &name, const std::string &value, std::string *err);
    // Current value as text ("***" for a password). KW_ERR_UNKNOWN_CONF for a bad name.
    int get(const std::string &name, std::string *value) const;
    // Every option name set() and get() accept, in sorted order.
    static std::vector<std::string> names();
    // Checks combinations that single options cannot (e.g. reconnect.min <= max, adopt
    // rules against namespace, redis.url's db, queues and track.enable).
    int validate(std::string *err) const;

    // redis.reconnect.min/max as the backoff every loop connection reconnects with.
    Backoff reconnect_backoff() const { return {reconnect_min_ms, reconnect_max_ms}; }
    // The URL with the user/password overrides and the tls.* options applied.
    RedisUrl effective_url() const;
    // Every seed, with the overrides applied.
    std::vector<RedisUrl> effective_seeds() const;
    // What the TLS settings mean here that a user must hear of (logged as warnings at start,
    // shown by `keywatch check`): tls.verify=false over rediss://, or tls.* options given with
    // no rediss:// URL to use them. Empty when there is nothing to say.
    std::vector<std::string> tls_warnings() const;

  private:
    int validate_adopt_rules(std::string *err) const;
    static RedisUrl default_url();
    static int default_workers();
};

}  // namespace keywatch
