// The C API: thin shims over the C++ engine. Every function catches everything: no C++
// exception crosses this boundary.
#include "keywatch.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "capi/c_handler.h"
#include "capi/client_json.h"
#include "core/base/c_out.h"
#include "core/client/client.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/base/event.h"
#include "core/engine/filter.h"
#include "core/base/stats.h"
#include "core/plugins/plugin_set.h"
#include "core/base/time_limit.h"

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
    std::string error;                         // copy handed out by kw_client_last_error
    std::vector<std::string> pipeline_errors;  // of the last kw_client_pipeline_end
};

struct kw_engine_s {
    explicit kw_engine_s(const keywatch::Config &c)
        : plugins(c,
                  [this](kw_log_level l, const std::string &m, const keywatch::LogFields &f) {
                      if (!freeing) engine.log(l, m, f);
                  }),
          engine(c) {
        engine.set_stat_source(
            keywatch::StatId::PLUGIN_COUNTER,
            [this](std::vector<keywatch::StatSample> *out) { plugins.append_stats(out); });
    }
    // Plugin log lines during kw_engine_free (a plugin's close) are dropped: the engine is
    // being destroyed.
    ~kw_engine_s() { freeing = true; }
    std::atomic<bool> freeing{false};
    // Declared before the engine, destroyed after it: the engine releases its plugin
    // handlers (close, dlclose) first.
    keywatch::PluginSet plugins;
    keywatch::Engine engine;
    // Copies handed out by kw_engine_last_error, one per calling thread, so that a pointer
    // stays valid until that thread asks this engine again (other engines and threads
    // have their own copies).
    std::mutex error_mu;
    std::map<std::thread::id, std::string> error_copies;
};

// A statistics snapshot: samples with their histogram bounds and cumulative counts.
struct kw_stats_s {
    std::vector<keywatch::StatSample> samples;
    std::vector<std::array<uint64_t, keywatch::kHistogramBuckets>> cumulative;  // per sample
    std::array<double, keywatch::kHistogramBuckets> bounds;
};

namespace {

using keywatch::write_err;

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

int kw_conf_dump(const kw_conf_t *conf, kw_conf_dump_fn fn, void *opaque) {
    if (!conf || !fn) return KW_ERR_INVALID_ARG;
    // Every row first, so that a failure invokes the callback never.
    std::vector<std::array<std::string, 3>> rows;
    int rc = guarded([&] {
        const keywatch::Config defaults;
        for (auto &name : keywatch::Config::names()) {
            std::array<std::string, 3> row{name, "", ""};
            if (int r = conf->config.get(name, &row[1]); r != KW_OK) return r;
            if (int r = defaults.get(name, &row[2]); r != KW_OK) return r;
            rows.push_back(std::move(row));
        }
        return static_cast<int>(KW_OK);
    });
    if (rc != KW_OK) return rc;
    for (auto &row : rows) fn(row[0].c_str(), row[1].c_str(), row[2].c_str(), opaque);
    return KW_OK;
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

int kw_engine_add_plugin(kw_engine_t *engine, const char *plugin, const char *instance,
                         const kw_filter_t *filter, const char *const *options, char *errstr,
                         size_t errstr_size) {
    if (!engine || !plugin) {
        write_err(errstr, errstr_size, "kw_engine_add_plugin: engine and plugin must not be NULL");
        return KW_ERR_INVALID_ARG;
    }
    return guarded(
        [&] {
            keywatch::PluginSpec spec;
            spec.plugin = plugin;
            spec.instance = instance ? instance : "";
            if (filter) spec.filter = filter->filter;
            for (size_t i = 0; options && options[i]; i += 2) {
                if (!options[i + 1]) {
                    write_err(errstr, errstr_size,
                              std::string("kw_engine_add_plugin: option \"") + options[i] +
                                  "\" has no value: options are name, value, ..., NULL");
                    return static_cast<int>(KW_ERR_INVALID_ARG);
                }
                spec.options.emplace_back(options[i], options[i + 1]);
            }
            std::string err;
            int rc = engine->plugins.add(engine->engine, spec, &err);
            if (rc != KW_OK) write_err(errstr, errstr_size, err);
            return rc;
        },
        errstr, errstr_size);
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
            sink = [fn, opaque](kw_log_level level, const std::string &message,
                                const keywatch::LogFields &) {
                fn(level, message.c_str(), opaque);
            };
        return engine->engine.set_log_sink(std::move(sink));
    });
}

