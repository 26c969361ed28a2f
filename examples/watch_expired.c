/*
 * watch_expired.c - the keywatch C quick start: print every key under "session:" that
 * expires in Redis, until Ctrl-C (or for SECONDS seconds).
 *
 *   cc -std=c99 watch_expired.c $(pkg-config --cflags --libs keywatch) -o watch_expired
 *   ./watch_expired redis://127.0.0.1:6379 [SECONDS]
 */
#define _POSIX_C_SOURCE 200809L
#include <keywatch.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* Runs on a worker thread, once per matching event. The event is valid only during the
 * call: copy what you need, or hold it (kw_event_hold) and complete it later from any
 * thread (kw_event_complete). Keys are bytes (they may hold NUL): use the length. */
static int on_expired(kw_event_t *ev, void *opaque) {
    size_t len = 0;
    const char *key = kw_event_key(ev, &len);
    (void)opaque;
    printf("%s db=%d key=%.*s\n", kw_event_name(ev), kw_event_db(ev), (int)len, key);
    fflush(stdout);
    return KW_RESULT_ACK;
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    int seconds = argc > 2 ? atoi(argv[2]) : -1;
    char err[512];
    kw_conf_t *conf = kw_conf_new();
    kw_filter_t *filter = kw_filter_new();
    kw_engine_t *engine = NULL;
    int rc = 1;

    /* Configuration and filters are name/value strings; errors come back in err. */
    if (kw_conf_set(conf, "redis.url", url, err, sizeof err) != KW_OK ||
        kw_conf_set(conf, "notify.enable", "true", err, sizeof err) != KW_OK ||
        kw_filter_set(filter, "events", "expired", err, sizeof err) != KW_OK ||
        kw_filter_set(filter, "prefix", "session:", err, sizeof err) != KW_OK ||
        kw_engine_new(conf, &engine, err, sizeof err) != KW_OK) {
        fprintf(stderr, "watch_expired: %s\n", err);
        goto done;
    }
    if (kw_engine_add_handler(engine, filter, on_expired, NULL, NULL) != KW_OK ||
        kw_engine_start(engine) != KW_OK) {
        fprintf(stderr, "watch_expired: %s\n", kw_engine_last_error(engine));
        goto done;
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    fprintf(stderr, "watching expired session:* keys on %s (Ctrl-C to stop)\n", url);
    while (!stop_requested && seconds != 0) {
        struct timespec tick = {1, 0};
        nanosleep(&tick, NULL);
        if (seconds > 0) seconds--;
    }
    kw_engine_stop(engine, -1); /* lets running handlers finish */
    rc = 0;

done:
    kw_engine_free(engine);
    kw_filter_free(filter);
    kw_conf_free(conf);
    return rc;
}
