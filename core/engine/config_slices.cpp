#include "core/engine/config_slices.h"

#include "core/redis/channel.h"

namespace keywatch {

Subscriber::Options subscriber_options(const Config &c) {
    Subscriber::Options o{};
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.reconnect = c.reconnect_backoff();
    o.health_interval_ms = c.health_interval_ms;
    o.health_timeout_ms = c.health_timeout_ms;
    o.notify_enable = c.notify_enable;
    o.ns = c.ns;
    if (c.track_enable) o.engines_channel = engines_channel(c.ns);
    return o;
}

PlanConfig plan_config(const Config &c) {
    PlanConfig p;
    p.ns = c.ns;
    p.track_enable = c.track_enable;
    p.dedupe = c.dedupe_enable;
    p.alone_claims = c.done_mode == "auto";
    p.queues = c.queues;
    p.adopt_rules = c.adopt_rules;
    return p;
}

Sweeper::Options sweeper_options(const Config &c, const std::string &owner) {
    Sweeper::Options o{};
    o.ns = c.ns;
    o.owner = owner;
    o.lease_ms = c.lease_ms;
    o.hold_timeout_ms = c.hold_timeout_ms;
    o.retry_base_ms = c.retry_base_ms;
    o.retry_max_ms = c.retry_max_ms;
    o.max_attempts = c.max_attempts;
    o.batch = c.sweep_batch;
    o.interval_ms = c.sweep_interval_ms;
    o.done_window_ms = c.done_window_ms;
    if (c.done_mode == "auto") o.engines_channel = engines_channel(c.ns);
    o.dedupe = c.dedupe_enable;
    o.dedupe_ttl_ms = c.dedupe_ttl_ms;
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.reconnect = c.reconnect_backoff();
    o.scan_interval_ms = c.scan_interval_ms;
    o.migration_wait_ms = c.migration_wait_ms;
    o.catchup_enable = c.catchup_enable;
    o.catchup_count = c.catchup_count;
    o.catchup_rate = c.catchup_rate;
    o.adopt = AdoptRules(c.adopt_rules, c.ns);
    return o;
}

Fanout::Options fanout_options(const Config &c, const std::string &owner) {
    Fanout::Options o{};
    o.sub = subscriber_options(c);
    o.sweep = sweeper_options(c, owner);
    o.seed = c.effective_url();
    o.refresh_ms = c.cluster_refresh_ms;
    return o;
}

}  // namespace keywatch
