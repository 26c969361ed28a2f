/*
 * print - a built-in handler plugin: writes each event to stdout as the JSON line
 * `keywatch watch` prints (the host's event_json), so `keywatch run --embedded` shows the
 * daemon at work with nothing configured. Each line is written whole under a lock and
 * flushed; a tracked key or task is acked only once its line was written, and handed back
 * for a retry when it could not be (stdout closed or failing). What `watch` promises holds
 * here too: a pipe cannot say what its reader consumed, so stdout is for people and
 * scripts that read every line; reliable hand-off goes through exec, stream or webhook.
 *
 * Options: none.
 * Counters: printed, failed (lines that could not be written).
 * Thread-safety: handle runs concurrently; writes are serialised by a mutex.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    *state = s;
    return KW_OK;
}

/* One whole line, flushed. 0 with errno set when it could not be written. The first
 * failure of an outage is logged (through the host: with the event's id), and so is the
 * first success after it. */
static int write_line(state_t *s, const char *line, size_t len) {
    pthread_mutex_lock(&s->mu);
    errno = 0;
    int ok =
        fwrite(line, 1, len, stdout) == len && fputc('\n', stdout) != EOF && fflush(stdout) == 0;
    int saved = errno ? errno : EIO;
    if (!ok) clearerr(stdout);
    if (ok == s->failing) {
        char msg[256];
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
    pthread_mutex_unlock(&s->mu);
    errno = saved;
    return ok;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    state_t *s = (state_t *)p;
    size_t len = 0;
    const char *line = s->host->event_json(ev, &len);
    if (line && write_line(s, line, len)) {
        s->host->counter_add(s->host, "printed", 1);
        return KW_RESULT_ACK;
    }
    s->host->counter_add(s->host, "failed", 1);
    const char *queue = s->host->event_queue(ev);
    if (!queue || !*queue) return KW_RESULT_ACK; /* a live event: nothing to hand back */
    snprintf(err, n, "cannot write the event to stdout: %s",
             line ? strerror(errno) : "no JSON line for the event");
    return KW_RESULT_RETRY;
}

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
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
