/*
 * session_index - a built-in handler plugin: when a session key expires, remove the
 * session from its user's index (a set, hash or sorted set), so an index never lists dead
 * sessions. The user comes from the event's value snapshot (whole value or a JSON field)
 * or from a capture in the key; the index key is built from a template. The index may live
 * in any slot of a cluster: host->redis routes the command by its key.
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
 * Thread-safety: the state is read-only after init; handle runs concurrently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    *state = s;
    return KW_OK;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t klen = 0, vlen = 0;
    const char *key = (const char *)h->event_key(ev, &klen);
    const char *value = (const char *)h->event_value(ev, &vlen);
    span_t user = {NULL, 0}, sess = {NULL, 0}, member = {key, klen};
    if (s->pattern && !match(s->pattern, key, key + klen, &user, &sess)) {
        snprintf(err, n, "key \"%.*s\" does not match pattern \"%s\"", (int)klen, key, s->pattern);
        return KW_RESULT_REJECT;
    }
    if (s->user_from != USER_KEY) {
        if (!value) {
            snprintf(err, n, "no value snapshot: track the key with its value, or use user=key");
            return KW_RESULT_REJECT;
        }
        user.p = value;
        user.n = vlen;
        if (s->user_from == USER_JSON && !json_field(value, vlen, s->json_field, &user, err, n))
            return KW_RESULT_REJECT;
    }
    if (s->member_from == MEMBER_SESSION) member = sess;
    /* The index key: the template with {user} replaced. */
    const char *at = strstr(s->index, "{user}");
    size_t pre = (size_t)(at - s->index), post = strlen(at + 6);
    char *index = (char *)malloc(pre + user.n + post);
    if (!index) return KW_RESULT_RETRY;
    memcpy(index, s->index, pre);
    memcpy(index + pre, user.p, user.n);
    memcpy(index + pre + user.n, at + 6, post);
    const char *argv[3] = {s->cmd, index, member.p};
    size_t lens[3] = {strlen(s->cmd), pre + user.n + post, member.n};
    kw_reply_t *r = NULL;
    int rc = h->redis(h, 3, argv, lens, &r, err, n);
    free(index);
    if (rc != KW_OK) return KW_RESULT_RETRY; /* err says why */
    int result = KW_RESULT_ACK;
    if (r->type == KW_REPLY_INTEGER) {
        h->counter_add(h, r->integer > 0 ? "removed" : "absent", 1);
    } else {
        snprintf(err, n, "%s: %.*s", s->cmd, (int)r->len, r->str ? r->str : "unexpected reply");
        result = r->str && !strncmp(r->str, "WRONGTYPE", 9) ? KW_RESULT_REJECT : KW_RESULT_RETRY;
    }
    h->reply_free(r);
    return result;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "session_index",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
