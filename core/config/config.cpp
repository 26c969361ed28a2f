#include "core/config/config.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "core/base/bool_word.h"
#include "core/base/duration.h"
#include "core/base/time_limit.h"
#include "core/queue/queue_keys.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

bool parse_int(const std::string &v, int64_t min, int64_t max, int64_t *out) {
    if (v.empty()) return false;
    char *end = nullptr;
    errno = 0;
    long long n = strtoll(v.c_str(), &end, 10);
    if (errno || *end != '\0' || n < min || n > max) return false;
    *out = n;
    return true;
}

struct Option {
    // Returns KW_OK or a status; writes *err on failure.
    std::function<int(Config &, const std::string &, std::string *)> set;
    std::function<std::string(const Config &)> get;
};

Option duration_opt(int64_t Config::*field, int64_t min_ms, const char *name) {
    return {[=](Config &c, const std::string &v, std::string *err) {
                int64_t ms = 0;
                std::string why;
                if (!parse_duration_ms(v, &ms, &why)) {
                    *err = std::string(name) + ": " + why;
                    return static_cast<int>(KW_ERR_BAD_VALUE);
                }
                if (ms < min_ms) {
                    *err = std::string(name) + ": '" + v + "' is too short; the minimum is " +
                           std::to_string(min_ms) + "ms";
                    return static_cast<int>(KW_ERR_BAD_VALUE);
                }
                if (!duration_within_max(ms)) {
                    *err = std::string(name) + ": " + duration_after_max("'" + v + "'");
                    return static_cast<int>(KW_ERR_BAD_VALUE);
                }
                c.*field = ms;
                return static_cast<int>(KW_OK);
            },
            [=](const Config &c) { return std::to_string(c.*field) + "ms"; }};
}

// A TLS file or name, taken as given (checked when a connection loads it).
Option text_opt(std::string TlsOptions::*field) {
    return {[=](Config &c, const std::string &v, std::string *) {
                c.tls.*field = v;
                return static_cast<int>(KW_OK);
            },
            [=](const Config &c) { return c.tls.*field; }};
}

Option bool_opt(bool Config::*field, const char *name) {
    return {[=](Config &c, const std::string &v, std::string *err) {
                if (!parse_bool_word(v, &(c.*field))) {
                    *err = std::string(name) + ": '" + v + "' is not a boolean: use true or false";
                    return static_cast<int>(KW_ERR_BAD_VALUE);
                }
                return static_cast<int>(KW_OK);
            },
            [=](const Config &c) { return std::string(c.*field ? "true" : "false"); }};
}

Option int_opt(int64_t min, int64_t max, const char *name,
               std::function<void(Config &, int64_t)> put,
               std::function<int64_t(const Config &)> read) {
    return {[=](Config &c, const std::string &v, std::string *err) {
                int64_t n;
                if (!parse_int(v, min, max, &n)) {
                    *err = std::string(name) + ": '" + v + "' is not a whole number from " +
                           std::to_string(min) + " to " + std::to_string(max);
                    return static_cast<int>(KW_ERR_BAD_VALUE);
                }
                put(c, n);
                return static_cast<int>(KW_OK);
            },
            [=](const Config &c) { return std::to_string(read(c)); }};
}

