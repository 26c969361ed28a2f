#include "cli/check/server_checks.h"

#include <chrono>
#include <cstdlib>
#include <optional>

#include "core/redis/blocking_redis.h"
#include "core/redis/endpoint.h"
#include "core/redis/reply_error.h"
#include "core/redis/keyspace_events.h"

namespace keywatch::cli {
namespace {

// A command's answer: the value, or the server's error words.
struct Answer {
    std::optional<std::string> value;
    std::string error;
    bool unknown_command = false;  // renamed or disabled
};

Answer config_get(BlockingRedis &c, const std::string &name, int64_t timeout_ms) {
    Answer a;
    ReplyPtr r = c.command({"CONFIG", "GET", name}, timeout_ms);
    if (!r) {
        a.error = c.error();
        return a;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        a.error.assign(r->str, r->len);
        a.unknown_command = a.error.rfind("ERR unknown command", 0) == 0;
        return a;
    }
    std::string v;
    if (notify_flags_from_reply(r.get(), &v)) a.value = v;  // [name, value]
    return a;
}

// One field of INFO <section> ("redis_version"), or nothing (refused, absent).
std::optional<std::string> info_field(BlockingRedis &c, const std::string &section,
                                      const std::string &field, int64_t timeout_ms) {
    ReplyPtr r = c.command({"INFO", section}, timeout_ms);
    if (!r || r->type != REDIS_REPLY_STRING) return {};
    const std::string text(r->str, r->len), mark = "\n" + field + ":";
    size_t at = ("\n" + text).find(mark);
    if (at == std::string::npos) return {};
    at += mark.size() - 1;
    return text.substr(at, text.find_first_of("\r\n", at) - at);
}

// A field of HELLO's answer (HELLO is allowed to every user): "version", "role".
std::optional<std::string> hello_field(BlockingRedis &c, const std::string &name,
                                       int64_t timeout_ms) {
    ReplyPtr r = c.command({"HELLO"}, timeout_ms);
    if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                std::string(r->element[i]->str) == name &&
                r->element[i + 1]->type == REDIS_REPLY_STRING)
                return std::string(r->element[i + 1]->str, r->element[i + 1]->len);
    return {};
}

std::optional<std::string> server_version(BlockingRedis &c, int64_t timeout_ms) {
    if (auto v = hello_field(c, "version", timeout_ms)) return v;
    return info_field(c, "server", "redis_version", timeout_ms);
}

// A standalone URL must name the master: a replica refuses keywatch's writes and never
// publishes `expired`.
void check_role(BlockingRedis &c, const std::string &node, int64_t timeout_ms,
                CheckReport *report) {
    std::optional<std::string> role = hello_field(c, "role", timeout_ms);
    if (!role) role = info_field(c, "replication", "role", timeout_ms);
    if (!role) {
        report->add("role", node, Verdict::Warn, "cannot tell whether this is the master",
                    "make sure the URL names the master");
        return;
    }
    if (*role == "master") {
        report->add("role", node, Verdict::Ok, "master");
        return;
    }
    const auto host = info_field(c, "replication", "master_host", timeout_ms);
    const auto port = info_field(c, "replication", "master_port", timeout_ms);
    report->add("role", node, Verdict::Fail,
                "a replica" +
                    (host && port ? " of " + Endpoint{*host, std::atoi(port->c_str()), ""}.str()
                                  : std::string()) +
                    ": it refuses keywatch's writes and never publishes expired",
                "give keywatch the master's URL");
}

void check_version(BlockingRedis &c, const std::string &node, int64_t timeout_ms,
                   CheckReport *report) {
    const auto v = server_version(c, timeout_ms);
    if (!v) {
        report->add("version", node, Verdict::Warn,
                    "cannot read the server's version (HELLO and INFO refused)",
                    "make sure the server runs Redis 7.0 or later");
        return;
    }
    const int major = std::atoi(v->c_str());
    if (major >= 7) {
        report->add("version", node, Verdict::Ok, "Redis " + *v + " (7.0+ needed)");
        return;
    }
    report->add("version", node, Verdict::Fail,
                "Redis " + *v + ": keywatch's queue scripts need Redis 7.0 or later (PEXPIRETIME)",
                "upgrade the server to Redis 7.0 or later");
}

// CONFIG and notify-keyspace-events, which keywatch reads through it.
void check_notifications(BlockingRedis &c, const std::string &node, const std::string &need,
                         int64_t timeout_ms, CheckReport *report) {
    const Answer a = config_get(c, "notify-keyspace-events", timeout_ms);
    if (!a.value) {
        const std::string why = a.unknown_command
                                    ? "CONFIG is renamed or disabled (" + a.error + ")"
                                    : "CONFIG GET refused (" + a.error + ")";
        report->add("config", node, Verdict::Warn,
                    why +
                        ": keywatch cannot check notify-keyspace-events at start, and "
                        "notify.enable=true cannot set it",
                    a.unknown_command
                        ? "set notify-keyspace-events in redis.conf (or your provider's "
                          "settings) yourself"
                        : "ACL SETUSER <user> +config|get, or set notify-keyspace-events in "
                          "redis.conf yourself");
        report->add("notifications", node, Verdict::Warn,
                    "cannot read notify-keyspace-events (CONFIG refused)",
                    "make sure it includes '" + need + "' (e.g. notify-keyspace-events " + need +
                        " in redis.conf)");
        return;
    }
    report->add("config", node, Verdict::Ok,
                "CONFIG GET answers: keywatch checks notify-keyspace-events at start");
    const std::string missing = missing_notify_flags(*a.value, need);
    if (missing.empty()) {
        report->add("notifications", node, Verdict::Ok,
                    need.empty()
                        ? "keywatch subscribes to no keyspace event here"
                        : "notify-keyspace-events '" + *a.value + "' includes '" + need + "'");
        return;
    }
    report->add("notifications", node, Verdict::Fail,
                "notify-keyspace-events is '" + *a.value + "' and lacks '" + missing +
                    "': the keyspace events keywatch subscribes to will not arrive",
                "CONFIG SET notify-keyspace-events " + *a.value + missing +
                    " (and the same in redis.conf, or CONFIG REWRITE), or run keywatch with "
                    "notify.enable=true");
}

void check_persistence(BlockingRedis &c, const std::string &node, int64_t timeout_ms,
                       CheckReport *report) {
    const std::string fix =
        "CONFIG SET appendonly yes (appendfsync everysec), and appendonly yes in redis.conf";
    std::optional<std::string> aof = config_get(c, "appendonly", timeout_ms).value;
    const std::optional<std::string> save = config_get(c, "save", timeout_ms).value;
    if (!aof) {
        if (auto on = info_field(c, "persistence", "aof_enabled", timeout_ms))
            aof = *on == "1" ? "yes" : "no";
    }
    if (aof && *aof == "yes") {
        report->add("persistence", node, Verdict::Ok, "AOF is on");
    } else if (save && !save->empty()) {
        report->add("persistence", node, Verdict::Warn,
                    "RDB snapshots only (save '" + *save +
                        "'): a crash loses the tracked items and acks written since the last one",
                    fix);
    } else if (save || aof) {
        report->add("persistence", node, Verdict::Warn,
                    save ? "neither AOF nor RDB: a restart empties Redis, tracked items included"
                         : "AOF is off and the RDB setting cannot be read (CONFIG refused)",
                    fix);
    } else {
        report->add("persistence", node, Verdict::Warn,
                    "cannot read the persistence settings (CONFIG and INFO refused)",
                    "make sure AOF (appendonly yes) or RDB snapshots are on");
    }
}

void check_memory_policy(BlockingRedis &c, const std::string &node, int64_t timeout_ms,
                         CheckReport *report) {
    std::optional<std::string> policy = config_get(c, "maxmemory-policy", timeout_ms).value;
    std::optional<std::string> limit = config_get(c, "maxmemory", timeout_ms).value;
    if (!policy) policy = info_field(c, "memory", "maxmemory_policy", timeout_ms);
    if (!limit) limit = info_field(c, "memory", "maxmemory", timeout_ms);
    if (!policy) {
        report->add("memory policy", node, Verdict::Warn, "cannot read maxmemory-policy",
                    "make sure it is noeviction or a volatile-* policy, never allkeys-*");
        return;
    }
    const bool bounded = limit && *limit != "0";
    const std::string what =
        "maxmemory-policy " + *policy + (bounded ? " with maxmemory " + *limit : "");
    const std::string fix =
        "CONFIG SET maxmemory-policy volatile-lru (or noeviction), and the same in redis.conf";
    if (policy->rfind("allkeys-", 0) == 0) {
        const std::string risk =
            ": Redis may evict keywatch's own queue keys, and the items in them are lost "
            "without any event";
        if (bounded)
            report->add("memory policy", node, Verdict::Fail, what + risk, fix);
        else
            report->add("memory policy", node, Verdict::Warn,
                        what + " (no maxmemory yet)" + risk + " once maxmemory is set", fix);
        return;
    }
    std::string detail = what;
    if (*policy == "noeviction")
        detail += ": nothing is evicted (writes fail with OOM when memory is full)";
    else if (bounded)
        detail +=
            ": only keys with a TTL are evicted (keywatch's queues have none); a tracked key "
            "evicted is reported as 'evicted'";
    report->add("memory policy", node, Verdict::Ok, detail);
}

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

ServerFacts read_clock(BlockingRedis &c, int64_t timeout_ms) {
    ServerFacts f;
    const int64_t before = now_ms();
    ReplyPtr r = c.command({"TIME"}, timeout_ms);
    const int64_t after = now_ms();
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return f;
    const int64_t server =
        std::atoll(r->element[0]->str) * 1000 + std::atoll(r->element[1]->str) / 1000;
    f.clock_read = true;
    f.clock_offset_ms = server - (before + after) / 2;
    return f;
}

}  // namespace

