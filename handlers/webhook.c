/*
 * webhook - a built-in handler plugin: HTTP POST of each event, as the JSON line `keywatch
 * watch` prints, to a configured URL. handle() never waits for the receiver: it holds the
 * event (host->hold), hands the request to the instance's HTTP thread (webhook_http.h:
 * libcurl's multi interface, keep-alive connections) and returns KW_RESULT_PENDING; the
 * thread completes the hold with the outcome (host->complete). At most max_in_flight
 * requests are open at once: the host holds the instance's next events back meanwhile
 * (host->set_max_in_flight), so a slow receiver pins no worker.
 * Status: 2xx ack; 5xx, 408, 429, a timeout or a connection error retry; any other status
 * rejects (dead letter with the status and the start of the body). A 429 or 503 with
 * Retry-After (seconds, or an HTTP date) retries after that delay (at most
 * retry_after_max_ms) through host->complete's retry delay.
 * Headers: Content-Type: application/json, X-Keywatch-Event-Id, X-Keywatch-Timestamp (unix
 * seconds at the time of the request) and, with a secret, X-Keywatch-Signature:
 * sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">, so the receiver can verify the sender
 * and refuse replays.
 *
 * Options (docs/plugins.md):
 *   url            required: http[s]://host[:port]/path[?query]
 *   secret         the HMAC key (default: no signature)
 *   headers        extra headers, "Name: value" lines separated by newlines
 *   timeout_ms     per request (default 10000)
 *   retry_after_max_ms  the longest Retry-After delay honoured (default 3600000)
 *   max_in_flight  requests open at once (default 16)
 *   ca_file        https: the CA certificates (PEM) that verify the receiver (default: the
 *                  system's store); the receiver is always verified (certificate and name)
 *   client_cert, client_key  https: a client certificate (PEM) and its key (default: the
 *                  key in client_cert)
 * Counters: delivered, retried, rejected, retry_after (retries delayed by Retry-After).
 * Thread-safety: the state is read-only after init; handle runs concurrently on the
 * workers, the outcomes are completed on the HTTP thread; close stops and joins it.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "holding.h"
#include "keywatch_plugin.h"
#include "webhook_http.h"

typedef struct state {
    const kw_plugin_host_t *host;
    char *host_name, *path; /* for the reasons: "POST <host>:<port><path>" */
    int port;
    int64_t retry_after_max_ms;
    wh_http_t *http;
    int curl_ready; /* curl_global_init succeeded: cleaned up in release */
} state_t;

/* Stops the HTTP thread (its open requests are completed with RETRY) and frees s. */
static void release(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    wh_http_stop(s->http);
    free(s->host_name);
    free(s->path);
    if (s->curl_ready) curl_global_cleanup();
    free(s);
}

/* The URL's parts for the reasons; KW_ERR_BAD_VALUE with err filled when it is not
 * http[s]://host[:port]/path[?query]. */
static int parse_url(state_t *s, const char *url, char *err, size_t n) {
    CURLU *u = url ? curl_url() : NULL;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL;
    int ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
             (!strcmp(scheme, "http") || !strcmp(scheme, "https")) && *host;
    char *user = NULL;
    if (ok && curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        curl_free(user);
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_free(path);
        curl_url_cleanup(u);
        snprintf(err, n,
                 "option \"url\": a user or password in the URL is not sent; remove it "
                 "(requests are signed with \"secret\")");
        return KW_ERR_BAD_VALUE;
    }
    if (ok) {
        size_t plen;
        if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_OK) query = NULL;
        plen = strlen(path) + (query ? strlen(query) + 1 : 0) + 1;
        s->host_name = strdup(host);
        s->port = atoi(port);
        s->path = (char *)malloc(plen);
        if (s->path) snprintf(s->path, plen, "%s%s%s", path, query ? "?" : "", query ? query : "");
    } else {
        snprintf(err, n, "option \"url\"%s%s%s: use http://host[:port]/path or https://...",
                 url ? " = \"" : "", url ? url : " is required", url ? "\"" : "");
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    if (u) curl_url_cleanup(u);
    if (ok && (!s->host_name || !s->path)) {
        snprintf(err, n, "out of memory");
        return KW_ERR_NOMEM;
    }
    return ok ? KW_OK : KW_ERR_BAD_VALUE;
}

/* A whole number in [min, max] from option `name` (default when absent); KW_ERR_BAD_VALUE
 * with err saying what to give otherwise. */
