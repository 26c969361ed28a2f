// The one place where the Python binding calls the C API (include/keywatch.h). Every C
// function the binding uses is wrapped here once, so a renamed or re-shaped C function is
// a one-line change in this file and nowhere else. The wrappers add nothing but shape:
// JSON getters return a status and hand the text back through a std::string.
// Thread-safety: that of the wrapped C function (stated in keywatch.h).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "keywatch.h"

namespace keywatch::python::capi {

// The event pointer a C handler receives, taken from kw_handler_fn itself: `const
// kw_event_t *` in this release, `kw_event_t *` once kw_event_set_error and holds take a
// non-const event. Everything that passes events around uses this type, so that change
// needs no edit here.
template <typename Fn>
struct HandlerEventArg;
template <typename R, typename E, typename O>
struct HandlerEventArg<R (*)(E, O)> {
    using type = E;
};
using EventPtr = HandlerEventArg<kw_handler_fn>::type;

// ---- library ----
inline const char *version_string() {
    return kw_version_string();
}
inline const char *strerror(int status) {
    return kw_strerror(status);
}
inline const char *err_name(int status) {
    return kw_err_name(status);
}

// ---- configuration and filters ----
inline kw_conf_t *conf_new() {
    return kw_conf_new();
}
inline void conf_free(kw_conf_t *c) {
    kw_conf_free(c);
}
inline int conf_set(kw_conf_t *c, const char *name, const char *value, char *err, size_t n) {
    return kw_conf_set(c, name, value, err, n);
}
inline int conf_get(const kw_conf_t *c, const char *name, char *buf, size_t n) {
    return kw_conf_get(c, name, buf, n);
}
inline int conf_dump(const kw_conf_t *c, kw_conf_dump_fn fn, void *opaque) {
    return kw_conf_dump(c, fn, opaque);
}
inline kw_filter_t *filter_new() {
    return kw_filter_new();
}
inline void filter_free(kw_filter_t *f) {
    kw_filter_free(f);
}
inline int filter_set(kw_filter_t *f, const char *name, const char *value, char *err, size_t n) {
    return kw_filter_set(f, name, value, err, n);
}
inline int filter_set_bytes(kw_filter_t *f, const char *name, const std::string &value, char *err,
                            size_t n) {
    return kw_filter_set_bytes(f, name, value.data(), value.size(), err, n);
}

// ---- events (valid during the handler call only) ----
inline const char *event_name(const kw_event_t *e) {
    return kw_event_name(e);
}
inline const void *event_key(const kw_event_t *e, size_t *len) {
    return kw_event_key(e, len);
}
inline const void *event_value(const kw_event_t *e, size_t *len) {
    return kw_event_value(e, len);
}
inline int event_db(const kw_event_t *e) {
    return kw_event_db(e);
}
inline int64_t event_ts_ms(const kw_event_t *e) {
    return kw_event_ts_ms(e);
}
inline int64_t event_deadline_ms(const kw_event_t *e) {
    return kw_event_deadline_ms(e);
}
inline int event_attempt(const kw_event_t *e) {
    return kw_event_attempt(e);
}
inline kw_source event_source(const kw_event_t *e) {
    return kw_event_source(e);
}
inline int event_max_attempts(const kw_event_t *e) {
    return kw_event_max_attempts(e);
}
inline const char *event_last_error(const kw_event_t *e) {
    return kw_event_last_error(e);
}
inline const char *event_id(const kw_event_t *e) {
    return kw_event_id(e);
}
inline const char *event_node(const kw_event_t *e) {
    return kw_event_node(e);
}
inline const char *event_queue(const kw_event_t *e) {
    return kw_event_queue(e);
}
inline void event_set_error(EventPtr e, const char *reason) {
    kw_event_set_error(e, reason);
}
inline const char *source_name(kw_source s) {
    return kw_source_name(s);
}

// ---- held events (deferred completion) ----
inline kw_hold_t *event_hold(EventPtr e) {
    return kw_event_hold(e);
}
inline const kw_event_t *hold_event(const kw_hold_t *h) {
    return kw_hold_event(h);
}
inline int event_complete(kw_hold_t *h, int result, const char *reason, int64_t delay_ms) {
    return kw_event_complete(h, result, reason, delay_ms);
}
inline void hold_free(kw_hold_t *h) {
    kw_hold_free(h);
}

// ---- engine ----
inline int engine_new(const kw_conf_t *c, kw_engine_t **out, char *err, size_t n) {
    return kw_engine_new(c, out, err, n);
}
inline void engine_free(kw_engine_t *e) {
    kw_engine_free(e);
}
// kw_engine_add_handler gains a `void (*free_opaque)(void *)` argument with deferred
// completion; the binding owns its opaques and passes none. The call is made through a
// pointer of deduced type so that only the form the header declares is compiled.
template <typename AddHandler>
inline int add_handler_call(AddHandler add, kw_engine_t *e, const kw_filter_t *f, kw_handler_fn fn,
                            void *opaque) {
    using FreeOpaque = void (*)(void *);
    if constexpr (std::is_invocable_v<AddHandler, kw_engine_t *, const kw_filter_t *, kw_handler_fn,
                                      void *, FreeOpaque>)
        return add(e, f, fn, opaque, FreeOpaque{nullptr});
    else
        return add(e, f, fn, opaque);
}
inline int engine_add_handler(kw_engine_t *e, const kw_filter_t *f, kw_handler_fn fn,
                              void *opaque) {
    return add_handler_call(&kw_engine_add_handler, e, f, fn, opaque);
}
// options: name, value, ..., NULL (NULL: none).
inline int engine_add_plugin(kw_engine_t *e, const char *plugin, const char *instance,
                             const kw_filter_t *f, const char *const *options, char *err,
                             size_t n) {
    return kw_engine_add_plugin(e, plugin, instance, f, options, err, n);
}
inline int engine_set_log_cb(kw_engine_t *e, kw_log_fn fn, void *opaque) {
    return kw_engine_set_log_cb(e, fn, opaque);
}
inline int engine_start(kw_engine_t *e) {
    return kw_engine_start(e);
}
inline int engine_stop(kw_engine_t *e, int64_t timeout_ms) {
    return kw_engine_stop(e, timeout_ms);
}
inline const char *engine_last_error(kw_engine_t *e) {
    return kw_engine_last_error(e);
}
inline int engine_stat(kw_engine_t *e, const char *name, int64_t *value) {
    return kw_engine_stat(e, name, value);
}

// ---- statistics snapshot (kw_engine_stats) ----
inline int engine_stats(kw_engine_t *e, kw_stats_t **out) {
    return kw_engine_stats(e, out);
}
inline void stats_free(kw_stats_t *s) {
    kw_stats_free(s);
}
inline size_t stats_count(const kw_stats_t *s) {
    return kw_stats_count(s);
}
inline const char *stats_name(const kw_stats_t *s, size_t i) {
    return kw_stats_name(s, i);
}
inline kw_stat_type stats_type(const kw_stats_t *s, size_t i) {
    return kw_stats_type(s, i);
}
inline const char *stats_unit(const kw_stats_t *s, size_t i) {
    return kw_stats_unit(s, i);
}
inline const char *stats_help(const kw_stats_t *s, size_t i) {
    return kw_stats_help(s, i);
}
inline const char *stats_label_name(const kw_stats_t *s, size_t i) {
    return kw_stats_label_name(s, i);
}
inline const char *stats_label_value(const kw_stats_t *s, size_t i) {
    return kw_stats_label_value(s, i);
}
inline int64_t stats_value(const kw_stats_t *s, size_t i) {
    return kw_stats_value(s, i);
}
inline double stats_sum(const kw_stats_t *s, size_t i) {
    return kw_stats_sum(s, i);
}
inline size_t stats_buckets(const kw_stats_t *s, size_t i, const double **upper_bounds,
                            const uint64_t **counts) {
    return kw_stats_buckets(s, i, upper_bounds, counts);
}

// ---- client ----
inline int client_new(const kw_conf_t *c, kw_client_t **out, char *err, size_t n) {
    return kw_client_new(c, out, err, n);
}
inline void client_free(kw_client_t *c) {
    kw_client_free(c);
}
inline const char *client_last_error(kw_client_t *c) {
    return kw_client_last_error(c);
}
inline int client_track(kw_client_t *c, const std::string &key, const std::string &value,
                        int64_t ttl_ms, int flags, int64_t *deadline_ms) {
    return kw_client_track(c, key.data(), key.size(), value.data(), value.size(), ttl_ms, flags,
                           deadline_ms);
}
inline int client_untrack(kw_client_t *c, const std::string &key, bool delete_key) {
    return kw_client_untrack(c, key.data(), key.size(), delete_key ? 1 : 0);
}
inline int client_adopt(kw_client_t *c, const std::string &key, int flags, int64_t *deadline_ms) {
    return kw_client_adopt(c, key.data(), key.size(), flags, deadline_ms);
}
inline int client_schedule(kw_client_t *c, const std::string &queue, const std::string &id,
                           const std::string &payload, int64_t at_ms, int64_t delay_ms, int flags,
                           int64_t *at_out) {
    return kw_client_schedule(c, queue.c_str(), id.data(), id.size(), payload.data(),
                              payload.size(), at_ms, delay_ms, flags, at_out);
}
inline int client_cancel(kw_client_t *c, const std::string &queue, const std::string &id) {
    return kw_client_cancel(c, queue.c_str(), id.data(), id.size());
}
inline int client_reschedule(kw_client_t *c, const std::string &queue, const std::string &id,
                             int64_t at_ms, int64_t delay_ms, int64_t *at_out) {
    return kw_client_reschedule(c, queue.c_str(), id.data(), id.size(), at_ms, delay_ms, at_out);
}
inline int client_pipeline_begin(kw_client_t *c) {
    return kw_client_pipeline_begin(c);
}
inline int client_pipeline_end(kw_client_t *c, int *statuses, size_t cap, size_t *count) {
    return kw_client_pipeline_end(c, statuses, cap, count);
}
inline const char *client_pipeline_error(kw_client_t *c, size_t index) {
    return kw_client_pipeline_error(c, index);
}
// The JSON getters return a status and the text through an out-parameter (kw_free).
// `get` is called first and the text read after it: passing both as arguments of one call
// would leave their order unspecified (GCC reads `text` first, still NULL).
template <typename Get>
inline int take_text(Get get, std::string *out) {
    char *text = nullptr;
    const int rc = get(&text);
    if (rc == KW_OK && text) *out = text;
    kw_free(text);
    return rc;
}
inline int event_json(const kw_event_t *e, std::string *out) {
    return take_text([e](char **text) { return kw_event_json(e, text, nullptr); }, out);
}
inline int client_inspect_json(kw_client_t *c, std::string *out) {
    return take_text([c](char **text) { return kw_client_inspect_json(c, text); }, out);
}
inline int client_dead_list_json(kw_client_t *c, const std::string &queue, size_t limit,
                                 std::string *out) {
    return take_text(
        [&](char **text) { return kw_client_dead_list_json(c, queue.c_str(), limit, text); }, out);
}
inline int client_dead_replay(kw_client_t *c, const std::string &queue, const char *entry,
                              size_t limit, int64_t *count) {
    return kw_client_dead_replay(c, queue.c_str(), entry, limit, count);
}
inline int client_dead_purge(kw_client_t *c, const std::string &queue, const char *entry,
                             int64_t *count) {
    return kw_client_dead_purge(c, queue.c_str(), entry, count);
}

}  // namespace keywatch::python::capi
