/*
 * session_index - a built-in handler plugin: when a session key expires, remove the
 * session from its user's index (a set, hash or sorted set), so an index never lists dead
 * sessions. The user comes from the event's value snapshot (whole value or a JSON field)
 * or from a capture in the key; the index key is built from a template. The index may live
 * in any slot of a cluster: the host routes each command by its key. A batch of events
 * (handle_batch) sends one command per index key (SREM key m1 m2 ...), pipelined to every
 * master at once (host->redis_pipeline); each event gets its own result (a failing index
 * fails only the events of that index).
 *
 * Options (docs/plugins.md):
 *   index    required: index key template with {user}, e.g. "user:{user}:sessions"
 *   type     set (SREM, default) | hash (HDEL) | zset (ZREM)
 *   user     value (default: the whole value snapshot) | json:FIELD (a top-level field of
 *            the value, a string or number) | key (the {user} capture of `pattern`)
 *   pattern  key pattern: literal text, * (any text), {user} and {session} (captures,
 *            non-empty); required with user=key or member=session; a key that does not
 *            match is rejected
 *   member   key (default: the whole key) | session (the {session} capture)
 * Counters: removed (the member was in the index), absent (it was not).
 * Thread-safety: the state is read-only after init; handle and handle_batch run
 * concurrently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "keywatch_plugin.h"

enum { USER_VALUE, USER_JSON, USER_KEY };
enum { MEMBER_KEY, MEMBER_SESSION };

typedef struct state {
    const kw_plugin_host_t *host;
    char *index;     /* template */
    const char *cmd; /* SREM, HDEL, ZREM */
    int user_from;
    char *json_field;
    char *pattern; /* NULL: none */
    int member_from;
    int pipeline; /* the host has redis_pipeline */
} state_t;

typedef struct span {
    const char *p;
    size_t n;
} span_t;

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Matches key against pattern: '*' any text, "{user}" and "{session}" non-empty captures. */
static int match(const char *pat, const char *k, const char *end, span_t *user, span_t *sess) {
    if (!*pat) return k == end;
    if (*pat == '*') {
        const char *t;
        for (t = k; t <= end; t++)
            if (match(pat + 1, t, end, user, sess)) return 1;
        return 0;
    }
    if (!strncmp(pat, "{user}", 6) || !strncmp(pat, "{session}", 9)) {
        int is_user = pat[1] == 'u';
        const char *rest = pat + (is_user ? 6 : 9);
        const char *t;
        for (t = k + 1; t <= end; t++) {
            if (match(rest, t, end, user, sess)) {
                span_t *s = is_user ? user : sess;
                s->p = k;
                s->n = (size_t)(t - k);
                return 1;
            }
        }
        return 0;
    }
    return k < end && *k == *pat && match(pat + 1, k + 1, end, user, sess);
}

/* ---- a top-level field of a JSON object (string or scalar), no allocation ---- */
static const char *ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}
static const char *skip_string(const char *p, const char *e) { /* p at '"' */
    for (p++; p < e; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}
static const char *skip_value(const char *p, const char *e) {
    int depth = 0;
    p = ws(p, e);
    while (p && p < e) {
        if (*p == '"') {
            p = skip_string(p, e);
            if (depth == 0) return p;
            continue;
        }
        if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']') {
            if (depth == 0) return p;
            if (--depth == 0) return p + 1;
        } else if (depth == 0 && *p == ',')
            return p;
        p++;
    }
    return p;
}
/* The field's value: a string's bytes (escape-free only) or a scalar's text. */
static int json_field(const char *p, size_t len, const char *field, span_t *out, char *err,
                      size_t n) {
    const char *e = p + len;
    size_t flen = strlen(field);
    p = ws(p, e);
    if (p >= e || *p != '{') {
        snprintf(err, n, "the value is not a JSON object");
        return 0;
    }
    for (p = ws(p + 1, e); p < e && *p == '"'; p = ws(p, e)) {
        const char *name = p + 1, *after = skip_string(p, e);
        if (!after) break;
        int hit = (size_t)(after - 1 - name) == flen && !memcmp(name, field, flen);
        p = ws(after, e);
        if (p >= e || *p != ':') break;
        p = ws(p + 1, e);
        const char *v = p;
        p = skip_value(p, e);
        if (!p) break;
        if (hit) {
            if (*v == '"') {
                out->p = v + 1;
                out->n = (size_t)(p - v - 2);
                if (memchr(out->p, '\\', out->n)) {
                    snprintf(err, n, "JSON field \"%s\" holds an escape sequence", field);
                    return 0;
                }
            } else {
                const char *t = p;
                while (t > v && (t[-1] == ' ' || t[-1] == '\n' || t[-1] == '\r')) t--;
                out->p = v;
                out->n = (size_t)(t - v);
                if (*v == '{' || *v == '[' || *v == 'n') {
                    snprintf(err, n, "JSON field \"%s\" is not a string or number", field);
                    return 0;
                }
            }
            return out->n > 0;
        }
        p = ws(p, e);
        if (p < e && *p == ',') p = ws(p + 1, e);
    }
    snprintf(err, n, "the value's JSON has no top-level field \"%s\"", field);
    return 0;
}

