/*
 * probe - a test plugin, and with compile definitions the deliberately broken plugins that
 * prove each refusal of the loader (tests/plugin_test.cpp). Built as C99 with -pedantic:
 * this is also the check that keywatch_plugin.h is strict C99.
 *   KW_TEST_WRONG_ABI     descriptor claims handler ABI 2
 *   KW_TEST_SHORT         descriptor size 16 bytes
 *   KW_TEST_NULL_HANDLE   handle is NULL
 *   KW_TEST_NO_ENTRY      no KW_HANDLER_DEFINE: no kw_handler_entry
 *   KW_TEST_UNDEFINED     needs a symbol nothing defines: dlopen(RTLD_NOW) fails
 *   KW_TEST_OLD_DESCRIPTOR  descriptor size as before handle_batch was appended, with a
 *                         handle_batch that aborts behind it: the host must never read it
 * The probe's options: record (a list: RPUSH "<key>:<attempt>" per call), retry_first
 * (1: the first attempt returns KW_RESULT_RETRY), fail_init (init fails with this text),
 * abort (1: abort() the process on every call, as a crashing plugin does).
 * Counter: handled. Logs "handled <key> attempt <n>" per call. Thread-safe (read-only state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keywatch_plugin.h"

typedef struct state {
    const kw_plugin_host_t *host;
    char record[256];
    int retry_first;
    int abort;
} state_t;

#ifdef KW_TEST_UNDEFINED
extern int kw_test_missing_symbol(void);
#endif

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **out,
                char *err, size_t n) {
    const char *fail = host->config_get(config, "fail_init");
    const char *record = host->config_get(config, "record");
    const char *retry = host->config_get(config, "retry_first");
    const char *crash = host->config_get(config, "abort");
    state_t *s;
    if (fail) {
        snprintf(err, n, "%s", fail);
        return KW_ERR_BAD_VALUE;
    }
    s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    if (record) snprintf(s->record, sizeof s->record, "%s", record);
    s->retry_first = retry && !strcmp(retry, "1");
    s->abort = crash && !strcmp(crash, "1");
#ifdef KW_TEST_UNDEFINED
    s->retry_first = kw_test_missing_symbol();
#endif
    *out = s;
    return KW_OK;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t klen;
    const char *key = (const char *)h->event_key(ev, &klen);
    int attempt = h->event_attempt(ev);
    char line[512];
    snprintf(line, sizeof line, "handled %.*s attempt %d", (int)klen, key, attempt);
    h->log(h, KW_LOG_INFO, line);
    h->counter_add(h, "handled", 1);
    if (s->abort) abort();
    if (s->record[0]) {
        char item[300];
        const char *argv[3];
        size_t lens[3];
        kw_reply_t *r = NULL;
        snprintf(item, sizeof item, "%.*s:%d", (int)klen, key, attempt);
        argv[0] = "RPUSH", lens[0] = 5;
        argv[1] = s->record, lens[1] = strlen(s->record);
        argv[2] = item, lens[2] = strlen(item);
        if (h->redis(h, 3, argv, lens, &r, err, n) != KW_OK) return KW_RESULT_RETRY;
        h->reply_free(r);
    }
    if (s->retry_first && attempt == 1) {
        snprintf(err, n, "first attempt refused on purpose");
        return KW_RESULT_RETRY;
    }
    return KW_RESULT_ACK;
}

static void release(void *p) {
    free(p);
}

#if defined(KW_TEST_WRONG_ABI)
#define ABI 2
#else
#define ABI KW_PLUGIN_ABI_VERSION
#endif
#if defined(KW_TEST_SHORT)
#define SIZE 16
#elif defined(KW_TEST_OLD_DESCRIPTOR)
#define SIZE offsetof(kw_plugin_descriptor_t, handle_batch)
#else
#define SIZE sizeof(kw_plugin_descriptor_t)
#endif
#if defined(KW_TEST_NULL_HANDLE)
#define HANDLE NULL
typedef int (*handle_fn)(void *, const kw_plugin_event_t *, char *, size_t);
handle_fn kw_test_unused_handle = handle; /* keeps it compiled */
#else
#define HANDLE handle
#endif

#if defined(KW_TEST_OLD_DESCRIPTOR)
static int poison(void *state, const kw_plugin_event_t *const *events, size_t n, int *results,
                  char *err, size_t err_size) {
    (void)state, (void)events, (void)n, (void)results, (void)err, (void)err_size;
    abort(); /* past the descriptor's size: a host that calls it read too far */
}
#define BATCH poison
#else
#define BATCH NULL
#endif

static const kw_plugin_descriptor_t descriptor = {ABI,  SIZE,   "probe", "0.0.1", 0,
                                                  init, HANDLE, release, BATCH};

#ifndef KW_TEST_NO_ENTRY
KW_HANDLER_DEFINE(descriptor)
#else
KW_PLUGIN_EXPORT const kw_plugin_descriptor_t *not_the_entry(void);
KW_PLUGIN_EXPORT const kw_plugin_descriptor_t *not_the_entry(void) {
    return &descriptor;
}
#endif