int kw_engine_set_log_fields_cb(kw_engine_t *engine, kw_log_fields_fn fn, void *opaque) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        keywatch::Engine::LogSink sink;
        if (fn)
            sink = [fn, opaque](kw_log_level level, const std::string &message,
                                const keywatch::LogFields &fields) {
                // name, value, ..., NULL: on the stack for the few fields a line has.
                constexpr size_t kMax = 8;
                const char *flat[2 * kMax + 1];
                size_t n = 0;
                for (size_t i = 0; i < fields.size() && i < kMax; i++) {
                    flat[n++] = fields[i].first.c_str();
                    flat[n++] = fields[i].second.c_str();
                }
                flat[n] = nullptr;
                fn(level, message.c_str(), flat, opaque);
            };
        return engine->engine.set_log_sink(std::move(sink));
    });
}

int kw_engine_start(kw_engine_t *engine) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.start(); });
}

int kw_engine_check(kw_engine_t *engine) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.check(); });
}

int kw_engine_stop(kw_engine_t *engine, int64_t timeout_ms) {
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] { return engine->engine.stop(timeout_ms); });
}

const char *kw_engine_last_error(kw_engine_t *engine) {
    if (!engine) return "kw_engine_last_error: engine is NULL";
    try {
        std::string message = engine->engine.last_error();
        std::lock_guard<std::mutex> lock(engine->error_mu);
        std::string &copy = engine->error_copies[std::this_thread::get_id()];
        copy = std::move(message);
        return copy.c_str();
    } catch (...) {
        return "out of memory";
    }
}

int kw_engine_stat(kw_engine_t *engine, const char *name, int64_t *value) {
    if (!engine || !name || !value) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        if (strncmp(name, "plugin.", 7) == 0) return engine->plugins.stat(name, value);
        return engine->engine.stat(name, value);
    });
}

int kw_engine_stats_json(kw_engine_t *engine, char **out) {
    if (!out) return KW_ERR_INVALID_ARG;
    *out = nullptr;
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        std::string json = engine->engine.stats_json();
        *out = keywatch::malloc_copy(json);
        return static_cast<int>(*out ? KW_OK : KW_ERR_NOMEM);
    });
}

int kw_engine_stats(kw_engine_t *engine, kw_stats_t **out) {
    if (!out) return KW_ERR_INVALID_ARG;
    *out = nullptr;
    if (!engine) return KW_ERR_INVALID_ARG;
    return guarded([&] {
        auto s = std::make_unique<kw_stats_s>();
        s->samples = engine->engine.stats_snapshot();
        for (size_t b = 0; b < keywatch::kHistogramBuckets; b++)
            s->bounds[b] =
                b < keywatch::kHistogramBounds.size() ? keywatch::kHistogramBounds[b] : HUGE_VAL;
        s->cumulative.resize(s->samples.size());
        for (size_t i = 0; i < s->samples.size(); i++) {
            uint64_t total = 0;
            for (size_t b = 0; b < keywatch::kHistogramBuckets; b++)
                s->cumulative[i][b] = total += s->samples[i].histogram.buckets[b];
        }
        *out = s.release();
        return static_cast<int>(KW_OK);
    });
}

void kw_stats_free(kw_stats_t *stats) {
    delete stats;
}

size_t kw_stats_count(const kw_stats_t *stats) {
    return stats ? stats->samples.size() : 0;
}

}  // extern "C"