static int fail(char *err, size_t n, const char *option, const char *value, const char *why) {
    snprintf(err, n, "option \"%s\"%s%s%s: %s", option, value ? " = \"" : "", value ? value : "",
             value ? "\"" : "", why);
    return KW_ERR_BAD_VALUE;
}

static void release(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    free(s->index);
    free(s->json_field);
    free(s->pattern);
    free(s);
}

static int configure(state_t *s, const kw_plugin_host_t *h, const kw_plugin_config_t *c, char *err,
                     size_t n) {
    const char *index = h->config_get(c, "index"), *type = h->config_get(c, "type");
    const char *user = h->config_get(c, "user"), *pattern = h->config_get(c, "pattern");
    const char *member = h->config_get(c, "member");
    if (!index || !strstr(index, "{user}"))
        return fail(err, n, "index", index, "required, a key template with {user}");
    s->index = dup_str(index);
    if (!type || !strcmp(type, "set"))
        s->cmd = "SREM";
    else if (!strcmp(type, "hash"))
        s->cmd = "HDEL";
    else if (!strcmp(type, "zset"))
        s->cmd = "ZREM";
    else
        return fail(err, n, "type", type, "use set, hash or zset");
    if (!user || !strcmp(user, "value"))
        s->user_from = USER_VALUE;
    else if (!strcmp(user, "key"))
        s->user_from = USER_KEY;
    else if (!strncmp(user, "json:", 5) && user[5]) {
        s->user_from = USER_JSON;
        s->json_field = dup_str(user + 5);
    } else
        return fail(err, n, "user", user, "use value, json:FIELD or key");
    s->member_from = MEMBER_KEY;
    if (member && !strcmp(member, "session"))
        s->member_from = MEMBER_SESSION;
    else if (member && strcmp(member, "key"))
        return fail(err, n, "member", member, "use key or session");
    if (pattern) s->pattern = dup_str(pattern);
    if (s->user_from == USER_KEY && (!pattern || !strstr(pattern, "{user}")))
        return fail(err, n, "pattern", pattern, "user=key needs a pattern with {user}");
    if (s->member_from == MEMBER_SESSION && (!pattern || !strstr(pattern, "{session}")))
        return fail(err, n, "pattern", pattern, "member=session needs a pattern with {session}");
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
    s->pipeline = kw_host_batches(host);
    *state = s;
    return KW_OK;
}

/* One event's index key and member. */
typedef struct item {
    span_t index, member;
    size_t ev; /* the event's position in the batch */
} item_t;

/* The user and member of ev; 0 with the reason in why when the event cannot be served. */
static int resolve(const state_t *s, const kw_plugin_event_t *ev, span_t *user, span_t *member,
                   char *why, size_t n) {
    const kw_plugin_host_t *h = s->host;
    size_t klen = 0, vlen = 0;
    const char *key = (const char *)h->event_key(ev, &klen);
    const char *value = (const char *)h->event_value(ev, &vlen);
    span_t sess = {NULL, 0};
    member->p = key, member->n = klen;
    if (s->pattern && !match(s->pattern, key, key + klen, user, &sess)) {
        snprintf(why, n, "key \"%.*s\" does not match pattern \"%s\"", (int)klen, key, s->pattern);
        return 0;
    }
    if (s->user_from != USER_KEY) {
        if (!value) {
            snprintf(why, n, "no value snapshot: track the key with its value, or use user=key");
            return 0;
        }
        user->p = value;
        user->n = vlen;
        if (s->user_from == USER_JSON && !json_field(value, vlen, s->json_field, user, why, n))
            return 0;
    }
    if (s->member_from == MEMBER_SESSION) *member = sess;
    return 1;
}

