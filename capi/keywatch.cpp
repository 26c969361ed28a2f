// The C API: thin shims over the C++ engine. Every function catches everything: no C++
// exception crosses this boundary.
#include "keywatch.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <new>
#include <string>

#include "capi/c_handler.h"
#include "core/client.h"
#include "core/config.h"
#include "core/engine.h"
#include "core/event.h"
#include "core/filter.h"
#include "core/time_limit.h"

// The header's documented limit is the one core checks.
static_assert(KW_MAX_TIME_MS == keywatch::kMaxTimeMs, "KW_MAX_TIME_MS must match core");

struct kw_conf_s {
    keywatch::Config config;
};

struct kw_filter_s {
    keywatch::Filter filter;
};

struct kw_client_s {
    explicit kw_client_s(const keywatch::Config &c) : client(c) {}
    keywatch::Client client;
    std::string error;  // copy handed out by kw_client_last_error
};

struct kw_engine_s {
    explicit kw_engine_s(const keywatch::Config &c) : engine(c) {}
    keywatch::Engine engine;
};

namespace {

void write_err(char *buf, size_t size, const std::string &msg) {
    if (!buf || size == 0) return;
    size_t n = std::min(size - 1, msg.size());
    memcpy(buf, msg.data(), n);
    buf[n] = '\0';
}

// Per-thread copy of an engine's last error, so the returned pointer stays valid while
// other threads update the engine's message.
thread_local std::string tls_last_error;

template <typename F>
int guarded(F &&f, char *errstr = nullptr, size_t errstr_size = 0) {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        write_err(errstr, errstr_size, "out of memory");
        return KW_ERR_NOMEM;
    } catch (const std::exception &e) {
        write_err(errstr, errstr_size, std::string("internal error: ") + e.what());
        return KW_ERR_INTERNAL;
    } catch (...) {
        write_err(errstr, errstr_size, "internal error");
        return KW_ERR_INTERNAL;
    }
}

}  // namespace

extern "C" {

int kw_version(void) {
    return KW_VERSION;
}

const char *kw_version_string(void) {
    return KW_VERSION_STRING;
}

const char *kw_strerror(int status) {
    switch (status) {
#define KW_STRERROR_CASE_(name, code, text) \
    case code:                              \
        return text;
        KW_STATUS_TABLE(KW_STRERROR_CASE_)
#undef KW_STRERROR_CASE_
    }
    return "unknown status";
}

const char *kw_err_name(int status) {
    switch (status) {
#define KW_ERRNAME_CASE_(name, code, text) \
    case code:                             \
        return #name;
        KW_STATUS_TABLE(KW_ERRNAME_CASE_)
#undef KW_ERRNAME_CASE_
    }
    return "KW_ERR_UNKNOWN";
}

kw_conf_t *kw_conf_new(void) {
    try {
        return new kw_conf_s();
    } catch (...) {
        return nullptr;
    }
}

kw_conf_t *kw_conf_dup(const kw_conf_t *conf) {
    if (!conf) return nullptr;
    try {
        return new kw_conf_s(*conf);
    } catch (...) {
        return nullptr;
    }
}

void kw_conf_free(kw_conf_t *conf) {
    delete conf;
}

int kw_conf_set(kw_conf_t *conf, const char *name, const char *value, char *errstr,
                size_t errstr_size) {
    if (!conf || !name || !value) {
        write_err(errstr, errstr_size, "kw_conf_set: conf, name and value must not be NULL");
        return KW_ERR_INVALID_ARG;
    }
    return guarded(
        [&] {
            std::string err;
            int rc = conf->config.set(name, value, &err);
            if (rc != KW_OK) write_err(errstr, errstr_size, err);
            return rc;
        },
        errstr, errstr_size);
}

int kw_conf_get(const kw_conf_t *conf, const char *name, char *buf, size_t buf_size) {
    if (!conf || !name) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        std::string value;
        int rc = conf->config.get(name, &value);
        if (rc == KW_OK) write_err(buf, buf_size, value);
        return rc;
    });
}

