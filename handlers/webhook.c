/*
 * webhook - a built-in handler plugin: HTTP POST of each event, as the JSON line `keywatch
 * watch` prints, to a configured URL, with libevent's HTTP client (one private event base
 * per call, so calls run concurrently on the workers).
 * Status: 2xx ack; 5xx, 408, 429, a timeout or a connection error retry; any other status
 * rejects (dead letter with the status and the start of the body). A 429 or 503 with
 * Retry-After (seconds, or an HTTP date) retries after that delay (at most
 * retry_after_max_ms): the event is held (host->hold) and completed at once with
 * host->complete(RETRY, reason, delay), the ABI's way to retry after a given delay.
 * Headers: Content-Type: application/json, X-Keywatch-Event-Id, X-Keywatch-Timestamp (unix
 * seconds) and, with a secret, X-Keywatch-Signature: sha256=<hex HMAC-SHA256 of
 * "<timestamp>.<body>">, so the receiver can verify the sender and refuse replays.
 *
 * Options (docs/plugins.md):
 *   url         required: http://host[:port]/path (https is not supported yet)
 *   secret      the HMAC key (default: no signature)
 *   headers     extra headers, "Name: value" lines separated by newlines
 *   timeout_ms  per request (default 10000)
 *   retry_after_max_ms  the longest Retry-After delay honoured (default 3600000)
 * Counters: delivered, retried, rejected, retry_after (retries delayed by Retry-After).
 * Thread-safety: the state is read-only after init; handle runs concurrently.
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keywatch_plugin.h"

typedef struct state {
    const kw_plugin_host_t *host;
    char *host_name, *path, *secret, *headers;
    int port;
    struct timeval timeout;
    int64_t retry_after_max_ms;
} state_t;

typedef struct response {
    int status; /* 0: no response (timeout, connection error) */
    char body[201];
    int64_t retry_after_ms; /* the Retry-After header as a delay; -1: none or unreadable */
} response_t;

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void release(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    free(s->host_name);
    free(s->path);
    free(s->secret);
    free(s->headers);
    free(s);
}

static int parse_url(state_t *s, const char *url, char *err, size_t n) {
    struct evhttp_uri *u = url ? evhttp_uri_parse(url) : NULL;
    const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    const char *query = u ? evhttp_uri_get_query(u) : NULL;
    int ok = scheme && !strcmp(scheme, "http") && host && *host;
    if (ok) {
        size_t plen = (path && *path ? strlen(path) : 1) + (query ? strlen(query) + 1 : 0) + 1;
        s->host_name = dup_str(host);
        s->port = evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : 80;
        s->path = (char *)malloc(plen);
        if (s->path)
            snprintf(s->path, plen, "%s%s%s", path && *path ? path : "/", query ? "?" : "",
                     query ? query : "");
    } else {
        snprintf(err, n, "option \"url\"%s%s%s: use http://host[:port]/path%s", url ? " = \"" : "",
                 url ? url : " is required", url ? "\"" : "",
                 scheme && !strcmp(scheme, "https") ? " (https is not supported yet)" : "");
    }
    if (u) evhttp_uri_free(u);
    return ok ? KW_OK : KW_ERR_BAD_VALUE;
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s = (state_t *)calloc(1, sizeof *s);
    const char *secret = host->config_get(config, "secret");
    const char *headers = host->config_get(config, "headers");
    const char *timeout = host->config_get(config, "timeout_ms");
    const char *ra_max = host->config_get(config, "retry_after_max_ms");
    long ms = timeout ? strtol(timeout, NULL, 10) : 10000;
    int rc;
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    rc = parse_url(s, host->config_get(config, "url"), err, n);
    if (rc == KW_OK && ms <= 0) {
        snprintf(err, n, "option \"timeout_ms\" = \"%s\": use a number of milliseconds > 0",
                 timeout);
        rc = KW_ERR_BAD_VALUE;
    }
    s->retry_after_max_ms = ra_max ? strtoll(ra_max, NULL, 10) : 3600000;
    if (rc == KW_OK && s->retry_after_max_ms < 0) {
        snprintf(err, n,
                 "option \"retry_after_max_ms\" = \"%s\": use a number of milliseconds >= 0",
                 ra_max);
        rc = KW_ERR_BAD_VALUE;
    }
    if (rc != KW_OK) {
        release(s);
        return rc;
    }
    s->timeout.tv_sec = ms / 1000;
    s->timeout.tv_usec = (ms % 1000) * 1000;
    if (secret) s->secret = dup_str(secret);
    if (headers) s->headers = dup_str(headers);
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
        int64_t when = http_date(v), now = (int64_t)time(NULL);
        if (when < 0) return -1;
        return when > now ? (when - now) * 1000 : 0;
    }
}

static void on_response(struct evhttp_request *req, void *arg) {
    response_t *r = (response_t *)arg;
    int got;
    r->status = req ? evhttp_request_get_response_code(req) : 0;
    if (!req) return;
    r->retry_after_ms =
        retry_after_ms(evhttp_find_header(evhttp_request_get_input_headers(req), "Retry-After"));
    got = evbuffer_remove(evhttp_request_get_input_buffer(req), r->body, sizeof r->body - 1);
    r->body[got > 0 ? got : 0] = '\0';
}