static int number_option(const kw_plugin_host_t *host, const kw_plugin_config_t *config,
                         const char *name, long long def, long long min, const char *what,
                         long long *out, char *err, size_t n) {
    const char *v = host->config_get(config, name);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : def;
    if (v && (end == v || *end != '\0' || x < min)) {
        snprintf(err, n, "option \"%s\" = \"%s\": use %s %s %lld", name, v, what,
                 min > 0 ? ">" : ">=", min > 0 ? min - 1 : min);
        return KW_ERR_BAD_VALUE;
    }
    *out = x;
    return KW_OK;
}

/* ca_file, client_cert, client_key into conf: each a readable file; client_key only with
 * client_cert. KW_ERR_BAD_VALUE with err naming the option otherwise. */
static int tls_options(const kw_plugin_host_t *host, const kw_plugin_config_t *config,
                       wh_http_conf_t *conf, char *err, size_t n) {
    const char *names[] = {"ca_file", "client_cert", "client_key"};
    const char **values[] = {&conf->ca_file, &conf->client_cert, &conf->client_key};
    size_t i;
    if (host->config_get(config, "client_key") && !host->config_get(config, "client_cert")) {
        snprintf(err, n,
                 "option \"client_key\" needs \"client_cert\" (the certificate it belongs to)");
        return KW_ERR_BAD_VALUE;
    }
    for (i = 0; i < 3; i++) {
        FILE *f;
        *values[i] = host->config_get(config, names[i]);
        if (!*values[i]) continue;
        if (!(f = fopen(*values[i], "r"))) {
            snprintf(err, n, "option \"%s\" = \"%s\": cannot read it: %s", names[i], *values[i],
                     strerror(errno));
            return KW_ERR_BAD_VALUE;
        }
        fclose(f);
    }
    return KW_OK;
}

static void on_outcome(void *owner, void *tag, const wh_http_result_t *r);

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s;
    wh_http_conf_t conf;
    long long timeout_ms = 0, max_in_flight = 0, ra_max = 0;
    int rc = kw_host_holds(host, "webhook", err, n);
    if (rc != KW_OK) return rc;
    if (!(s = (state_t *)calloc(1, sizeof *s))) return KW_ERR_NOMEM;
    s->host = host;
    memset(&conf, 0, sizeof conf);
    conf.url = host->config_get(config, "url");
    conf.secret = host->config_get(config, "secret");
    conf.headers = host->config_get(config, "headers");
    rc = parse_url(s, conf.url, err, n);
    if (rc == KW_OK) rc = tls_options(host, config, &conf, err, n);
    if (rc == KW_OK)
        rc = number_option(host, config, "timeout_ms", 10000, 1, "a number of milliseconds",
                           &timeout_ms, err, n);
    if (rc == KW_OK)
        rc = number_option(host, config, "retry_after_max_ms", 3600000, 0,
                           "a number of milliseconds", &ra_max, err, n);
    if (rc == KW_OK)
        rc = number_option(host, config, "max_in_flight", 16, 1, "a number of requests",
                           &max_in_flight, err, n);
    if (rc == KW_OK && max_in_flight > 100000) {
        snprintf(err, n, "option \"max_in_flight\" = \"%lld\": use at most 100000", max_in_flight);
        rc = KW_ERR_BAD_VALUE;
    }
    if (rc == KW_OK && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, n, "libcurl failed to initialise");
        rc = KW_ERR_INTERNAL;
    }
    s->curl_ready = rc == KW_OK;
    s->retry_after_max_ms = (int64_t)ra_max;
    if (rc == KW_OK) rc = host->set_max_in_flight(host, (uint32_t)max_in_flight);
    conf.timeout_ms = (long)timeout_ms;
    conf.max_connections = (long)max_in_flight;
    if (rc == KW_OK && wh_http_start(&conf, on_outcome, s, &s->http, err, n) != 0)
        rc = KW_ERR_INTERNAL;
    if (rc != KW_OK) {
        release(s);
        return rc;
    }
    *state = s;
    return KW_OK;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") as unix seconds; -1: not one. */