static int by_index(const void *a, const void *b) {
    const span_t *x = &((const item_t *)a)->index, *y = &((const item_t *)b)->index;
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    if (c) return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* The items of the events that can be served, index keys written into *keys (the template
 * with {user} replaced), sorted by index key; the others get REJECT. The item count, or
 * -1 when out of memory. */
static long make_items(const state_t *s, const kw_plugin_event_t *const *events, size_t n,
                       int *results, const kw_sink_t *sink, item_t *items, char **keys) {
    const char *at = strstr(s->index, "{user}");
    size_t pre = (size_t)(at - s->index), post = strlen(at + 6), m = 0, total = 1, i;
    span_t *users = (span_t *)malloc(n * sizeof *users);
    if (!users) return -1;
    for (i = 0; i < n; i++) {
        char why[512];
        users[i].p = NULL, users[i].n = 0;
        if (!resolve(s, events[i], &users[i], &items[m].member, why, sizeof why)) {
            kw_sink_reason(sink, i, "%s", why);
            results[i] = KW_RESULT_REJECT;
            continue;
        }
        items[m].ev = i;
        items[m].index.n = pre + users[i].n + post;
        total += items[m++].index.n;
    }
    char *w = *keys = (char *)malloc(total);
    if (!w) {
        free(users);
        return -1;
    }
    for (i = 0; i < m; i++) {
        const span_t *u = &users[items[i].ev];
        items[i].index.p = w;
        memcpy(w, s->index, pre);
        memcpy(w + pre, u->p, u->n);
        memcpy(w + pre + u->n, at + 6, post);
        w += items[i].index.n;
    }
    free(users);
    qsort(items, m, sizeof *items, by_index);
    return (long)m;
}

/* Runs the commands: pipelined per node, or one by one with host->redis on a host without
 * redis_pipeline. err names the first failure. */
static void run(const state_t *s, size_t count, const kw_redis_command_t *cmds,
                kw_reply_t **replies, int *statuses, char *err, size_t n) {
    const kw_plugin_host_t *h = s->host;
    size_t c;
    if (s->pipeline) {
        h->redis_pipeline(h, count, cmds, replies, statuses, err, n);
        return;
    }
    for (c = 0; c < count; c++) {
        char one[512];
        replies[c] = NULL;
        statuses[c] =
            h->redis(h, cmds[c].argc, cmds[c].argv, cmds[c].argvlen, &replies[c], one, sizeof one);
        if (statuses[c] != KW_OK && !*err) snprintf(err, n, "%s", one);
    }
}

/* The results of the events of one command (items[first..first+k-1]). */
static void take_reply(const state_t *s, const item_t *items, size_t k, const kw_reply_t *r,
                       int status, const char *err, int *results, const kw_sink_t *sink,
                       int64_t *removed, int64_t *absent) {
    size_t i;
    if (status == KW_OK && r->type == KW_REPLY_INTEGER) {
        for (i = 0; i < k; i++) results[items[i].ev] = KW_RESULT_ACK;
        *removed += r->integer;
        *absent += (int64_t)k - r->integer;
        return;
    }
    for (i = 0; i < k; i++) {
        if (status != KW_OK) {
            kw_sink_reason(sink, items[i].ev, "%s", err);
            results[items[i].ev] = KW_RESULT_RETRY;
            continue;
        }
        kw_sink_reason(sink, items[i].ev, "%s: %.*s", s->cmd, (int)r->len,
                       r->str ? r->str : "unexpected reply");
        results[items[i].ev] = r->str && r->len >= 9 && !strncmp(r->str, "WRONGTYPE", 9)
                                   ? KW_RESULT_REJECT
                                   : KW_RESULT_RETRY;
    }
}

/* One command per index key (its members together), all sent at once; one result per
 * event. */
static int remove_batch(void *p, const kw_plugin_event_t *const *events, size_t n, int *results,
                        const kw_sink_t *sink, char *err, size_t err_size) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    item_t *items = (item_t *)malloc(n * sizeof *items);
    kw_redis_command_t *cmds = (kw_redis_command_t *)malloc(n * sizeof *cmds);
    const char **argv = (const char **)malloc(3 * n * sizeof *argv);
    size_t *lens = (size_t *)malloc(3 * n * sizeof *lens);
    kw_reply_t **replies = (kw_reply_t **)calloc(n, sizeof *replies);
    int *statuses = (int *)malloc(n * sizeof *statuses);
    size_t *starts = (size_t *)malloc((n + 1) * sizeof *starts);
    char *keys = NULL, perr[512] = "";
    long m = items && cmds && argv && lens && replies && statuses && starts
                 ? make_items(s, events, n, results, sink, items, &keys)
                 : -1;
    size_t count = 0, used = 0, i, c;
    for (i = 0; m > 0 && i < (size_t)m; i++) {
        if (i == 0 || by_index(&items[i - 1], &items[i])) {
            starts[count] = i;
            cmds[count].argc = 2;
            cmds[count].argv = argv + used;
            cmds[count++].argvlen = lens + used;
            argv[used] = s->cmd, lens[used++] = strlen(s->cmd);
            argv[used] = items[i].index.p, lens[used++] = items[i].index.n;
        }
        argv[used] = items[i].member.p, lens[used++] = items[i].member.n;
        cmds[count - 1].argc++;
    }
    if (m > 0) {
        int64_t removed = 0, absent = 0;
        starts[count] = (size_t)m;
        run(s, count, cmds, replies, statuses, perr, sizeof perr);
        for (c = 0; c < count; c++) {
            take_reply(s, items + starts[c], starts[c + 1] - starts[c], replies[c], statuses[c],
                       perr, results, sink, &removed, &absent);
            h->reply_free(replies[c]);
        }
        if (removed) h->counter_add(h, "removed", removed);
        if (absent) h->counter_add(h, "absent", absent);
    }
    free(items), free(cmds), free((void *)argv), free(lens), free(replies), free(statuses);
    free(starts), free(keys);
    if (m >= 0) return KW_OK;
    snprintf(err, err_size, "out of memory for a batch of %zu events", n);
    return KW_ERR_NOMEM;
}

KW_BATCH_ENTRY_POINTS(remove_batch, state_t)

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "session_index",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  handle_batch};

KW_HANDLER_DEFINE(descriptor)
