/*
 * stream - a built-in handler plugin: reliable hand-off of each event to a Redis Stream,
 * appended once per event id even when the event is redelivered. One script checks a
 * marker key for the event id, XADDs the entry (with an approximate MAXLEN) and writes the
 * marker with a retention window, atomically: a crash between the XADD and the ack means
 * the redelivery finds the marker and appends nothing. The marker shares the stream's slot
 * (same hash tag), so this works on a cluster.
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
 * Thread-safety: the state is read-only after init; handle runs concurrently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keywatch_plugin.h"

#define MAX_FIELDS 16

static const char script[] =
    "local seen = redis.call('GET', KEYS[2])\n"
    "if seen then return {0, seen} end\n"
    "local args = {KEYS[1]}\n"
    "if tonumber(ARGV[2]) > 0 then\n"
    "  args[#args + 1] = 'MAXLEN'; args[#args + 1] = '~'; args[#args + 1] = ARGV[2]\n"
    "end\n"
    "args[#args + 1] = '*'\n"
    "for i = 3, #ARGV do args[#args + 1] = ARGV[i] end\n"
    "local id = redis.call('XADD', unpack(args))\n"
    "redis.call('SET', KEYS[2], id, 'PX', ARGV[1])\n"
    "return {1, id}\n";

typedef struct state {
    const kw_plugin_host_t *host;
    char *stream;
    char *marker_prefix; /* + event id: the marker key, in the stream's slot */
    char maxlen[24], dedupe_ms[24];
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

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    int rc = configure(s, host, config, err, n);
    if (rc != KW_OK) {
        release(s);
        return rc;
    }
    *state = s;
    return KW_OK;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    const char *argv[7 + 2 * MAX_FIELDS];
    size_t lens[7 + 2 * MAX_FIELDS];
    const char *id = h->event_id(ev);
    size_t plen = strlen(s->marker_prefix), ilen = strlen(id);
    char *marker = (char *)malloc(plen + ilen);
    if (!marker) return KW_RESULT_RETRY;
    memcpy(marker, s->marker_prefix, plen);
    memcpy(marker + plen, id, ilen);
    int argc = 0;
    argv[argc] = "EVAL", lens[argc++] = 4;
    argv[argc] = script, lens[argc++] = sizeof script - 1;
    argv[argc] = "2", lens[argc++] = 1;
    argv[argc] = s->stream, lens[argc++] = strlen(s->stream);
    argv[argc] = marker, lens[argc++] = plen + ilen;
    argv[argc] = s->dedupe_ms, lens[argc++] = strlen(s->dedupe_ms);
    argv[argc] = s->maxlen, lens[argc++] = strlen(s->maxlen);
    size_t i;
    for (i = 0; i < MAX_FIELDS; i++) {
        const char *name, *value;
        size_t vlen;
        if (h->event_field(ev, i, &name, &value, &vlen) != KW_OK) break;
        argv[argc] = name, lens[argc++] = strlen(name);
        argv[argc] = value, lens[argc++] = vlen;
    }
    kw_reply_t *r = NULL;
    int rc = h->redis(h, argc, argv, lens, &r, err, n);
    free(marker);
    if (rc != KW_OK) return KW_RESULT_RETRY;
    int result = KW_RESULT_ACK;
    if (r->type == KW_REPLY_ARRAY && r->elements == 2) {
        h->counter_add(h, r->element[0].integer ? "appended" : "duplicates", 1);
    } else {
        snprintf(err, n, "appending to %s: %.*s", s->stream, (int)r->len,
                 r->str ? r->str : "unexpected reply");
        result = r->str && !strncmp(r->str, "WRONGTYPE", 9) ? KW_RESULT_REJECT : KW_RESULT_RETRY;
    }
    h->reply_free(r);
    return result;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "stream",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
