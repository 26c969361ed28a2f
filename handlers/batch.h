/*
 * batch.h - what the built-in plugins that batch (stream, session_index) share: one
 * internal batch function per plugin, called by handle_batch with the host's batch and by
 * handle with n = 1, so there is one code path. A reason goes to host->event_set_error in
 * a batch and to handle()'s err for one event (an older host has no event_set_error and
 * calls only handle). Header-only: each built-in is its own shared object and links nothing
 * of keywatch.
 * Thread-safety: a sink belongs to one handle or handle_batch call.
 */
#ifndef KW_HANDLERS_BATCH_H
#define KW_HANDLERS_BATCH_H

#include <stdarg.h>
#include <stdio.h>

#include "keywatch_plugin.h"

/* Where the reasons of one call go. */
typedef struct kw_sink {
    const kw_plugin_host_t *host;
    const kw_plugin_event_t *const *events;
    char *err; /* handle(): the one event's reason; handle_batch(): unused */
    size_t err_size;
    int batch; /* reasons through host->event_set_error */
} kw_sink_t;

/* The reason for events[i]'s RETRY or REJECT. */
static inline void kw_sink_reason(const kw_sink_t *k, size_t i, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    if (k->batch) {
        vsnprintf(buf, sizeof buf, fmt, ap);
        k->host->event_set_error(k->events[i], buf);
    } else {
        vsnprintf(k->err, k->err_size, fmt, ap);
    }
    va_end(ap);
}

/* A plugin's batch function: writes results[0..n-1] (pre-filled with KW_PLUGIN_NO_RESULT)
 * and returns KW_OK, or a kw_status with err filled when the rest of the batch failed as
 * a whole (the events still without a result are retried with err). */
typedef int (*kw_batch_fn)(void *state, const kw_plugin_event_t *const *events, size_t n,
                           int *results, const kw_sink_t *sink, char *err, size_t err_size);

/* handle(): the batch function for one event. */
static inline int kw_handle_one(kw_batch_fn fn, void *state, const kw_plugin_host_t *host,
                                const kw_plugin_event_t *ev, char *err, size_t err_size) {
    const kw_plugin_event_t *events[1];
    int result = KW_PLUGIN_NO_RESULT;
    kw_sink_t sink;
    events[0] = ev;
    sink.host = host, sink.events = events, sink.err = err, sink.err_size = err_size;
    sink.batch = 0;
    if (fn(state, events, 1, &result, &sink, err, err_size) != KW_OK) return KW_RESULT_RETRY;
    return result == KW_PLUGIN_NO_RESULT ? KW_RESULT_RETRY : result;
}

/* handle_batch(): the batch function with reasons through host->event_set_error. */
static inline int kw_handle_many(kw_batch_fn fn, void *state, const kw_plugin_host_t *host,
                                 const kw_plugin_event_t *const *events, size_t n, int *results,
                                 char *err, size_t err_size) {
    kw_sink_t sink;
    sink.host = host, sink.events = events, sink.err = NULL, sink.err_size = 0;
    sink.batch = 1;
    return fn(state, events, n, results, &sink, err, err_size);
}

/* The descriptor's handle and handle_batch of a plugin whose batch function is fn and whose
 * state (a state_type) keeps the host table in its member `host`. */
#define KW_BATCH_ENTRY_POINTS(fn, state_type)                                                \
    static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {           \
        return kw_handle_one(fn, p, ((const state_type *)p)->host, ev, err, n);              \
    }                                                                                        \
    static int handle_batch(void *p, const kw_plugin_event_t *const *events, size_t n,       \
                            int *results, char *err, size_t err_size) {                      \
        return kw_handle_many(fn, p, ((const state_type *)p)->host, events, n, results, err, \
                              err_size);                                                     \
    }

/* Whether this host calls handle_batch (and has redis_pipeline and event_set_error). On an
 * older host the plugin works per event, and says so once, at init. */
static inline int kw_host_batches(const kw_plugin_host_t *host) {
    char msg[256];
    if (KW_PLUGIN_HAS(host->size, kw_plugin_host_t, redis_pipeline) && host->redis_pipeline &&
        host->event_set_error)
        return 1;
    snprintf(msg, sizeof msg,
             "this keywatch (%s) delivers one event per call; batching needs keywatch 0.3.0 "
             "or later",
             host->keywatch_version ? host->keywatch_version : "unknown");
    host->log(host, KW_LOG_INFO, msg);
    return 0;
}

#endif
