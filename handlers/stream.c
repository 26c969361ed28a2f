/*
 * stream - a built-in handler plugin: reliable hand-off of each event to a Redis Stream,
 * appended once per event id even when the event is redelivered. One script checks a
 * marker key for the event id, XADDs the entry (with an approximate MAXLEN) and writes the
 * marker with a retention window, atomically: a crash between the XADD and the ack means
 * the redelivery finds the marker and appends nothing. The marker shares the stream's slot
 * (same hash tag), so this works on a cluster. A batch of events (handle_batch) is one
 * script call on the stream's node, with one result per event: an event whose marker or
 * append fails is retried (or rejected, WRONGTYPE) alone. The script goes by EVALSHA, and
 * by EVAL only to a node that does not have it yet (NOSCRIPT).
 * The entry's fields are the fields of `keywatch watch`'s JSON line, same names and
 * encoding (event, key or key_b64, value or value_b64, db, ts_ms, deadline_ms, attempt,
 * source, queue, id, node): one event format across the project.
 *
 * Options (docs/plugins.md):
 *   stream     required: the stream's key
 *   maxlen     approximate MAXLEN ~ (default 100000; 0: no trimming)
 *   dedupe_ms  how long an event id is remembered (default 86400000, one day): a
 *              redelivery later than this appends again
 * Counters: appended, duplicates.
 * Thread-safety: the state is read-only after init; handle and handle_batch run
 * concurrently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "batch.h"
#include "keywatch_plugin.h"

#define MAX_FIELDS 16
/* Events per script call: a host batch is smaller (64 today); this bounds one script's
 * run on the server if a host ever sends more. */
#define MAX_CALL 256

/* KEYS[1] the stream; KEYS[1+i] event i's marker (same slot). ARGV[1] dedupe_ms; ARGV[2]
 * maxlen (0: no trimming); then per event its number of fields and the name/value pairs.
 * Two values per event: 1, entry id (appended) | 0, the earlier entry id (a duplicate:
 * nothing written) | -1, the error (nothing written for this event). pcall throughout:
 * Redis does not roll back a script, so each event's outcome must be its own.
 * The markers are read with one MGET; MGET reads a key of another type as absent, so when
 * EXISTS counts more keys than MGET found, each absent one is read again by GET, whose
 * WRONGTYPE is that event's error. `fresh` holds the markers written by this call (an
 * event id twice in one batch). The fields go to XADD as a slice of ARGV (unpack), with
 * no table per event. */
static const char script[] =
    "local n, at = #KEYS - 1, 3\n"
    "local trim = tonumber(ARGV[2]) > 0\n"
    "local out, fresh, found = {}, {}, 0\n"
    "local seen = redis.pcall('MGET', unpack(KEYS, 2))\n"
    "if seen.err then seen = {} end\n"
    "for i = 1, n do if seen[i] then found = found + 1 end end\n"
    "local other = found < n\n"
    "if other then\n"
    "  local e = redis.pcall('EXISTS', unpack(KEYS, 2))\n"
    "  other = type(e) ~= 'number' or e > found\n"
    "end\n"
    "for i = 1, n do\n"
    "  local key, nf = KEYS[i + 1], tonumber(ARGV[at])\n"
    "  local s = seen[i] or fresh[key]\n"
    "  if not s and other then s = redis.pcall('GET', key) end\n"
    "  if type(s) == 'table' and s.err then\n"
    "    out[#out + 1] = -1; out[#out + 1] = s.err\n"
    "  elseif s then\n"
    "    out[#out + 1] = 0; out[#out + 1] = s\n"
    "  else\n"
    "    local id\n"
    "    if trim then\n"
    "      id = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',\n"
    "                        unpack(ARGV, at + 1, at + 2 * nf))\n"
    "    else\n"
    "      id = redis.pcall('XADD', KEYS[1], '*', unpack(ARGV, at + 1, at + 2 * nf))\n"
    "    end\n"
    "    if type(id) == 'table' and id.err then\n"
    "      out[#out + 1] = -1; out[#out + 1] = id.err\n"
    "    else\n"
    "      redis.pcall('SET', key, id, 'PX', ARGV[1])\n"
    "      fresh[key] = id\n"
    "      out[#out + 1] = 1; out[#out + 1] = id\n"
    "    end\n"
    "  end\n"
    "  at = at + 1 + 2 * nf\n"
    "end\n"
    "return out\n";

typedef struct state {
    const kw_plugin_host_t *host;
    char *stream;
    char *marker_prefix; /* + event id: the marker key, in the stream's slot */
    char maxlen[24], dedupe_ms[24];
    char sha[41]; /* SHA1 of script: EVALSHA, EVAL once per node that lacks it */
} state_t;

static void release(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    free(s->stream);
    free(s->marker_prefix);
    free(s);
}

/* A non-negative integer option into buf; 0 on a bad value. */
static int number(const char *v, const char *dflt, char *buf, size_t size) {
    const char *t = v ? v : dflt;
    char *end;
    long long x = strtoll(t, &end, 10);
    if (!*t || *end || x < 0) return 0;
    snprintf(buf, size, "%lld", x);
    return 1;
}

