/*
 * holder - a test plugin for deferred completion (tests/plugin_test.cpp): handle() takes
 * each event over with host->hold, returns KW_RESULT_PENDING, and a thread of the plugin's
 * own completes it later through host->complete. What it does depends on the key's start:
 *   ack...     ack
 *   retry...   retry after retry_delay_ms (option, default 60000) with "retry later on purpose"
 *   reject...  reject with "rejected on purpose by holder"
 *   long...    ack after hold_ms (option, default 3000)
 * Options: retry_delay_ms, hold_ms, record (a list: RPUSH "<key>:<attempt>" per call),
 * until_file (long... completes once this file exists, instead of after hold_ms),
 * max_in_flight (host->set_max_in_flight; init refuses a host without it).
 * Counters: held, completed (host->complete returned KW_OK), complete_failed.
 * Thread-safety: handle runs concurrently; the queue is under a mutex; close joins the
 * thread and completes what is still held (the host refuses those: the engine stopped).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keywatch_plugin.h"

typedef struct job {
    kw_plugin_hold_t *hold;
    int result;
    const char *reason;
    int64_t delay_ms;
    int64_t due_ms; /* when to complete (CLOCK_MONOTONIC) */
    int until_file; /* and not before the until_file exists */
    struct job *next;
} job_t;

typedef struct state {
    const kw_plugin_host_t *host;
    char record[256];
    char until_file[256];
    int64_t retry_delay_ms, hold_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *jobs;
    int stop;
    pthread_t thread;
} state_t;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void finish(state_t *s, job_t *j) {
    const kw_plugin_host_t *h = s->host;
    int rc = h->complete(j->hold, j->result, j->reason, j->delay_ms);
    char line[96];
    if (rc == KW_OK) {
        h->counter_add(h, "completed", 1);
    } else {
        h->counter_add(h, "complete_failed", 1);
        snprintf(line, sizeof line, "complete returned %d", rc);
        h->log(h, KW_LOG_WARN, line);
    }
    free(j);
}

/* Takes the first job that is due, or waits (at most 20ms) for one. NULL: none yet. */
static job_t *take_due(state_t *s) {
    job_t **p;
    int64_t now = now_ms();
    for (p = &s->jobs; *p; p = &(*p)->next) {
        if ((*p)->until_file && access(s->until_file, F_OK) != 0) continue;
        if ((*p)->due_ms <= now) {
            job_t *j = *p;
            *p = j->next;
            return j;
        }
    }
    {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 20 * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
    }
    return NULL;
}

static void *completer(void *p) {
    state_t *s = (state_t *)p;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        job_t *j = take_due(s);
        if (!j) continue;
        pthread_mutex_unlock(&s->mu);
        finish(s, j); /* from this thread, not the worker's */
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int64_t option_ms(const kw_plugin_host_t *host, const kw_plugin_config_t *config,
                         const char *name, int64_t dflt) {
    const char *v = host->config_get(config, name);
    return v ? (int64_t)strtoll(v, NULL, 10) : dflt;
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **out,
                char *err, size_t n) {
    const char *record = host->config_get(config, "record");
    const char *until = host->config_get(config, "until_file");
    const char *max_in_flight = host->config_get(config, "max_in_flight");
    state_t *s;
    if (!KW_PLUGIN_HAS(host->size, kw_plugin_host_t, complete) || !host->hold) {
        snprintf(err, n, "this host cannot hold events");
        return KW_ERR_STATE;
    }
    if (max_in_flight) {
        if (!KW_PLUGIN_HAS(host->size, kw_plugin_host_t, set_max_in_flight) ||
            !host->set_max_in_flight) {
            snprintf(err, n, "this keywatch host (%s) has no set_max_in_flight",
                     host->keywatch_version);
            return KW_ERR_STATE;
        }
        if (host->set_max_in_flight(host, (uint32_t)strtoul(max_in_flight, NULL, 10)) != KW_OK) {
            snprintf(err, n, "set_max_in_flight refused");
            return KW_ERR_STATE;
        }
    }
    s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    if (record) snprintf(s->record, sizeof s->record, "%s", record);
    if (until) snprintf(s->until_file, sizeof s->until_file, "%s", until);
    s->retry_delay_ms = option_ms(host, config, "retry_delay_ms", 60000);
    s->hold_ms = option_ms(host, config, "hold_ms", 3000);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, completer, s) != 0) {
        free(s);
        snprintf(err, n, "pthread_create failed");
        return KW_ERR_INTERNAL;
    }
    *out = s;
    return KW_OK;
}

static int record_call(const state_t *s, const kw_plugin_event_t *ev, const char *key, size_t klen,
                       char *err, size_t n) {
    const kw_plugin_host_t *h = s->host;
    char item[300];
    const char *argv[3];
    size_t lens[3];
    kw_reply_t *r = NULL;
    snprintf(item, sizeof item, "%.*s:%d", (int)klen, key, h->event_attempt(ev));
    argv[0] = "RPUSH", lens[0] = 5;
    argv[1] = s->record, lens[1] = strlen(s->record);
    argv[2] = item, lens[2] = strlen(item);
    if (h->redis(h, 3, argv, lens, &r, err, n) != KW_OK) return 0;
    h->reply_free(r);
    return 1;
}

static int starts(const char *key, size_t klen, const char *prefix) {
    size_t p = strlen(prefix);
    return klen >= p && memcmp(key, prefix, p) == 0;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    state_t *s = (state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t klen;
    const char *key = (const char *)h->event_key(ev, &klen);
    job_t *j;
    if (s->record[0] && !record_call(s, ev, key, klen, err, n)) return KW_RESULT_RETRY;
    j = (job_t *)calloc(1, sizeof *j);
    if (!j) return KW_RESULT_RETRY;
    j->result = KW_RESULT_ACK;
    j->delay_ms = -1;
    j->due_ms = now_ms();
    if (starts(key, klen, "retry")) {
        j->result = KW_RESULT_RETRY;
        j->reason = "retry later on purpose";
        j->delay_ms = s->retry_delay_ms;
    } else if (starts(key, klen, "reject")) {
        j->result = KW_RESULT_REJECT;
        j->reason = "rejected on purpose by holder";
    } else if (starts(key, klen, "long")) {
        if (s->until_file[0])
            j->until_file = 1;
        else
            j->due_ms += s->hold_ms;
    }
    j->hold = h->hold(ev);
    if (!j->hold) {
        free(j);
        snprintf(err, n, "host->hold returned NULL");
        return KW_RESULT_RETRY;
    }
    h->counter_add(h, "held", 1);
    pthread_mutex_lock(&s->mu);
    j->next = s->jobs;
    s->jobs = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return KW_RESULT_PENDING;
}

static void release(void *p) {
    state_t *s = (state_t *)p;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    while (s->jobs) { /* still held at close: the host refuses, but frees each hold */
        job_t *j = s->jobs;
        s->jobs = j->next;
        finish(s, j);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "holder",
                                                  "0.0.1",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