namespace {

// Sample i's table row, or null past the end.
const keywatch::StatInfo *stat_row(const kw_stats_t *stats, size_t i) {
    if (!stats || i >= stats->samples.size()) return nullptr;
    return &keywatch::stat_info(stats->samples[i].id);
}

}  // namespace

extern "C" {

const char *kw_stats_name(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    return row ? row->name : "";
}

kw_stat_type kw_stats_type(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    if (!row) return KW_STAT_COUNTER;
    switch (row->type) {
        case keywatch::StatType::COUNTER:
            return KW_STAT_COUNTER;
        case keywatch::StatType::GAUGE:
            return KW_STAT_GAUGE;
        case keywatch::StatType::HISTOGRAM:
            return KW_STAT_HISTOGRAM;
    }
    return KW_STAT_COUNTER;
}

const char *kw_stats_unit(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    return row ? row->unit : "";
}

const char *kw_stats_help(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    return row ? row->help : "";
}

const char *kw_stats_label_name(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    return row ? row->label : "";
}

const char *kw_stats_label_value(const kw_stats_t *stats, size_t i) {
    return stat_row(stats, i) ? stats->samples[i].label.c_str() : "";
}

int64_t kw_stats_value(const kw_stats_t *stats, size_t i) {
    return stat_row(stats, i) ? stats->samples[i].value : 0;
}

double kw_stats_sum(const kw_stats_t *stats, size_t i) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    if (!row) return 0;
    if (row->type == keywatch::StatType::HISTOGRAM) return stats->samples[i].histogram.sum;
    return static_cast<double>(stats->samples[i].value);
}

size_t kw_stats_buckets(const kw_stats_t *stats, size_t i, const double **upper_bounds,
                        const uint64_t **counts) {
    const keywatch::StatInfo *row = stat_row(stats, i);
    const bool histogram = row && row->type == keywatch::StatType::HISTOGRAM;
    if (upper_bounds) *upper_bounds = histogram ? stats->bounds.data() : nullptr;
    if (counts) *counts = histogram ? stats->cumulative[i].data() : nullptr;
    return histogram ? keywatch::kHistogramBuckets : 0;
}

/* ---- client ---- */

}  // extern "C"

