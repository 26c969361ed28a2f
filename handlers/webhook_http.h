/*
 * webhook_http - the webhook plugin's HTTP thread: POSTs the requests handed to it, all at
 * once, on one libcurl multi handle (keep-alive connections kept and reused, a timeout per
 * request), with the headers of the moment it sends (X-Keywatch-Timestamp, the signature),
 * and reports each outcome exactly once through a callback on that thread.
 * Thread-safety: wh_http_post from any thread, concurrently; wh_http_start and
 * wh_http_stop from the owner's thread (the plugin's init and close). The callback runs on
 * the HTTP thread only.
 */
#ifndef KW_WEBHOOK_HTTP_H
#define KW_WEBHOOK_HTTP_H

#include <stddef.h>

typedef struct wh_http wh_http_t;

typedef struct wh_http_conf {
    const char *url;         /* http[s]://host[:port]/path[?query] */
    const char *secret;      /* the HMAC key; NULL: no signature */
    const char *headers;     /* extra "Name: value" lines separated by newlines; NULL: none */
    long timeout_ms;         /* per request, connecting included */
    long max_connections;    /* connections kept open to the receiver */
    const char *ca_file;     /* https: CA certificates (PEM); NULL: the system's store */
    const char *client_cert; /* https: a client certificate (PEM); NULL: none */
    const char *client_key;  /* its key; NULL: in client_cert */
} wh_http_conf_t;

/* One request's outcome; valid during the callback only. */
typedef struct wh_http_result {
    long status;             /* the HTTP status; 0: no response */
    const char *body;        /* the start of the response body (at most 200 bytes) */
    const char *retry_after; /* the Retry-After header; NULL: none */
    const char *error;       /* status 0: what failed, in libcurl's words */
} wh_http_result_t;

/* Called once per request posted, on the HTTP thread; tag is wh_http_post's. */
typedef void (*wh_http_done_fn)(void *owner, void *tag, const wh_http_result_t *result);

/* Starts the thread (the configuration is copied). Returns 0, or -1 with err filled. */
int wh_http_start(const wh_http_conf_t *conf, wh_http_done_fn done, void *owner, wh_http_t **out,
                  char *err, size_t err_size);

/* Hands over one request: body (malloc'd, len bytes) and event_id (malloc'd, the
 * X-Keywatch-Event-Id header) are taken over and freed by the HTTP thread; done(tag)
 * follows. Returns 0; -1 when stopping (done does not follow, nothing is taken over). */
int wh_http_post(wh_http_t *h, void *tag, char *body, size_t len, char *event_id);

/* Stops the thread: every request not answered yet is reported with status 0 and the
 * error "not answered before the plugin closed"; joins and frees h. */
void wh_http_stop(wh_http_t *h);

#endif /* KW_WEBHOOK_HTTP_H */
