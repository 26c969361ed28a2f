/*
 * print - a built-in handler plugin: writes each event to stdout as the JSON line
 * `keywatch watch` prints (the host's event_json), so `keywatch run --embedded` shows the
 * daemon at work with nothing configured. Each line is written whole under a lock and
 * flushed; a tracked key or task is acked only once its line was written, and handed back
 * for a retry when it could not be (stdout closed or failing). What `watch` promises holds
 * here too: a pipe cannot say what its reader consumed, so stdout is for people and
 * scripts that read every line; reliable hand-off goes through exec, stream or webhook.
 * A batch of events (handle_batch) is written under one lock with one flush; when the flush
 * fails, every event of the batch counts as not written.
 *
 * Options: none.
 * Counters: printed, failed (lines that could not be written).
 * Thread-safety: handle and handle_batch run concurrently; writes are serialised by a
 * mutex.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "keywatch_plugin.h"

typedef struct state {
    const kw_plugin_host_t *host;
    pthread_mutex_t mu;
    int failing; /* the last write failed (logged once per outage); under mu */
} state_t;

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    (void)config;
    if (!KW_PLUGIN_HAS(host->size, kw_plugin_host_t, event_json) || !host->event_json) {
        snprintf(err, n,
                 "this keywatch host has no event_json (it is older than the print plugin): "
                 "use the print plugin that ships with your keywatch");
        return KW_ERR_INVALID_ARG;
    }
    state_t *s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    pthread_mutex_init(&s->mu, NULL);
    kw_host_batches(host);
    *state = s;
    return KW_OK;
}

/* The outage log: its first failed write, and the first success after it. Under mu. */
static void note_outcome(state_t *s, int ok, int saved) {
    char msg[256];
    if (ok != s->failing) return;
    if (ok)
        snprintf(msg, sizeof msg, "writing events to stdout again");
    else
        snprintf(msg, sizeof msg,
                 "cannot write events to stdout: %s; tracked keys and tasks are handed "
                 "back for a retry, live events are lost",
                 strerror(saved));
    s->host->log(s->host, ok ? KW_LOG_INFO : KW_LOG_WARN, msg);
    s->failing = !ok;
}

/* Whole lines, one flush: results[i] is ACK for each event whose line was written, and
 * stays KW_PLUGIN_NO_RESULT otherwise. The errno of the failure, or 0. */
static int write_lines(state_t *s, const kw_plugin_event_t *const *events, size_t n, int *results) {
    size_t i, len;
    int ok = 1, tried = 0, saved = 0;
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < n; i++) {
        const char *line = s->host->event_json(events[i], &len);
        if (!line) continue;
        tried = 1;
        errno = 0;
        if (fwrite(line, 1, len, stdout) == len && fputc('\n', stdout) != EOF)
            results[i] = KW_RESULT_ACK;
        else if (ok)
            ok = 0, saved = errno ? errno : EIO;
    }
    errno = 0;
    if (tried && fflush(stdout) != 0) {
        if (ok) ok = 0, saved = errno ? errno : EIO;
        for (i = 0; i < n; i++) results[i] = KW_PLUGIN_NO_RESULT;
    }
    if (!ok) clearerr(stdout);
    if (tried) note_outcome(s, ok, saved);
    pthread_mutex_unlock(&s->mu);
    return saved;
}

/* The events whose line was not written: live events are acked (nothing to hand back),
 * tracked keys and tasks retried. */
static int print_batch(void *p, const kw_plugin_event_t *const *events, size_t n, int *results,
                       const kw_sink_t *sink, char *err, size_t err_size) {
    state_t *s = (state_t *)p;
    int64_t printed = 0, failed = 0;
    size_t i, len;
    int saved = write_lines(s, events, n, results);
    (void)err, (void)err_size;
    for (i = 0; i < n; i++) {
        const char *queue;
        if (results[i] == KW_RESULT_ACK) {
            printed++;
            continue;
        }
        failed++;
        queue = s->host->event_queue(events[i]);
        results[i] = queue && *queue ? KW_RESULT_RETRY : KW_RESULT_ACK;
        if (results[i] == KW_RESULT_RETRY)
            kw_sink_reason(sink, i, "cannot write the event to stdout: %s",
                           s->host->event_json(events[i], &len) ? strerror(saved)
                                                                : "no JSON line for the event");
    }
    if (printed) s->host->counter_add(s->host, "printed", printed);
    if (failed) s->host->counter_add(s->host, "failed", failed);
    return KW_OK;
}

KW_BATCH_ENTRY_POINTS(print_batch, state_t)

static void close_state(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "print",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  close_state,
                                                  handle_batch};

KW_HANDLER_DEFINE(descriptor)
