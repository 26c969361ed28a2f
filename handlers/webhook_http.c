/*
 * webhook_http - the webhook plugin's HTTP thread on libcurl's multi interface (see
 * webhook_http.h). Requests arrive on a list under a mutex and wake the thread with
 * curl_multi_wakeup; the thread sends each at once (the host's in-flight gate bounds how
 * many are open), waits in curl_multi_poll, and reports each finished transfer.
 * Signals: the thread runs with every signal blocked (no SIGPIPE from a closed socket, no
 * process signal taken by it).
 */
#define _POSIX_C_SOURCE 200809L
#include "webhook_http.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    struct job *next;
    void *tag;
    char *body, *event_id;
    size_t len;
    CURL *easy;
    struct curl_slist *headers;
    char reply[201];
    size_t reply_len;
    char error[CURL_ERROR_SIZE];
} job_t;

struct wh_http {
    char *url, *secret, *headers, *ca_file, *client_cert, *client_key;
    long timeout_ms;
    wh_http_done_fn done;
    void *owner;
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t mu;
    job_t *incoming, **tail; /* under mu: first in, first sent */
    int stopping;            /* under mu */
    job_t *open;             /* the HTTP thread's: requests sent and not finished */
};

static const char kClosing[] = "not answered before the plugin closed";

static char *dup_or_null(const char *s) {
    char *d = s ? (char *)malloc(strlen(s) + 1) : NULL;
    if (d) strcpy(d, s);
    return d;
}

static void job_free(job_t *j) {
    if (j->easy) curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    free(j->body);
    free(j->event_id);
    free(j);
}

/* Reports j (no response: status 0 with error) and frees it. */
static void report(wh_http_t *h, job_t *j, long status, const char *error) {
    wh_http_result_t r;
    struct curl_header *ra = NULL;
    j->reply[j->reply_len] = '\0';
    r.status = status;
    r.body = j->reply;
    r.retry_after = NULL;
    r.error = error;
    if (status && j->easy &&
        curl_easy_header(j->easy, "Retry-After", 0, CURLH_HEADER, -1, &ra) == CURLHE_OK)
        r.retry_after = ra->value;
    h->done(h->owner, j->tag, &r);
    job_free(j);
}

static size_t keep_reply(char *data, size_t size, size_t nmemb, void *arg) {
    job_t *j = (job_t *)arg;
    size_t n = size * nmemb, room = sizeof j->reply - 1 - j->reply_len;
    memcpy(j->reply + j->reply_len, data, n < room ? n : room);
    j->reply_len += n < room ? n : room;
    return n;
}

/* Appends "Name: value" to *list (a value of "" as "Name;", libcurl's empty header). */
static int add_header(struct curl_slist **list, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
    char line[1024];
    struct curl_slist *l;
    if (name_len + value_len + 3 > sizeof line) return 0; /* skipped, as before */
    if (value_len)
        snprintf(line, sizeof line, "%.*s: %.*s", (int)name_len, name, (int)value_len, value);
    else
        snprintf(line, sizeof line, "%.*s;", (int)name_len, name);
    l = curl_slist_append(*list, line);
    if (!l) return -1;
    *list = l;
    return 0;
}

/* The configured "Name: value" lines (spaces after the colon dropped, a CR at the end too;
 * a line without a colon is skipped). */
static int add_configured(const wh_http_t *h, struct curl_slist **list) {
    const char *line = h->headers;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', len), *value;
        if (len && line[len - 1] == '\r') len--;
        if (colon && colon < line + len) {
            for (value = colon + 1; value < line + len && *value == ' '; value++) {
            }
            if (add_header(list, line, (size_t)(colon - line), value,
                           (size_t)(line + len - value)) < 0)
                return -1;
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* X-Keywatch-Signature: sha256=<hex HMAC-SHA256 of "<stamp>.<body>"> */
static int add_signature(const wh_http_t *h, const job_t *j, const char *stamp,
                         struct curl_slist **list) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned mac_len = 0, i;
    char hex[8 + 2 * EVP_MAX_MD_SIZE + 1] = "sha256=";
    size_t slen = strlen(stamp);
    char *msg = (char *)malloc(slen + 1 + j->len);
    if (!msg) return -1;
    memcpy(msg, stamp, slen);
    msg[slen] = '.';
    memcpy(msg + slen + 1, j->body, j->len);
    HMAC(EVP_sha256(), h->secret, (int)strlen(h->secret), (const unsigned char *)msg,
         slen + 1 + j->len, mac, &mac_len);
    free(msg);
    for (i = 0; i < mac_len; i++) sprintf(hex + 7 + 2 * i, "%02x", mac[i]);
    return add_header(list, "X-Keywatch-Signature", 20, hex, strlen(hex));
}

/* The request's headers, as of now. */
static int build_headers(const wh_http_t *h, job_t *j) {
    char stamp[24];
    snprintf(stamp, sizeof stamp, "%lld", (long long)time(NULL));
    if (add_header(&j->headers, "Content-Type", 12, "application/json", 16) < 0 ||
        add_header(&j->headers, "X-Keywatch-Event-Id", 19, j->event_id, strlen(j->event_id)) < 0 ||
        add_header(&j->headers, "X-Keywatch-Timestamp", 20, stamp, strlen(stamp)) < 0 ||
        (h->secret && add_signature(h, j, stamp, &j->headers) < 0) ||
        add_configured(h, &j->headers) < 0)
        return -1;
    /* No "Expect: 100-continue" wait for larger bodies. */
    j->headers = curl_slist_append(j->headers, "Expect:");
    return j->headers ? 0 : -1;
}

/* Sends j: 0, or -1 (j not sent: report it). */
static int send_job(wh_http_t *h, job_t *j) {
    j->easy = curl_easy_init();
    if (!j->easy || build_headers(h, j) < 0) return -1;
    curl_easy_setopt(j->easy, CURLOPT_URL, h->url);
    curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    /* https: the receiver is verified (libcurl's default: peer and host name). */
    if (h->ca_file) curl_easy_setopt(j->easy, CURLOPT_CAINFO, h->ca_file);
    if (h->client_cert) curl_easy_setopt(j->easy, CURLOPT_SSLCERT, h->client_cert);
    if (h->client_key) curl_easy_setopt(j->easy, CURLOPT_SSLKEY, h->client_key);
    curl_easy_setopt(j->easy, CURLOPT_PROXY, ""); /* no proxy from the environment */
    curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
    /* A name lookup that hangs must not hold up this thread when its transfer ends. */
    curl_easy_setopt(j->easy, CURLOPT_QUICK_EXIT, 1L);
    curl_easy_setopt(j->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, h->timeout_ms);
    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
    curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, keep_reply);
    curl_easy_setopt(j->easy, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->error);
    curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
    if (curl_multi_add_handle(h->multi, j->easy) != CURLM_OK) return -1;
    j->next = h->open;
    h->open = j;
    return 0;
}