static int64_t http_date(const char *v) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char mon[4] = "", zone[4] = "";
    int d, y, hh, mm, ss, m;
    const char *at;
    if (sscanf(v, "%*3s, %2d %3s %4d %2d:%2d:%2d %3s", &d, mon, &y, &hh, &mm, &ss, zone) != 7 ||
        strcmp(zone, "GMT") != 0 || strlen(mon) != 3 || !(at = strstr(months, mon)) ||
        (at - months) % 3 != 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    m = (int)((at - months) / 3) + 1;
    return days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss;
}

/* Retry-After (RFC 9110 10.2.3: delay-seconds or an HTTP date) as a delay in ms from now;
 * -1 when absent or unreadable. A date in the past means now (0). */
static int64_t retry_after_ms(const char *v) {
    const char *p;
    if (!v) return -1;
    while (*v == ' ') v++;
    for (p = v; *p >= '0' && *p <= '9'; p++) {
    }
    if (p != v && (*p == '\0' || *p == ' ')) {
        long long secs = strtoll(v, NULL, 10);
        return secs > 100000000LL ? 100000000LL * 1000 : (int64_t)secs * 1000;
    } else {
        /* In milliseconds of the precise clock: time() reads a coarse clock that can lag
         * the receiver's by a few ms, and whole seconds on both sides made the delay up to a
         * second longer than the receiver asked. */
        struct timespec ts;
        int64_t when = http_date(v), now_ms;
        if (when < 0) return -1;
        clock_gettime(CLOCK_REALTIME, &ts);
        now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        return when * 1000 > now_ms ? when * 1000 - now_ms : 0;
    }
}

/* The outcome of one request, on the HTTP thread: counted, and its hold completed. */
static void on_outcome(void *owner, void *tag, const wh_http_result_t *r) {
    const state_t *s = (const state_t *)owner;
    const kw_plugin_host_t *h = s->host;
    char reason[1024];
    int result = KW_RESULT_REJECT;
    int64_t delay = -1;
    int delayed = 0;
    if (r->status >= 200 && r->status < 300) {
        h->counter_add(h, "delivered", 1);
        h->complete((kw_plugin_hold_t *)tag, KW_RESULT_ACK, NULL, -1);
        return;
    }
    if (r->status == 0 || r->status >= 500 || r->status == 408 || r->status == 429) {
        int64_t ra = r->status ? retry_after_ms(r->retry_after) : -1;
        if (r->status)
            snprintf(reason, sizeof reason, "POST %s:%d%s: HTTP %ld", s->host_name, s->port,
                     s->path, r->status);
        else
            snprintf(reason, sizeof reason, "POST %s:%d%s: no response: %s", s->host_name, s->port,
                     s->path, r->error);
        if (ra >= 0) {
            size_t used = strlen(reason);
            snprintf(reason + used, sizeof reason - used, " (Retry-After: %lld ms)", (long long)ra);
        }
        h->counter_add(h, "retried", 1);
        if ((r->status == 429 || r->status == 503) && ra >= 0) {
            delay = ra > s->retry_after_max_ms ? s->retry_after_max_ms : ra;
            delayed = 1;
        }
        result = KW_RESULT_RETRY;
    } else {
        snprintf(reason, sizeof reason, "POST %s:%d%s: HTTP %ld: %s", s->host_name, s->port,
                 s->path, r->status, r->body);
        h->counter_add(h, "rejected", 1);
    }
    /* After the engine stopped the host refuses and frees the hold: the item was given
     * back by stop already. */
    if (h->complete((kw_plugin_hold_t *)tag, result, reason, delay) == KW_OK && delayed)
        h->counter_add(h, "retry_after", 1);
}

/* Hands the event to the HTTP thread: copies what the request needs, holds the event and
 * returns KW_RESULT_PENDING (the HTTP thread completes it). */
static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t len = 0;
    const char *json = h->event_json(ev, &len);
    char *body = json ? (char *)malloc(len + 1) : NULL, *id = strdup(h->event_id(ev));
    kw_plugin_hold_t *hold = NULL;
    if (body && id) {
        memcpy(body, json, len);
        body[len] = '\0';
        hold = h->hold(ev);
    }
    if (!hold) {
        snprintf(err, n, "%s", body && id ? "the engine is stopping" : "out of memory");
        free(body);
        free(id);
        return KW_RESULT_RETRY;
    }
    if (wh_http_post(s->http, hold, body, len, id) != 0) {
        free(body);
        free(id);
        h->complete(hold, KW_RESULT_RETRY, "out of memory (or the plugin is closing)", -1);
    }
    return KW_RESULT_PENDING;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "webhook",
                                                  "2.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
