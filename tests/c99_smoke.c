/*
 * A C99 program that uses keywatch through keywatch.h alone (built with -std=c99
 * -pedantic -Werror). Usage: kw_c99_smoke REDIS_URL KEY
 *
 * It watches `expired` events for KEY, prints "ready" once subscribed, then waits (up to
 * 20 s) for the key to expire -- c99_smoke_test.cpp writes it -- and prints
 * "expired <key> db=<n>". Exit 0 on success, 1 on any failure (with a message on stderr).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keywatch.h"

struct seen {
    char key[256];
    size_t key_len;
    int db;
    int count;
};

static int on_expired(kw_event_t *ev, void *opaque) {
    struct seen *s = (struct seen *)opaque;
    size_t len = 0;
    const void *key = kw_event_key(ev, &len);
    if (s->count == 0 && len < sizeof s->key) {
        memcpy(s->key, key, len);
        s->key[len] = '\0';
        s->key_len = len;
        s->db = kw_event_db(ev);
    }
    s->count++;
    return KW_RESULT_ACK;
}

static int fail(const char *what, int rc, const char *detail);

/* kw_conf_dump's callback: counts the options and checks the one it is told about. */
struct dump_check {
    int options;
    int workers_seen;
};

static void on_option(const char *name, const char *value, const char *default_value,
                      void *opaque) {
    struct dump_check *d = (struct dump_check *)opaque;
    d->options++;
    if (strcmp(name, "workers") == 0 && strcmp(value, "2") == 0 && default_value[0] != '\0')
        d->workers_seen = 1;
}

/* The snapshot holds handler 0's call count and duration histogram, both moved. */
static int check_snapshot(kw_engine_t *engine) {
    kw_stats_t *stats = NULL;
    size_t i, n;
    int calls = 0, histogram = 0, rc;
    if ((rc = kw_engine_stats(engine, &stats)) != KW_OK) return fail("kw_engine_stats", rc, NULL);
    n = kw_stats_count(stats);
    for (i = 0; i < n; i++) {
        const char *name = kw_stats_name(stats, i);
        if (strcmp(kw_stats_label_value(stats, i), "0") != 0) continue;
        if (strcmp(name, "handler.calls.<handler>") == 0 && kw_stats_value(stats, i) >= 1 &&
            kw_stats_type(stats, i) == KW_STAT_COUNTER &&
            strcmp(kw_stats_label_name(stats, i), "handler") == 0)
            calls = 1;
        if (strcmp(name, "handler.duration.<handler>") == 0 &&
            kw_stats_type(stats, i) == KW_STAT_HISTOGRAM) {
            const double *bounds = NULL;
            const uint64_t *counts = NULL;
            size_t b = kw_stats_buckets(stats, i, &bounds, &counts);
            /* Cumulative: the last (+Inf) bucket holds every observation. */
            histogram = b > 1 && counts[b - 1] == (uint64_t)kw_stats_value(stats, i) &&
                        counts[b - 1] >= 1 && bounds[0] > 0 && kw_stats_sum(stats, i) >= 0;
        }
    }
    kw_stats_free(stats);
    if (!calls || !histogram)
        return fail("kw_engine_stats: handler 0's figures missing", KW_ERR_INTERNAL, NULL);
    return 0;
}

static int fail(const char *what, int rc, const char *detail) {
    fprintf(stderr, "c99_smoke: %s: %s (%s): %s\n", what, kw_err_name(rc), kw_strerror(rc),
            detail ? detail : "");
    return 1;
}