static void unlink_open(wh_http_t *h, job_t *j) {
    job_t **at = &h->open;
    while (*at && *at != j) at = &(*at)->next;
    if (*at) *at = j->next;
    curl_multi_remove_handle(h->multi, j->easy);
}

/* Reports every finished transfer. */
static void finish_done(wh_http_t *h) {
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(h->multi, &left))) {
        job_t *j = NULL;
        long status = 0;
        if (m->msg != CURLMSG_DONE) continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
        unlink_open(h, j);
        if (m->data.result == CURLE_OK) curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
        report(h, j, status,
               status        ? NULL
               : j->error[0] ? j->error
                             : curl_easy_strerror(m->data.result));
    }
}

/* Takes the incoming list; *stopping set when the owner stops. */
static job_t *take_incoming(wh_http_t *h, int *stopping) {
    job_t *in;
    pthread_mutex_lock(&h->mu);
    in = h->incoming;
    h->incoming = NULL;
    h->tail = &h->incoming;
    *stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    return in;
}

static void *run(void *arg) {
    wh_http_t *h = (wh_http_t *)arg;
    int stopping = 0, running;
    for (;;) {
        job_t *in = take_incoming(h, &stopping), *next;
        for (; in; in = next) {
            next = in->next;
            if (stopping)
                report(h, in, 0, kClosing);
            else if (send_job(h, in) < 0)
                report(h, in, 0, "cannot make the request (out of memory)");
        }
        if (stopping) break;
        curl_multi_perform(h->multi, &running);
        finish_done(h);
        curl_multi_poll(h->multi, NULL, 0, 1000, NULL);
    }
    while (h->open) {
        job_t *j = h->open;
        unlink_open(h, j);
        report(h, j, 0, kClosing);
    }
    return NULL;
}

static void release(wh_http_t *h) {
    if (h->multi) curl_multi_cleanup(h->multi);
    pthread_mutex_destroy(&h->mu);
    free(h->url);
    free(h->secret);
    free(h->headers);
    free(h->ca_file);
    free(h->client_cert);
    free(h->client_key);
    free(h);
}

int wh_http_start(const wh_http_conf_t *conf, wh_http_done_fn done, void *owner, wh_http_t **out,
                  char *err, size_t n) {
    wh_http_t *h = (wh_http_t *)calloc(1, sizeof *h);
    sigset_t all, old;
    int rc;
    if (!h) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    pthread_mutex_init(&h->mu, NULL);
    h->tail = &h->incoming;
    h->url = dup_or_null(conf->url);
    h->secret = dup_or_null(conf->secret);
    h->headers = dup_or_null(conf->headers);
    h->ca_file = dup_or_null(conf->ca_file);
    h->client_cert = dup_or_null(conf->client_cert);
    h->client_key = dup_or_null(conf->client_key);
    h->timeout_ms = conf->timeout_ms;
    h->done = done;
    h->owner = owner;
    h->multi = curl_multi_init();
    if (!h->url || (conf->secret && !h->secret) || (conf->headers && !h->headers) ||
        (conf->ca_file && !h->ca_file) || (conf->client_cert && !h->client_cert) ||
        (conf->client_key && !h->client_key) || !h->multi) {
        snprintf(err, n, "out of memory");
        release(h);
        return -1;
    }
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, conf->max_connections);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&h->thread, NULL, run, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, n, "cannot start the HTTP thread: %s", strerror(rc));
        release(h);
        return -1;
    }
    *out = h;
    return 0;
}

int wh_http_post(wh_http_t *h, void *tag, char *body, size_t len, char *event_id) {
    job_t *j = (job_t *)calloc(1, sizeof *j);
    int stopping;
    if (!j) return -1;
    j->tag = tag;
    j->len = len;
    pthread_mutex_lock(&h->mu);
    stopping = h->stopping;
    if (!stopping) {
        j->body = body;
        j->event_id = event_id;
        *h->tail = j;
        h->tail = &j->next;
    }
    pthread_mutex_unlock(&h->mu);
    if (stopping) {
        free(j);
        return -1;
    }
    curl_multi_wakeup(h->multi);
    return 0;
}

void wh_http_stop(wh_http_t *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_mutex_unlock(&h->mu);
    curl_multi_wakeup(h->multi);
    pthread_join(h->thread, NULL);
    release(h);
}