ServerFacts check_server(BlockingRedis &c, const std::string &need_flags, bool standalone,
                         int64_t timeout_ms, CheckReport *report) {
    const std::string node = c.url().endpoint();
    check_version(c, node, timeout_ms, report);
    if (standalone) check_role(c, node, timeout_ms, report);
    check_notifications(c, node, need_flags, timeout_ms, report);
    check_persistence(c, node, timeout_ms, report);
    check_memory_policy(c, node, timeout_ms, report);
    return read_clock(c, timeout_ms);
}

void check_replica(BlockingRedis &c, const std::string &need_flags, int64_t timeout_ms,
                   CheckReport *report) {
    const std::string node = c.url().endpoint();
    const Answer a = config_get(c, "notify-keyspace-events", timeout_ms);
    const std::string fix = "CONFIG SET notify-keyspace-events " + need_flags +
                            " on the replica and in its redis.conf (the setting is not "
                            "replicated)";
    if (!a.value) {
        report->add("replica notifications", node, Verdict::Warn,
                    "cannot read notify-keyspace-events (" + a.error + ")",
                    "make sure it includes '" + need_flags + "' there too");
        return;
    }
    const std::string missing = missing_notify_flags(*a.value, need_flags);
    if (missing.empty())
        report->add("replica notifications", node, Verdict::Ok,
                    "notify-keyspace-events '" + *a.value + "' (ready for a failover)");
    else
        report->add("replica notifications", node, Verdict::Warn,
                    "notify-keyspace-events is '" + *a.value + "' and lacks '" + missing +
                        "': promoted by a failover, it would publish none of keywatch's events",
                    fix);
}

}  // namespace keywatch::cli