/* ---- filters ---- */

kw_filter_t *kw_filter_new(void) {
    try {
        return new kw_filter_s();
    } catch (...) {
        return nullptr;
    }
}

void kw_filter_free(kw_filter_t *filter) {
    delete filter;
}

static int filter_set(kw_filter_t *filter, const char *name, const void *value, size_t len,
                      bool binary, char *errstr, size_t errstr_size) {
    if (!filter || !name || (!value && len)) {
        write_err(errstr, errstr_size, "kw_filter_set: filter, name and value must not be NULL");
        return KW_ERR_INVALID_ARG;
    }
    return guarded(
        [&] {
            std::string err;
            std::string_view v(static_cast<const char *>(value), len);
            keywatch::Filter copy = filter->filter;
            if (!copy.set(name, v, binary, &err)) {
                write_err(errstr, errstr_size, err);
                return err.rfind("unknown", 0) == 0 ? KW_ERR_UNKNOWN_CONF : KW_ERR_BAD_VALUE;
            }
            filter->filter = std::move(copy);
            return KW_OK;
        },
        errstr, errstr_size);
}

int kw_filter_set(kw_filter_t *filter, const char *name, const char *value, char *errstr,
                  size_t errstr_size) {
    return filter_set(filter, name, value, value ? strlen(value) : 0, false, errstr, errstr_size);
}

int kw_filter_set_bytes(kw_filter_t *filter, const char *name, const void *value, size_t len,
                        char *errstr, size_t errstr_size) {
    return filter_set(filter, name, value, len, true, errstr, errstr_size);
}

/* ---- engine ---- */

int kw_engine_new(const kw_conf_t *conf, kw_engine_t **out, char *errstr, size_t errstr_size) {
    if (!out) {
        write_err(errstr, errstr_size, "kw_engine_new: out must not be NULL");
        return KW_ERR_INVALID_ARG;
    }
    *out = nullptr;
    return guarded(
        [&] {
            keywatch::Config config = conf ? conf->config : keywatch::Config();
            std::string err;
            if (int rc = config.validate(&err); rc != KW_OK) {
                write_err(errstr, errstr_size, err);
                return rc;
            }
            *out = new kw_engine_s(config);
            return static_cast<int>(KW_OK);
        },
        errstr, errstr_size);
}

void kw_engine_free(kw_engine_t *engine) {
    try {
        delete engine;
    } catch (...) {
    }
}

int kw_engine_add_handler(kw_engine_t *engine, const kw_filter_t *filter, kw_handler_fn fn,
                          void *opaque, void (*free_opaque)(void *)) {
    if (!engine || !fn) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        auto handler = std::make_unique<keywatch::CHandler>(fn, opaque);
        keywatch::CHandler *added = handler.get();
        int rc = engine->engine.add_handler(filter ? filter->filter : keywatch::Filter(),
                                            std::move(handler));
        if (rc == KW_OK) added->arm_free_opaque(free_opaque);  // the engine owns it now
        return rc;
    });
}

int kw_engine_set_state_cb(kw_engine_t *engine, kw_state_fn fn, void *opaque) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        keywatch::Engine::StateSink sink;
        if (fn)
            sink = [fn, opaque](const std::string &node, kw_conn_state state,
                                const std::string &detail) {
                fn(node.c_str(), state, detail.c_str(), opaque);
            };
        return engine->engine.set_state_sink(std::move(sink));
    });
}

int kw_engine_set_log_cb(kw_engine_t *engine, kw_log_fn fn, void *opaque) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        keywatch::Engine::LogSink sink;
        if (fn)
            sink = [fn, opaque](kw_log_level level, const std::string &message) {
                fn(level, message.c_str(), opaque);
            };
        return engine->engine.set_log_sink(std::move(sink));
    });
}

int kw_engine_start(kw_engine_t *engine) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.start(); });
}

int kw_engine_stop(kw_engine_t *engine, int timeout_ms) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.stop(timeout_ms); });
}