const std::map<std::string, Option> &options() {
    static const std::map<std::string, Option> table = {
        {"redis.url",
         {[](Config &c, const std::string &v, std::string *err) {
              // One URL, or several comma-separated seeds of one cluster.
              const std::vector<std::string> texts = split_url_list(v);
              std::vector<RedisUrl> seeds;
              for (const std::string &one : texts) {
                  RedisUrl u;
                  if (!parse_redis_url(one, &u, err)) {
                      *err = "redis.url: " + *err +
                             (texts.size() > 1 ? " (several seeds are separated by commas)" : "");
                      return static_cast<int>(KW_ERR_URL);
                  }
                  seeds.push_back(u);
              }
              c.url = seeds.front();
              c.seeds = seeds;
              c.url_text = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) {
              // Hide the password of each URL.
              std::string out;
              for (std::string shown : split_url_list(c.url_text)) {
                  size_t scheme = shown.find("//");
                  size_t at = shown.rfind('@');
                  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
                      size_t colon = shown.find(':', scheme + 2);
                      if (colon != std::string::npos && colon < at)
                          shown.replace(colon + 1, at - colon - 1, "***");
                      else
                          shown.replace(scheme + 2, at - scheme - 2, "***");
                  }
                  out += (out.empty() ? "" : ",") + shown;
              }
              return out;
          }}},
        {"redis.user",
         {[](Config &c, const std::string &v, std::string *) {
              c.user = v;
              c.user_set = true;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.user_set ? c.user : c.url.user; }}},
        {"redis.password",
         {[](Config &c, const std::string &v, std::string *) {
              c.password = v;
              c.password_set = true;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) {
              return (c.password_set ? c.password : c.url.password).empty() ? std::string() : "***";
          }}},
        {"redis.connect_timeout",
         duration_opt(&Config::connect_timeout_ms, 10, "redis.connect_timeout")},
        {"notify.enable", bool_opt(&Config::notify_enable, "notify.enable")},
        {"workers", int_opt(
                        1, 256, "workers", [](Config &c, int64_t n) { c.workers = int(n); },
                        [](const Config &c) { return int64_t(c.workers); })},
        {"dispatch.queue_size",
         int_opt(
             16, 16777216, "dispatch.queue_size", [](Config &c, int64_t n) { c.queue_size = n; },
             [](const Config &c) { return c.queue_size; })},
        {"reconnect.min", duration_opt(&Config::reconnect_min_ms, 1, "reconnect.min")},
        {"reconnect.max", duration_opt(&Config::reconnect_max_ms, 1, "reconnect.max")},
        {"health.interval", duration_opt(&Config::health_interval_ms, 10, "health.interval")},
        {"health.timeout", duration_opt(&Config::health_timeout_ms, 50, "health.timeout")},
        {"stop.timeout", duration_opt(&Config::stop_timeout_ms, 0, "stop.timeout")},
        {"redis.command_timeout",
         duration_opt(&Config::command_timeout_ms, 10, "redis.command_timeout")},
        {"redis.mode",
         {[](Config &c, const std::string &v, std::string *err) {
              if (v != "auto" && v != "standalone" && v != "cluster") {
                  *err = "redis.mode: '" + v + "' is not a mode: use auto, standalone or cluster";
                  return static_cast<int>(KW_ERR_BAD_VALUE);
              }
              c.mode = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.mode; }}},
        {"sentinel.username",
         {[](Config &c, const std::string &v, std::string *) {
              c.sentinel.username = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.sentinel.username; }}},
        {"sentinel.password",
         {[](Config &c, const std::string &v, std::string *) {
              c.sentinel.password = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.sentinel.password.empty() ? std::string() : "***"; }}},
        {"sentinel.tls",
         {[](Config &c, const std::string &v, std::string *err) {
              if (!parse_bool_word(v, &c.sentinel.tls)) {
                  *err = "sentinel.tls: '" + v + "' is not a boolean: use true or false";
                  return static_cast<int>(KW_ERR_BAD_VALUE);
              }
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return std::string(c.sentinel.tls ? "true" : "false"); }}},
        {"tls.ca_file", text_opt(&TlsOptions::ca_file)},
        {"tls.cert_file", text_opt(&TlsOptions::cert_file)},
        {"tls.key_file", text_opt(&TlsOptions::key_file)},
        {"tls.server_name", text_opt(&TlsOptions::server_name)},
        {"tls.verify",
         {[](Config &c, const std::string &v, std::string *err) {
              if (!parse_bool_word(v, &c.tls.verify)) {
                  *err = "tls.verify: '" + v + "' is not a boolean: use true or false";
                  return static_cast<int>(KW_ERR_BAD_VALUE);
              }
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return std::string(c.tls.verify ? "true" : "false"); }}},
        {"cluster.refresh", duration_opt(&Config::cluster_refresh_ms, 100, "cluster.refresh")},
        {"cluster.migration_wait",
         duration_opt(&Config::migration_wait_ms, 100, "cluster.migration_wait")},
        {"namespace",
         {[](Config &c, const std::string &v, std::string *err) {
              if (!valid_queue_name(v, err)) {
                  *err = "namespace: " + *err;
                  return static_cast<int>(KW_ERR_BAD_VALUE);
              }
              c.ns = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.ns; }}},
        {"queues",
         {[](Config &c, const std::string &v, std::string *err) {
              std::vector<std::string> names;
              size_t start = 0;
              while (start < v.size()) {
                  size_t comma = v.find(',', start);
                  std::string q = v.substr(
                      start, comma == std::string::npos ? std::string::npos : comma - start);
                  if (!valid_queue_name(q, err)) {
                      *err = "queues: " + *err;
                      return static_cast<int>(KW_ERR_BAD_VALUE);
                  }
                  if (q == kKeysQueue) {
                      *err =
                          "queues: 'keys' is the key-tracking queue (see track.enable); "
                          "name task queues otherwise";
                      return static_cast<int>(KW_ERR_BAD_VALUE);
                  }
                  names.push_back(q);
                  if (comma == std::string::npos) break;
                  start = comma + 1;
              }
              c.queues = names;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) {
              std::string out;
              for (auto &q : c.queues) out += (out.empty() ? "" : ",") + q;
              return out;
          }}},
        {"track.enable", bool_opt(&Config::track_enable, "track.enable")},
        {"track.done_window", duration_opt(&Config::done_window_ms, 0, "track.done_window")},
        {"queue.done_mode",
         {[](Config &c, const std::string &v, std::string *err) {
              if (v != "auto" && v != "always") {
                  *err = "queue.done_mode: '" + v + "' is not a mode: use auto or always";
                  return static_cast<int>(KW_ERR_BAD_VALUE);
              }
              c.done_mode = v;
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return c.done_mode; }}},
        {"lease", duration_opt(&Config::lease_ms, 100, "lease")},
        {"hold.timeout", duration_opt(&Config::hold_timeout_ms, 100, "hold.timeout")},
        {"retry.base", duration_opt(&Config::retry_base_ms, 1, "retry.base")},
        {"retry.max", duration_opt(&Config::retry_max_ms, 1, "retry.max")},
        {"max_attempts",
         int_opt(
             1, 1000000, "max_attempts", [](Config &c, int64_t n) { c.max_attempts = n; },
             [](const Config &c) { return c.max_attempts; })},
        {"sweep.batch", int_opt(
                            1, 1000, "sweep.batch", [](Config &c, int64_t n) { c.sweep_batch = n; },
                            [](const Config &c) { return c.sweep_batch; })},
        {"sweep.interval", duration_opt(&Config::sweep_interval_ms, 1, "sweep.interval")},
        {"sweep.scan_interval",
         duration_opt(&Config::scan_interval_ms, 100, "sweep.scan_interval")},
        {"dedupe.enable", bool_opt(&Config::dedupe_enable, "dedupe.enable")},
        {"dedupe.ttl", duration_opt(&Config::dedupe_ttl_ms, 1, "dedupe.ttl")},
        {"limits.key_bytes",
         int_opt(
             1, 512LL << 20, "limits.key_bytes", [](Config &c, int64_t n) { c.key_limit = n; },
             [](const Config &c) { return c.key_limit; })},
        {"limits.value_bytes",
         int_opt(
             0, 512LL << 20, "limits.value_bytes", [](Config &c, int64_t n) { c.value_limit = n; },
             [](const Config &c) { return c.value_limit; })},
        {"adopt.rules",
         {[](Config &c, const std::string &v, std::string *err) {
              std::vector<AdoptRule> rules;
              if (!parse_adopt_rules(v, &rules, err)) return static_cast<int>(KW_ERR_BAD_VALUE);
              c.adopt_rules = std::move(rules);
              return static_cast<int>(KW_OK);
          },
          [](const Config &c) { return format_adopt_rules(c.adopt_rules); }}},
        {"catchup.enable", bool_opt(&Config::catchup_enable, "catchup.enable")},
        {"catchup.count",
         int_opt(
             10, 10000, "catchup.count", [](Config &c, int64_t n) { c.catchup_count = n; },
             [](const Config &c) { return c.catchup_count; })},
        {"catchup.rate",
         int_opt(
             1000, 10000000, "catchup.rate", [](Config &c, int64_t n) { c.catchup_rate = n; },
             [](const Config &c) { return c.catchup_rate; })},
    };
    return table;
}

