/*
 * batcher - a test plugin for handle_batch (tests/plugin_batch_test.cpp). Each event's result
 * depends on the key's start:
 *   ack...     ACK
 *   retry...   RETRY, reason "retry <key>" through host->event_set_error
 *   reject...  REJECT, reason "reject <key>:<attempt>" through host->event_set_error
 *   hold...    host->hold, completed with ACK at once through host->complete; PENDING
 *   none...    left at KW_PLUGIN_NO_RESULT
 *   bad...     42 (not a kw_result)
 *   fail...    left at KW_PLUGIN_NO_RESULT, and the whole call returns KW_ERR_CONNECT with
 *              err "batch failed on purpose"
 * handle (one event, from a host without handle_batch) does the same for its one event;
 * there, minus... returns -1 (a kw_status passed on, which is not a kw_result).
 * Options: record (a list: RPUSH "<key>:<attempt>" per event, all of a call's through one
 * host->redis_pipeline), sleep_ms (sleep in every call), max_in_flight
 * (host->set_max_in_flight).
 * Counters: batches (handle_batch calls), events (events in them), multi (calls with more
 * than one event), single (handle calls), over_limit (events in calls at once went past
 * max_in_flight: must stay 0), overlap (a call began while another ran: with
 * KW_TEST_SERIAL, the descriptor sets KW_PLUGIN_SERIAL and this must stay 0).
 * Thread-safety: the calls run concurrently (unless KW_TEST_SERIAL); the running count is
 * under a mutex.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keywatch_plugin.h"

typedef struct state {
    const kw_plugin_host_t *host;
    char record[256];
    long sleep_ms;
    pthread_mutex_t mu;
    int running;
    size_t in_flight, max_in_flight; /* events in the calls running; the limit (0: none) */
} state_t;

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **out,
                char *err, size_t n) {
    const char *record = host->config_get(config, "record");
    const char *sleep_ms = host->config_get(config, "sleep_ms");
    const char *max_in_flight = host->config_get(config, "max_in_flight");
    state_t *s;
    s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    if (record) snprintf(s->record, sizeof s->record, "%s", record);
    s->sleep_ms = sleep_ms ? strtol(sleep_ms, NULL, 10) : 0;
    s->max_in_flight = max_in_flight ? strtoul(max_in_flight, NULL, 10) : 0;
    if (s->max_in_flight > 0 &&
        (!KW_PLUGIN_HAS(host->size, kw_plugin_host_t, set_max_in_flight) ||
         host->set_max_in_flight(host, (uint32_t)s->max_in_flight) != KW_OK)) {
        snprintf(err, n, "set_max_in_flight refused");
        free(s);
        return KW_ERR_INVALID_ARG;
    }
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return KW_OK;
}

static int starts(const char *key, size_t klen, const char *prefix) {
    size_t p = strlen(prefix);
    return klen >= p && memcmp(key, prefix, p) == 0;
}