static int configure(state_t *s, const kw_plugin_host_t *h, const kw_plugin_config_t *c, char *err,
                     size_t n) {
    const char *stream = h->config_get(c, "stream"), *maxlen = h->config_get(c, "maxlen");
    const char *dedupe = h->config_get(c, "dedupe_ms");
    if (!stream || !*stream) {
        snprintf(err, n, "option \"stream\" is required: the key of the stream to append to");
        return KW_ERR_BAD_VALUE;
    }
    if (!number(maxlen, "100000", s->maxlen, sizeof s->maxlen)) {
        snprintf(err, n, "option \"maxlen\" = \"%s\": use a number >= 0", maxlen);
        return KW_ERR_BAD_VALUE;
    }
    if (!number(dedupe, "86400000", s->dedupe_ms, sizeof s->dedupe_ms) ||
        !strcmp(s->dedupe_ms, "0")) {
        snprintf(err, n, "option \"dedupe_ms\" = \"%s\": use a number of milliseconds > 0", dedupe);
        return KW_ERR_BAD_VALUE;
    }
    /* The marker must hash like the stream: reuse its hash tag, or make the whole stream
     * name the marker's tag. A name with braces but no tag cannot be matched. */
    size_t len = strlen(stream);
    const char *open = strchr(stream, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    int tagged = open && close && close > open + 1;
    if (!tagged && (strchr(stream, '{') || strchr(stream, '}'))) {
        snprintf(err, n,
                 "option \"stream\" = \"%s\": braces without a hash tag; the once-per-event "
                 "marker must share the stream's slot: use a name without braces or with a "
                 "non-empty {tag}",
                 stream);
        return KW_ERR_BAD_VALUE;
    }
    s->stream = (char *)malloc(len + 1);
    s->marker_prefix = (char *)malloc(len + 16);
    if (!s->stream || !s->marker_prefix) return KW_ERR_NOMEM;
    memcpy(s->stream, stream, len + 1);
    snprintf(s->marker_prefix, len + 16, tagged ? "%s:kw-seen:" : "{%s}:kw-seen:", stream);
    return KW_OK;
}

/* The script's SHA1 as EVALSHA takes it (lower-case hex). */
static int script_sha(char out[41]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0, i;
    if (!EVP_Digest(script, sizeof script - 1, md, &len, EVP_sha1(), NULL) || len != 20) return 0;
    for (i = 0; i < len; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 1;
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    int rc = configure(s, host, config, err, n);
    if (rc == KW_OK && !script_sha(s->sha)) {
        snprintf(err, n, "cannot compute the SHA1 of the append script (libcrypto)");
        rc = KW_ERR_INTERNAL;
    }
    if (rc != KW_OK) {
        release(s);
        return rc;
    }
    kw_host_batches(host);
    *state = s;
    return KW_OK;
}

/* One script call's arguments: the markers, field counts and argv in one allocation. */
typedef struct call {
    const char **argv;
    size_t *lens;
    int argc;
    char *bytes;
} call_t;

/* n in decimal at out, NUL-terminated (no sprintf per event); its length. */
static size_t put_count(char *out, size_t n) {
    char digits[24];
    size_t k = 0, len;
    do digits[k++] = (char)('0' + n % 10);
    while ((n /= 10) != 0);
    for (len = 0; k;) out[len++] = digits[--k];
    out[len] = '\0';
    return len;
}

/* EVALSHA sha <1+m> stream marker_1..marker_m dedupe_ms maxlen, then per event its field
 * count and fields. 0 when out of memory. */
static int build_call(const state_t *s, const kw_plugin_event_t *const *events, size_t m,
                      call_t *c) {
    const kw_plugin_host_t *h = s->host;
    size_t plen = strlen(s->marker_prefix), bytes = 16, i, f;
    for (i = 0; i < m; i++) bytes += plen + strlen(h->event_id(events[i])) + 8;
    size_t slots = 7 + m * (2 + 2 * MAX_FIELDS);
    c->argv = (const char **)malloc(slots * sizeof *c->argv);
    c->lens = (size_t *)malloc(slots * sizeof *c->lens);
    c->bytes = (char *)malloc(bytes);
    if (!c->argv || !c->lens || !c->bytes) return 0;
    char *at = c->bytes;
    int argc = 0;
    c->argv[argc] = "EVALSHA", c->lens[argc++] = 7;
    c->argv[argc] = s->sha, c->lens[argc++] = 40;
    c->argv[argc] = at, c->lens[argc++] = put_count(at, m + 1);
    at += c->lens[argc - 1] + 1;
    c->argv[argc] = s->stream, c->lens[argc++] = strlen(s->stream);
    for (i = 0; i < m; i++) {
        const char *id = h->event_id(events[i]);
        size_t ilen = strlen(id);
        memcpy(at, s->marker_prefix, plen);
        memcpy(at + plen, id, ilen);
        c->argv[argc] = at, c->lens[argc++] = plen + ilen;
        at += plen + ilen;
    }
    c->argv[argc] = s->dedupe_ms, c->lens[argc++] = strlen(s->dedupe_ms);
    c->argv[argc] = s->maxlen, c->lens[argc++] = strlen(s->maxlen);
    for (i = 0; i < m; i++) {
        int count = argc++;
        for (f = 0; f < MAX_FIELDS; f++) {
            const char *name, *value;
            size_t vlen;
            if (h->event_field(events[i], f, &name, &value, &vlen) != KW_OK) break;
            c->argv[argc] = name, c->lens[argc++] = strlen(name);
            c->argv[argc] = value, c->lens[argc++] = vlen;
        }
        c->argv[count] = at, c->lens[count] = put_count(at, f);
        at += c->lens[count] + 1;
    }
    c->argc = argc;
    return 1;
}

static void free_call(call_t *c) {
    free((void *)c->argv);
    free(c->lens);
    free(c->bytes);
}

static int is_wrongtype(const char *str, size_t len) {
    return str && len >= 9 && !strncmp(str, "WRONGTYPE", 9);
}

/* The script's reply: one result per event, the counters once per call. */
static void take_reply(const state_t *s, const kw_reply_t *r, size_t first, size_t m, int *results,
                       const kw_sink_t *sink) {
    const kw_plugin_host_t *h = s->host;
    int64_t appended = 0, duplicates = 0;
    size_t i;
    if (r->type != KW_REPLY_ARRAY || r->elements != 2 * m) {
        /* The whole call failed (BUSY, READONLY, NOPERM, ...): nothing was written. */
        for (i = 0; i < m; i++) {
            kw_sink_reason(sink, first + i, "appending to %s: %.*s", s->stream, (int)r->len,
                           r->str ? r->str : "unexpected reply");
            results[first + i] = is_wrongtype(r->str, r->len) ? KW_RESULT_REJECT : KW_RESULT_RETRY;
        }
        return;
    }
    for (i = 0; i < m; i++) {
        const kw_reply_t *code = &r->element[2 * i], *what = &r->element[2 * i + 1];
        if (code->type == KW_REPLY_INTEGER && code->integer >= 0) {
            results[first + i] = KW_RESULT_ACK;
            *(code->integer ? &appended : &duplicates) += 1;
            continue;
        }
        kw_sink_reason(sink, first + i, "appending to %s: %.*s", s->stream, (int)what->len,
                       what->str ? what->str : "unexpected reply");
        results[first + i] =
            is_wrongtype(what->str, what->len) ? KW_RESULT_REJECT : KW_RESULT_RETRY;
    }
    if (appended) h->counter_add(h, "appended", appended);
    if (duplicates) h->counter_add(h, "duplicates", duplicates);
}

/* One script call for events[first..first+m-1]: EVALSHA, and EVAL when the stream's node
 * does not have the script yet (which loads it there). */
static int append_call(const state_t *s, const kw_plugin_event_t *const *events, size_t first,
                       size_t m, int *results, const kw_sink_t *sink, char *err, size_t n) {
    const kw_plugin_host_t *h = s->host;
    call_t c = {NULL, NULL, 0, NULL};
    if (!build_call(s, events + first, m, &c)) {
        free_call(&c);
        snprintf(err, n, "out of memory for a batch of %zu events", m);
        return KW_ERR_NOMEM;
    }
    kw_reply_t *r = NULL;
    int rc = h->redis(h, c.argc, c.argv, c.lens, &r, err, n);
    if (rc == KW_OK && r->type == KW_REPLY_ERROR && r->len >= 8 &&
        !strncmp(r->str, "NOSCRIPT", 8)) {
        h->reply_free(r);
        r = NULL;
        c.argv[0] = "EVAL", c.lens[0] = 4;
        c.argv[1] = script, c.lens[1] = sizeof script - 1;
        rc = h->redis(h, c.argc, c.argv, c.lens, &r, err, n);
    }
    free_call(&c);
    if (rc != KW_OK) return rc; /* err says why; the events are retried */
    take_reply(s, r, first, m, results, sink);
    h->reply_free(r);
    return KW_OK;
}

/* The batch: one script call (per MAX_CALL events) on the stream's node. */
static int append_batch(void *p, const kw_plugin_event_t *const *events, size_t n, int *results,
                        const kw_sink_t *sink, char *err, size_t err_size) {
    const state_t *s = (const state_t *)p;
    size_t first;
    for (first = 0; first < n; first += MAX_CALL) {
        size_t m = n - first < MAX_CALL ? n - first : MAX_CALL;
        int rc = append_call(s, events, first, m, results, sink, err, err_size);
        if (rc != KW_OK) return rc;
    }
    return KW_OK;
}

KW_BATCH_ENTRY_POINTS(append_batch, state_t)

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "stream",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  handle_batch};

KW_HANDLER_DEFINE(descriptor)