std::string known_names() {
    std::string names;
    for (auto &kv : options()) names += (names.empty() ? "" : ", ") + kv.first;
    return names;
}

}  // namespace

int Config::default_workers() {
    // More workers than cores only adds wake-ups and context switches for the loop thread
    // and Redis to compete with; slow handlers warrant setting `workers` explicitly.
    unsigned n = std::thread::hardware_concurrency();
    return static_cast<int>(n == 0 ? 1 : n > 4 ? 4 : n);
}

RedisUrl Config::default_url() {
    RedisUrl u;
    u.host = "127.0.0.1";
    return u;
}

int Config::set(const std::string &name, const std::string &value, std::string *err) {
    auto it = options().find(name);
    if (it == options().end()) {
        *err = "unknown configuration name '" + name + "'; known names: " + known_names();
        return KW_ERR_UNKNOWN_CONF;
    }
    Config copy = *this;
    int rc = it->second.set(copy, value, err);
    if (rc == KW_OK) *this = std::move(copy);
    return rc;
}

std::vector<std::string> Config::names() {
    std::vector<std::string> out;
    for (auto &kv : options()) out.push_back(kv.first);
    return out;
}

int Config::get(const std::string &name, std::string *value) const {
    auto it = options().find(name);
    if (it == options().end()) return KW_ERR_UNKNOWN_CONF;
    *value = it->second.get(*this);
    return KW_OK;
}