const char *kw_engine_last_error(kw_engine_t *engine) {
    if (!engine) return "kw_engine_last_error: engine is NULL";
    try {
        tls_last_error = engine->engine.last_error();
        return tls_last_error.c_str();
    } catch (...) {
        return "out of memory";
    }
}

int kw_engine_stat(kw_engine_t *engine, const char *name, int64_t *value) {
    if (!engine || !name || !value) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.stat(name, value); });
}

char *kw_engine_stats_json(kw_engine_t *engine) {
    if (!engine) return nullptr;
    try {
        std::string json = engine->engine.stats_json();
        char *out = static_cast<char *>(malloc(json.size() + 1));
        if (out) memcpy(out, json.c_str(), json.size() + 1);
        return out;
    } catch (...) {
        return nullptr;
    }
}

/* ---- client ---- */

}  // extern "C"

namespace {

std::string bytes(const void *p, size_t n) {
    return p ? std::string(static_cast<const char *>(p), n) : std::string();
}

char *dup_string(const std::string &s) {
    char *out = static_cast<char *>(malloc(s.size() + 1));
    if (out) memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

// Runs a client call: checks the handle and arguments, catches everything.
template <typename F>
int client_call(kw_client_t *c, bool args_ok, const char *what, F &&f) {
    if (!c) return KW_ERR_INVALID_ARG;
    if (!args_ok) {
        c->error = std::string(what) + ": a required argument is NULL";
        return KW_ERR_INVALID_ARG;
    }
    c->error.clear();
    return guarded([&] { return f(c->client); });
}

// Flags outside `known` are refused, so that a flag this release does not know (a typo, or
// one of a newer release) is never silently ignored.
int check_flags(kw_client_t *c, const char *what, int flags, int known, const char *names) {
    const unsigned bad = static_cast<unsigned>(flags) & ~static_cast<unsigned>(known);
    if (bad == 0) return KW_OK;
    char hex[16];
    snprintf(hex, sizeof hex, "0x%x", bad);
    c->error = std::string(what) + ": unknown flag bits " + hex + " in flags " +
               std::to_string(flags) + " (known: " + names + "); nothing was done";
    return KW_ERR_INVALID_ARG;
}

constexpr int kTrackFlags = KW_TRACK_NX | KW_TRACK_XX | KW_TRACK_SNAPSHOT;
const char kTrackFlagNames[] = "KW_TRACK_NX, KW_TRACK_XX, KW_TRACK_SNAPSHOT";

}  // namespace

extern "C" {

int kw_client_new(const kw_conf_t *conf, kw_client_t **out, char *errstr, size_t errstr_size) {
    if (!out) {
        write_err(errstr, errstr_size, "kw_client_new: out must not be NULL");
        return KW_ERR_INVALID_ARG;
    }
    *out = nullptr;
    return guarded(
        [&] {
            auto c = std::make_unique<kw_client_s>(conf ? conf->config : keywatch::Config());
            int rc = c->client.connect();
            if (rc != KW_OK) {
                write_err(errstr, errstr_size, c->client.last_error());
                return rc;
            }
            *out = c.release();
            return static_cast<int>(KW_OK);
        },
        errstr, errstr_size);
}

void kw_client_free(kw_client_t *client) {
    delete client;
}

const char *kw_client_last_error(kw_client_t *client) {
    if (!client) return "kw_client_last_error: client is NULL";
    try {
        if (client->error.empty()) client->error = client->client.last_error();
        return client->error.c_str();
    } catch (...) {
        return "out of memory";
    }
}

int kw_track(kw_client_t *client, const void *key, size_t key_len, const void *value,
             size_t value_len, int64_t ttl_ms, int flags, int64_t *deadline_ms) {
    return client_call(client, key && (value || value_len == 0), "kw_track", [&](auto &c) {
        if (int rc = check_flags(client, "kw_track", flags, kTrackFlags, kTrackFlagNames))
            return rc;
        return c.track(bytes(key, key_len), bytes(value, value_len), ttl_ms, flags, deadline_ms);
    });
}

int kw_untrack(kw_client_t *client, const void *key, size_t key_len, int delete_key) {
    return client_call(client, key != nullptr, "kw_untrack",
                       [&](auto &c) { return c.untrack(bytes(key, key_len), delete_key != 0); });
}

int kw_adopt(kw_client_t *client, const void *key, size_t key_len, int flags,
             int64_t *deadline_ms) {
    return client_call(client, key != nullptr, "kw_adopt", [&](auto &c) {
        if (int rc = check_flags(client, "kw_adopt", flags, KW_TRACK_SNAPSHOT, "KW_TRACK_SNAPSHOT"))
            return rc;
        return c.adopt(bytes(key, key_len), flags, deadline_ms);
    });
}

int kw_schedule(kw_client_t *client, const char *queue, const void *id, size_t id_len,
                const void *payload, size_t payload_len, int64_t at_ms, int64_t delay_ms, int flags,
                int64_t *at_out) {
    return client_call(
        client, queue && id && (payload || payload_len == 0), "kw_schedule", [&](auto &c) {
            if (int rc =
                    check_flags(client, "kw_schedule", flags, KW_SCHEDULE_NX, "KW_SCHEDULE_NX"))
                return rc;
            return c.schedule(queue, bytes(id, id_len), bytes(payload, payload_len), at_ms,
                              delay_ms, flags, at_out);
        });
}

int kw_cancel(kw_client_t *client, const char *queue, const void *id, size_t id_len) {
    return client_call(client, queue && id, "kw_cancel",
                       [&](auto &c) { return c.cancel(queue, bytes(id, id_len)); });
}

int kw_reschedule(kw_client_t *client, const char *queue, const void *id, size_t id_len,
                  int64_t at_ms, int64_t delay_ms, int64_t *at_out) {
    return client_call(client, queue && id, "kw_reschedule", [&](auto &c) {
        return c.reschedule(queue, bytes(id, id_len), at_ms, delay_ms, at_out);
    });
}

int kw_client_pipeline_begin(kw_client_t *client) {
    return client_call(client, true, "kw_client_pipeline_begin",
                       [&](auto &c) { return c.pipeline_begin(); });
}

int kw_client_pipeline_end(kw_client_t *client, int *statuses, size_t cap, size_t *count) {
    return client_call(client, true, "kw_client_pipeline_end", [&](auto &c) {
        std::vector<int> all;
        int rc = c.pipeline_end(&all);
        for (size_t i = 0; statuses && i < all.size() && i < cap; i++) statuses[i] = all[i];
        if (count) *count = all.size();
        return rc;
    });
}

char *kw_client_inspect_json(kw_client_t *client) {
    std::string json;
    int rc = client_call(client, true, "kw_client_inspect_json",
                         [&](auto &c) { return c.inspect_json(&json); });
    return rc == KW_OK ? dup_string(json) : nullptr;
}

char *kw_dead_list_json(kw_client_t *client, const char *queue, size_t limit) {
    std::string json;
    int rc = client_call(client, queue != nullptr, "kw_dead_list_json",
                         [&](auto &c) { return c.dead_list_json(queue, limit, &json); });
    return rc == KW_OK ? dup_string(json) : nullptr;
}

int kw_dead_replay(kw_client_t *client, const char *queue, const char *entry_id, size_t limit,
                   int64_t *count) {
    return client_call(client, queue != nullptr, "kw_dead_replay", [&](auto &c) {
        return c.dead_replay(queue, entry_id ? entry_id : "", limit, count);
    });
}

int kw_dead_purge(kw_client_t *client, const char *queue, const char *entry_id, int64_t *count) {
    return client_call(client, queue != nullptr, "kw_dead_purge", [&](auto &c) {
        return c.dead_purge(queue, entry_id ? entry_id : "", count);
    });
}

void kw_free(void *ptr) {
    free(ptr);
}

}  // extern "C"