static void enter(state_t *s, size_t n) {
    const kw_plugin_host_t *h = s->host;
    pthread_mutex_lock(&s->mu);
    if (s->running++ > 0) h->counter_add(h, "overlap", 1);
    s->in_flight += n;
    if (s->max_in_flight > 0 && s->in_flight > s->max_in_flight) h->counter_add(h, "over_limit", 1);
    pthread_mutex_unlock(&s->mu);
    h->counter_add(h, "entered", 1); /* a call began (before its sleep) */
    if (s->sleep_ms > 0) {
        struct timespec ts;
        ts.tv_sec = s->sleep_ms / 1000;
        ts.tv_nsec = (s->sleep_ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
}

static void leave(state_t *s, size_t n) {
    pthread_mutex_lock(&s->mu);
    s->running--;
    s->in_flight -= n;
    pthread_mutex_unlock(&s->mu);
}

/* RPUSH record "<key>:<attempt>" for every event, in one pipeline. */
static int record_all(state_t *s, const kw_plugin_event_t *const *events, size_t n, char *err,
                      size_t en) {
    const kw_plugin_host_t *h = s->host;
    kw_redis_command_t *cmds = (kw_redis_command_t *)calloc(n, sizeof *cmds);
    const char **argv = (const char **)calloc(3 * n, sizeof *argv);
    char *item = (char *)calloc(n, 300);
    kw_reply_t **replies = (kw_reply_t **)calloc(n, sizeof *replies);
    int *statuses = (int *)calloc(n, sizeof *statuses);
    size_t i;
    int rc = KW_ERR_NOMEM;
    if (cmds && argv && item && replies && statuses) {
        for (i = 0; i < n; i++) {
            size_t klen;
            const char *key = (const char *)h->event_key(events[i], &klen);
            snprintf(item + 300 * i, 300, "%.*s:%d", (int)klen, key, h->event_attempt(events[i]));
            argv[3 * i] = "RPUSH";
            argv[3 * i + 1] = s->record;
            argv[3 * i + 2] = item + 300 * i;
            cmds[i].argc = 3;
            cmds[i].argv = argv + 3 * i;
            cmds[i].argvlen = NULL;
        }
        rc = h->redis_pipeline(h, n, cmds, replies, statuses, err, en);
        for (i = 0; i < n; i++) h->reply_free(replies[i]);
    }
    free(cmds);
    free(argv);
    free(item);
    free(replies);
    free(statuses);
    return rc;
}

/* The event's own reason: through event_set_error, or (an older host) err. */
static void say(state_t *s, const kw_plugin_event_t *ev, const char *reason, char *err, size_t n) {
    const kw_plugin_host_t *h = s->host;
    if (KW_PLUGIN_HAS(h->size, kw_plugin_host_t, event_set_error) && h->event_set_error)
        h->event_set_error(ev, reason);
    else
        snprintf(err, n, "%s", reason);
}

/* The result for one event (KW_PLUGIN_NO_RESULT for none... and fail...). */
static int result_for(state_t *s, const kw_plugin_event_t *ev, char *err, size_t n) {
    const kw_plugin_host_t *h = s->host;
    size_t klen;
    const char *key = (const char *)h->event_key(ev, &klen);
    char reason[320];
    if (starts(key, klen, "ack")) return KW_RESULT_ACK;
    if (starts(key, klen, "retry")) {
        snprintf(reason, sizeof reason, "retry %.*s", (int)klen, key);
        say(s, ev, reason, err, n);
        return KW_RESULT_RETRY;
    }
    if (starts(key, klen, "reject")) {
        snprintf(reason, sizeof reason, "reject %.*s:%d", (int)klen, key, h->event_attempt(ev));
        say(s, ev, reason, err, n);
        return KW_RESULT_REJECT;
    }
    if (starts(key, klen, "hold")) {
        kw_plugin_hold_t *held = h->hold(ev);
        if (!held) return KW_RESULT_RETRY;
        h->counter_add(h, "held", 1);
        return h->complete(held, KW_RESULT_ACK, NULL, -1) == KW_OK ? KW_RESULT_PENDING
                                                                   : KW_RESULT_RETRY;
    }
    if (starts(key, klen, "bad")) return 42;
    return KW_PLUGIN_NO_RESULT; /* none..., fail... */
}

static int handle_batch(void *p, const kw_plugin_event_t *const *events, size_t n, int *results,
                        char *err, size_t en) {
    state_t *s = (state_t *)p;
    const kw_plugin_host_t *h = s->host;
    int failed = 0;
    size_t i;
    enter(s, n);
    h->counter_add(h, "batches", 1);
    h->counter_add(h, "events", (int64_t)n);
    if (n > 1) h->counter_add(h, "multi", 1);
    if (s->record[0] && record_all(s, events, n, err, en) != KW_OK) {
        leave(s, n);
        return KW_ERR_REDIS; /* every event retried with err */
    }
    for (i = 0; i < n; i++) {
        size_t klen;
        const char *key = (const char *)h->event_key(events[i], &klen);
        if (starts(key, klen, "fail")) failed = 1;
        results[i] = result_for(s, events[i], err, en);
    }
    leave(s, n);
    if (failed) {
        snprintf(err, en, "batch failed on purpose");
        return KW_ERR_CONNECT;
    }
    return KW_OK;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    state_t *s = (state_t *)p;
    const kw_plugin_host_t *h = s->host;
    int rc;
    enter(s, 1);
    h->counter_add(h, "single", 1);
    if (s->record[0]) { /* an older host has no redis_pipeline */
        char item[300];
        const char *argv[3];
        kw_reply_t *r = NULL;
        size_t klen;
        const char *key = (const char *)h->event_key(ev, &klen);
        snprintf(item, sizeof item, "%.*s:%d", (int)klen, key, h->event_attempt(ev));
        argv[0] = "RPUSH", argv[1] = s->record, argv[2] = item;
        if (h->redis(h, 3, argv, NULL, &r, err, n) != KW_OK) {
            leave(s, 1);
            return KW_RESULT_RETRY;
        }
        h->reply_free(r);
    }
    {
        size_t klen;
        const char *key = (const char *)h->event_key(ev, &klen);
        if (starts(key, klen, "minus")) {
            leave(s, 1);
            return -1;
        }
    }
    rc = result_for(s, ev, err, n);
    leave(s, 1);
    if (rc == KW_PLUGIN_NO_RESULT) {
        snprintf(err, n, "no result for one event");
        return KW_RESULT_RETRY;
    }
    return rc;
}

static void release(void *p) {
    state_t *s = (state_t *)p;
    pthread_mutex_destroy(&s->mu);
    free(s);
}

#ifdef KW_TEST_SERIAL
#define FLAGS KW_PLUGIN_SERIAL
#else
#define FLAGS 0
#endif

/* Designated initializers: members appended later stay NULL without a warning. */
static const kw_plugin_descriptor_t descriptor = {.abi_version = KW_PLUGIN_ABI_VERSION,
                                                  .size = sizeof(kw_plugin_descriptor_t),
                                                  .name = "batcher",
                                                  .version = "0.0.1",
                                                  .flags = FLAGS,
                                                  .init = init,
                                                  .handle = handle,
                                                  .close = release,
                                                  .handle_batch = handle_batch};

KW_HANDLER_DEFINE(descriptor)