/* Adds "Name: value" lines of s->headers to out. */
static void add_headers(const state_t *s, struct evkeyvalq *out) {
    const char *line = s->headers;
    char buf[1024];
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *colon;
        if (len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            colon = strchr(buf, ':');
            if (colon) {
                *colon = '\0';
                for (colon++; *colon == ' '; colon++) {
                }
                evhttp_add_header(out, buf, colon);
            }
        }
        line = end ? end + 1 : NULL;
    }
}

static void sign(const state_t *s, const char *stamp, const char *body, size_t len,
                 struct evkeyvalq *out) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned mac_len = 0, i;
    char hex[8 + 2 * EVP_MAX_MD_SIZE + 1] = "sha256=";
    size_t slen = strlen(stamp);
    char *msg = (char *)malloc(slen + 1 + len);
    if (!msg) return;
    memcpy(msg, stamp, slen);
    msg[slen] = '.';
    memcpy(msg + slen + 1, body, len);
    HMAC(EVP_sha256(), s->secret, (int)strlen(s->secret), (const unsigned char *)msg,
         slen + 1 + len, mac, &mac_len);
    free(msg);
    for (i = 0; i < mac_len; i++) sprintf(hex + 7 + 2 * i, "%02x", mac[i]);
    evhttp_add_header(out, "X-Keywatch-Signature", hex);
}

/* POSTs the event; the response's status (0: none) and body start in *r. */
static void post(const state_t *s, const kw_plugin_event_t *ev, response_t *r) {
    const kw_plugin_host_t *h = s->host;
    size_t len = 0;
    const char *body = h->event_json(ev, &len);
    char stamp[24];
    struct event_base *base = event_base_new();
    struct evhttp_connection *conn =
        base ? evhttp_connection_base_new(base, NULL, s->host_name, (unsigned short)s->port) : NULL;
    struct evhttp_request *req = conn ? evhttp_request_new(on_response, r) : NULL;
    r->status = 0;
    r->body[0] = '\0';
    r->retry_after_ms = -1;
    if (req && body) {
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);
        snprintf(stamp, sizeof stamp, "%lld", (long long)time(NULL));
        evhttp_connection_set_timeout_tv(conn, &s->timeout);
        evhttp_connection_set_retries(conn, 0);
        evhttp_add_header(out, "Host", s->host_name);
        evhttp_add_header(out, "Content-Type", "application/json");
        evhttp_add_header(out, "X-Keywatch-Event-Id", h->event_id(ev));
        evhttp_add_header(out, "X-Keywatch-Timestamp", stamp);
        if (s->secret) sign(s, stamp, body, len, out);
        add_headers(s, out);
        evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
        if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, s->path) == 0)
            event_base_dispatch(base);
    } else if (req) {
        evhttp_request_free(req);
    }
    if (conn) evhttp_connection_free(conn);
    if (base) event_base_free(base);
}

/* A retry due after r->retry_after_ms (capped): hold the event and complete it at once
 * with that delay. KW_RESULT_PENDING when done so, else KW_RESULT_RETRY (the engine's
 * backoff): no Retry-After, not a 429/503, or a host that cannot hold. */
static int retry_later(const state_t *s, const kw_plugin_event_t *ev, const response_t *r,
                       const char *reason) {
    const kw_plugin_host_t *h = s->host;
    kw_plugin_hold_t *hold;
    int64_t delay = r->retry_after_ms;
    if ((r->status != 429 && r->status != 503) || delay < 0) return KW_RESULT_RETRY;
    if (!KW_PLUGIN_HAS(h->size, kw_plugin_host_t, complete) || !h->hold || !h->complete)
        return KW_RESULT_RETRY;
    if (delay > s->retry_after_max_ms) delay = s->retry_after_max_ms;
    hold = h->hold(ev);
    if (!hold || h->complete(hold, KW_RESULT_RETRY, reason, delay) != KW_OK)
        return KW_RESULT_RETRY; /* the host frees the hold either way */
    h->counter_add(h, "retry_after", 1);
    return KW_RESULT_PENDING;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    response_t r;
    post(s, ev, &r);
    if (r.status >= 200 && r.status < 300) {
        h->counter_add(h, "delivered", 1);
        return KW_RESULT_ACK;
    }
    if (r.status == 0 || r.status >= 500 || r.status == 408 || r.status == 429) {
        if (r.status)
            snprintf(err, n, "POST %s:%d%s: HTTP %d", s->host_name, s->port, s->path, r.status);
        else
            snprintf(err, n, "POST %s:%d%s: no response (timeout or connection error)",
                     s->host_name, s->port, s->path);
        if (r.status && r.retry_after_ms >= 0) {
            size_t used = strlen(err);
            snprintf(err + used, n - used, " (Retry-After: %lld ms)", (long long)r.retry_after_ms);
        }
        h->counter_add(h, "retried", 1);
        return retry_later(s, ev, &r, err);
    }
    snprintf(err, n, "POST %s:%d%s: HTTP %d: %s", s->host_name, s->port, s->path, r.status, r.body);
    h->counter_add(h, "rejected", 1);
    return KW_RESULT_REJECT;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "webhook",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