namespace {

std::string bytes(const void *p, size_t n) {
    return p ? std::string(static_cast<const char *>(p), n) : std::string();
}

// The same bytes, not copied (valid while the caller's buffer is).
std::string_view view(const void *p, size_t n) {
    return p ? std::string_view(static_cast<const char *>(p), n) : std::string_view();
}

// Hands text to the caller (released with kw_free).
int dup_out(kw_client_t *c, const std::string &s, char **out) {
    *out = keywatch::malloc_copy(s);
    if (!*out) {
        c->error = "out of memory";
        return KW_ERR_NOMEM;
    }
    return KW_OK;
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
    char thrown[256] = "";  // filled only when f throws
    int rc = guarded([&] { return f(c->client); }, thrown, sizeof thrown);
    if (thrown[0]) c->error = std::string(what) + ": " + thrown;
    return rc;
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

int kw_client_track(kw_client_t *client, const void *key, size_t key_len, const void *value,
                    size_t value_len, int64_t ttl_ms, int flags, int64_t *deadline_ms) {
    return client_call(client, key && (value || value_len == 0), "kw_client_track", [&](auto &c) {
        if (int rc = check_flags(client, "kw_client_track", flags, kTrackFlags, kTrackFlagNames))
            return rc;
        return c.track(view(key, key_len), view(value, value_len), ttl_ms, flags, deadline_ms);
    });
}

int kw_client_untrack(kw_client_t *client, const void *key, size_t key_len, int delete_key) {
    return client_call(client, key != nullptr, "kw_client_untrack",
                       [&](auto &c) { return c.untrack(bytes(key, key_len), delete_key != 0); });
}

int kw_client_adopt(kw_client_t *client, const void *key, size_t key_len, int flags,
                    int64_t *deadline_ms) {
    return client_call(client, key != nullptr, "kw_client_adopt", [&](auto &c) {
        if (int rc = check_flags(client, "kw_client_adopt", flags, KW_TRACK_SNAPSHOT,
                                 "KW_TRACK_SNAPSHOT"))
            return rc;
        return c.adopt(bytes(key, key_len), flags, deadline_ms);
    });
}

int kw_client_schedule(kw_client_t *client, const char *queue, const void *id, size_t id_len,
                       const void *payload, size_t payload_len, int64_t at_ms, int64_t delay_ms,
                       int flags, int64_t *at_out) {
    return client_call(client, queue && id && (payload || payload_len == 0), "kw_client_schedule",
                       [&](auto &c) {
                           if (int rc = check_flags(client, "kw_client_schedule", flags,
                                                    KW_SCHEDULE_NX, "KW_SCHEDULE_NX"))
                               return rc;
                           return c.schedule(queue, bytes(id, id_len), bytes(payload, payload_len),
                                             at_ms, delay_ms, flags, at_out);
                       });
}

int kw_client_cancel(kw_client_t *client, const char *queue, const void *id, size_t id_len) {
    return client_call(client, queue && id, "kw_client_cancel",
                       [&](auto &c) { return c.cancel(queue, bytes(id, id_len)); });
}

int kw_client_reschedule(kw_client_t *client, const char *queue, const void *id, size_t id_len,
                         int64_t at_ms, int64_t delay_ms, int64_t *at_out) {
    return client_call(client, queue && id, "kw_client_reschedule", [&](auto &c) {
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
        client->pipeline_errors.clear();
        int rc = c.pipeline_end(&all, &client->pipeline_errors);
        for (size_t i = 0; statuses && i < all.size() && i < cap; i++) statuses[i] = all[i];
        if (count) *count = all.size();
        return rc;
    });
}

const char *kw_client_pipeline_error(kw_client_t *client, size_t index) {
    if (!client || index >= client->pipeline_errors.size()) return "";
    return client->pipeline_errors[index].c_str();
}

int kw_client_inspect_json(kw_client_t *client, char **out) {
    if (out) *out = nullptr;
    return client_call(client, out != nullptr, "kw_client_inspect_json", [&](auto &c) {
        keywatch::Inspection in;
        if (int rc = c.inspect(&in); rc != KW_OK) return rc;
        return dup_out(client, keywatch::inspection_json(in), out);
    });
}

int kw_client_dead_list_json(kw_client_t *client, const char *queue, size_t limit, char **out) {
    if (out) *out = nullptr;
    return client_call(client, queue && out, "kw_client_dead_list_json", [&](auto &c) {
        std::vector<keywatch::DeadLetter> letters;
        if (int rc = c.dead_list(queue, limit, &letters); rc != KW_OK) return rc;
        return dup_out(client, keywatch::dead_letters_json(letters), out);
    });
}

int kw_client_dead_page_json(kw_client_t *client, const char *queue, const char *after,
                             size_t limit, char **out) {
    if (out) *out = nullptr;
    return client_call(client, queue && out, "kw_client_dead_page_json", [&](auto &c) {
        std::vector<keywatch::DeadLetter> letters;
        if (int rc = c.dead_list(queue, limit, &letters, after ? after : ""); rc != KW_OK)
            return rc;
        return dup_out(client, keywatch::dead_letters_json(letters), out);
    });
}

int kw_client_dead_replay(kw_client_t *client, const char *queue, const char *entry_id,
                          size_t limit, int64_t *count) {
    return client_call(client, queue != nullptr, "kw_client_dead_replay", [&](auto &c) {
        return c.dead_replay(queue, entry_id ? entry_id : "", limit, count);
    });
}

int kw_client_dead_purge(kw_client_t *client, const char *queue, const char *entry_id,
                         int64_t *count) {
    return client_call(client, queue != nullptr, "kw_client_dead_purge", [&](auto &c) {
        return c.dead_purge(queue, entry_id ? entry_id : "", count);
    });
}

void kw_free(void *ptr) {
    free(ptr);
}

}  // extern "C"