int Config::validate(std::string *err) const {
    if (reconnect_min_ms > reconnect_max_ms) {
        *err = "reconnect.min (" + std::to_string(reconnect_min_ms) +
               "ms) is above reconnect.max (" + std::to_string(reconnect_max_ms) +
               "ms): lower reconnect.min or raise reconnect.max";
        return KW_ERR_BAD_VALUE;
    }
    if (retry_base_ms > retry_max_ms) {
        *err = "retry.base (" + std::to_string(retry_base_ms) + "ms) is above retry.max (" +
               std::to_string(retry_max_ms) + "ms): lower retry.base or raise retry.max";
        return KW_ERR_BAD_VALUE;
    }
    if (hold_timeout_ms < lease_ms) {
        *err = "hold.timeout (" + std::to_string(hold_timeout_ms) + "ms) is shorter than lease (" +
               std::to_string(lease_ms) +
               "ms): items would be taken back before their first lease ran out; raise "
               "hold.timeout or lower lease";
        return KW_ERR_BAD_VALUE;
    }
    if (health_timeout_ms <= health_interval_ms) {
        *err = "health.timeout (" + std::to_string(health_timeout_ms) +
               "ms) must be longer than health.interval (" + std::to_string(health_interval_ms) +
               "ms)";
        return KW_ERR_BAD_VALUE;
    }
    if (url.is_sentinel() && mode == "cluster") {
        *err =
            "redis.mode=cluster, but redis.url is a sentinel URL (one master, found by the "
            "sentinels): use redis.mode=auto or standalone";
        return KW_ERR_BAD_VALUE;
    }
    return validate_adopt_rules(err);
}

// The rules against the options they depend on, which may be set after adopt.rules.
int Config::validate_adopt_rules(std::string *err) const {
    if (adopt_rules.empty()) return KW_OK;
    if (!track_enable) {
        *err = "adopt.rules needs track.enable=true: adopted keys are tracked keys";
        return KW_ERR_BAD_VALUE;
    }
    const AdoptRules rules(adopt_rules, ns);
    for (const std::string &why :
         {rules.namespace_error(ns), rules.db_error(url.db), rules.queue_error(queues)}) {
        if (why.empty()) continue;
        *err = why;
        return KW_ERR_BAD_VALUE;
    }
    return KW_OK;
}

std::vector<RedisUrl> Config::effective_seeds() const {
    std::vector<RedisUrl> out;
    for (RedisUrl u : seeds.empty() ? std::vector<RedisUrl>{url} : seeds) {
        if (user_set) u.user = user;
        if (password_set) u.password = password;
        u.tls_options = tls;
        u.sentinel = sentinel;
        out.push_back(u);
    }
    return out;
}

std::vector<std::string> Config::tls_warnings() const {
    bool tls_url = false;
    for (const RedisUrl &u : seeds.empty() ? std::vector<RedisUrl>{url} : seeds)
        tls_url = tls_url || u.tls || (u.is_sentinel() && sentinel.tls);
    if (tls_url) {
        if (tls.verify) return {};
        return {
            "tls.verify=false: the server's certificate and name are not checked, so "
            "anyone on the way to the server can pose as it (for tests only): set "
            "tls.ca_file to the CA that signed the server's certificate instead"};
    }
    std::string given;
    for (const auto &[name, set] : {std::pair{"tls.ca_file", !tls.ca_file.empty()},
                                    std::pair{"tls.cert_file", !tls.cert_file.empty()},
                                    std::pair{"tls.key_file", !tls.key_file.empty()},
                                    std::pair{"tls.server_name", !tls.server_name.empty()},
                                    std::pair{"tls.verify", !tls.verify}})
        if (set) given += (given.empty() ? "" : ", ") + std::string(name);
    if (given.empty()) return {};
    return {given +
            " set, but redis.url is not rediss://: the connection is not encrypted and "
            "the tls.* options are not used; write rediss:// (at the server's tls-port) "
            "to use TLS, or remove them"};
}

RedisUrl Config::effective_url() const {
    RedisUrl u = url;
    if (user_set) u.user = user;
    if (password_set) u.password = password;
    u.tls_options = tls;
    u.sentinel = sentinel;
    return u;
}

}  // namespace keywatch