/* Structured log lines (name, value, ..., NULL) to stderr. */
static void on_log(kw_log_level level, const char *message, const char *const *fields,
                   void *opaque) {
    size_t i;
    (void)opaque;
    fprintf(stderr, "log %d: %s", (int)level, message);
    for (i = 0; fields[i]; i += 2) fprintf(stderr, " %s=%s", fields[i], fields[i + 1]);
    fputc('\n', stderr);
}

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    char err[512];
    kw_conf_t *conf;
    kw_filter_t *filter;
    kw_engine_t *engine = NULL;
    struct seen seen;
    int64_t delivered = 0;
    int rc, waited;

    if (argc != 3) {
        fprintf(stderr, "usage: %s REDIS_URL KEY\n", argv[0]);
        return 1;
    }
    /* The ABI rule while the major version is 0: the same major.minor. */
    if ((kw_version() >> 8) != (KW_VERSION >> 8)) {
        fprintf(stderr, "c99_smoke: built for %s, loaded %s\n", KW_VERSION_STRING,
                kw_version_string());
        return 1;
    }
    memset(&seen, 0, sizeof seen);

    conf = kw_conf_new();
    if (!conf) return fail("kw_conf_new", KW_ERR_NOMEM, NULL);
    /* An unknown name must be refused with a message naming it. */
    rc = kw_conf_set(conf, "no.such.option", "1", err, sizeof err);
    if (rc != KW_ERR_UNKNOWN_CONF || !strstr(err, "no.such.option"))
        return fail("unknown option was not refused", rc, err);
    if ((rc = kw_conf_set(conf, "redis.url", argv[1], err, sizeof err)) != KW_OK)
        return fail("redis.url", rc, err);
    if ((rc = kw_conf_set(conf, "workers", "2", err, sizeof err)) != KW_OK)
        return fail("workers", rc, err);
    {
        struct dump_check d = {0, 0};
        if ((rc = kw_conf_dump(conf, on_option, &d)) != KW_OK)
            return fail("kw_conf_dump", rc, NULL);
        if (d.options < 20 || !d.workers_seen)
            return fail("kw_conf_dump did not list workers=2", KW_ERR_INTERNAL, NULL);
    }

    filter = kw_filter_new();
    if (!filter) return fail("kw_filter_new", KW_ERR_NOMEM, NULL);
    if ((rc = kw_filter_set(filter, "events", "expired", err, sizeof err)) != KW_OK)
        return fail("filter events", rc, err);
    if ((rc = kw_filter_set_bytes(filter, "prefix", argv[2], strlen(argv[2]), err, sizeof err)) !=
        KW_OK)
        return fail("filter prefix", rc, err);

    if ((rc = kw_engine_new(conf, &engine, err, sizeof err)) != KW_OK)
        return fail("kw_engine_new", rc, err);
    kw_conf_free(conf);
    if ((rc = kw_engine_add_handler(engine, filter, on_expired, &seen, NULL)) != KW_OK) {
        rc = fail("kw_engine_add_handler", rc, kw_engine_last_error(engine));
        kw_filter_free(filter);
        kw_engine_free(engine);
        return rc;
    }
    kw_filter_free(filter);
    if ((rc = kw_engine_set_log_fields_cb(engine, on_log, NULL)) != KW_OK) {
        rc = fail("kw_engine_set_log_fields_cb", rc, kw_engine_last_error(engine));
        kw_engine_free(engine);
        return rc;
    }
    if ((rc = kw_engine_start(engine)) != KW_OK) {
        /* The engine is freed on this path too (LeakSanitizer checks the program). */
        rc = fail("kw_engine_start", rc, kw_engine_last_error(engine));
        kw_engine_free(engine);
        return rc;
    }

    printf("ready\n");
    fflush(stdout);

    /* The handler runs on a worker thread; events.delivered counts returned handler calls,
     * so once it is 1 the handler has filled `seen`. */
    for (waited = 0; waited < 20000 && delivered < 1; waited += 20) {
        sleep_ms(20);
        rc = kw_engine_stat(engine, "events.delivered", &delivered); /* direct stat read: a wait */
        if (rc != KW_OK) return fail("kw_engine_stat", rc, NULL);
    }
    if ((rc = kw_engine_stop(engine, 5000)) != KW_OK)
        return fail("kw_engine_stop", rc, kw_engine_last_error(engine));
    if (delivered < 1) {
        fprintf(stderr, "c99_smoke: no expired event within 20 s\n");
        kw_engine_free(engine);
        return 1;
    }
    {
        char *stats = NULL;
        if ((rc = kw_engine_stats_json(engine, &stats)) != KW_OK)
            return fail("kw_engine_stats_json", rc, NULL);
        if (!stats || stats[0] != '{') return fail("kw_engine_stats_json", KW_ERR_INTERNAL, stats);
        kw_free(stats);
    }
    if (check_snapshot(engine) != 0) {
        kw_engine_free(engine);
        return 1;
    }
    kw_engine_free(engine);
    if (seen.key_len != strlen(argv[2]) || memcmp(seen.key, argv[2], seen.key_len) != 0) {
        fprintf(stderr, "c99_smoke: expected key %s, got %s\n", argv[2], seen.key);
        return 1;
    }
    printf("expired %s db=%d\n", seen.key, seen.db);
    return 0;
}
