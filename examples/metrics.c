/*
 * metrics.c - the statistics snapshot (kw_engine_stats) written in the Prometheus text
 * format, without parsing any JSON: what an exporter such as a /metrics endpoint does.
 * It tracks one key with a 100 ms TTL through the blocking client, lets an engine handle
 * its expiry, then prints every sample.
 * Usage: metrics [REDIS_URL]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "keywatch.h"

static int on_expired(kw_event_t *ev, void *opaque) {
    (void)ev;
    (void)opaque;
    return KW_RESULT_ACK;
}

/* "expiry.lateness.<queue>" -> "keywatch_expiry_lateness" (the label goes in braces). */
static void metric_name(const char *row, char *out, size_t size) {
    size_t n = 0;
    const char *p;
    n += (size_t)snprintf(out, size, "keywatch_");
    for (p = row; *p && *p != '<' && n + 1 < size; p++) out[n++] = *p == '.' ? '_' : *p;
    while (n > 0 && out[n - 1] == '_') n--; /* the '.' before "<label>" */
    out[n] = '\0';
}

static void print_sample(const kw_stats_t *s, size_t i) {
    static const char *types[] = {"counter", "gauge", "histogram"};
    char name[128], labels[256] = "";
    const char *label = kw_stats_label_name(s, i);
    metric_name(kw_stats_name(s, i), name, sizeof name);
    /* A family's samples are adjacent: HELP and TYPE once, before the first. */
    if (i == 0 || strcmp(kw_stats_name(s, i - 1), kw_stats_name(s, i)) != 0)
        printf("# HELP %s %s (%s)\n# TYPE %s %s\n", name, kw_stats_help(s, i), kw_stats_unit(s, i),
               name, types[kw_stats_type(s, i)]);
    if (label[0]) snprintf(labels, sizeof labels, "%s=\"%s\"", label, kw_stats_label_value(s, i));
    if (kw_stats_type(s, i) != KW_STAT_HISTOGRAM) {
        printf("%s%s%s%s %lld\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
               (long long)kw_stats_value(s, i));
        return;
    }
    {
        const double *le = NULL;
        const uint64_t *counts = NULL;
        size_t b, n = kw_stats_buckets(s, i, &le, &counts);
        for (b = 0; b < n; b++) {
            char bound[32];
            if (b + 1 == n)
                snprintf(bound, sizeof bound, "+Inf");
            else
                snprintf(bound, sizeof bound, "%g", le[b]);
            printf("%s_bucket{%s%sle=\"%s\"} %llu\n", name, labels, labels[0] ? "," : "", bound,
                   (unsigned long long)counts[b]);
        }
        printf("%s_sum{%s} %g\n", name, labels, kw_stats_sum(s, i));
        printf("%s_count{%s} %lld\n", name, labels, (long long)kw_stats_value(s, i));
    }
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    char err[256];
    kw_conf_t *conf = kw_conf_new();
    kw_engine_t *engine = NULL;
    kw_client_t *client = NULL;
    kw_stats_t *stats = NULL;
    size_t i;
    int waited, rc = 1;

    if (kw_conf_set(conf, "redis.url", url, err, sizeof err) != KW_OK ||
        kw_conf_set(conf, "notify.enable", "true", err, sizeof err) != KW_OK ||
        kw_engine_new(conf, &engine, err, sizeof err) != KW_OK ||
        kw_client_new(conf, &client, err, sizeof err) != KW_OK) {
        fprintf(stderr, "metrics: %s\n", err);
        goto out;
    }
    if (kw_engine_add_handler(engine, NULL, on_expired, NULL, NULL) != KW_OK ||
        kw_engine_start(engine) != KW_OK) {
        fprintf(stderr, "metrics: %s\n", kw_engine_last_error(engine));
        goto out;
    }
    if (kw_client_track(client, "order:1", 7, "v", 1, 100, 0, NULL) != KW_OK) {
        fprintf(stderr, "metrics: %s\n", kw_client_last_error(client));
        goto out;
    }
    /* Until Redis confirmed the ack (at most 5 s). */
    for (waited = 0; waited < 250; waited++) {
        struct timespec ts = {0, 20000000L};
        int64_t acked = 0;
        kw_engine_stat(engine, "items.acked", &acked);
        if (acked > 0) break;
        nanosleep(&ts, NULL);
    }
    kw_engine_stop(engine, -1);
    rc = 0;
out:
    if (rc == 0 && kw_engine_stats(engine, &stats) == KW_OK) {
        for (i = 0; i < kw_stats_count(stats); i++) print_sample(stats, i);
        kw_stats_free(stats);
    }
    kw_client_free(client);
    kw_engine_free(engine);
    kw_conf_free(conf);
    return rc;
}
