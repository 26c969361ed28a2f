/*
 * old_host - a test plugin that runs another plugin as a keywatch 0.2 host would: it loads
 * the plugin named by its option "plugin" (a path) and gives it a host table of the 0.2
 * size, without event_set_error, redis_pipeline and set_max_in_flight, and calls only its
 * handle, never its handle_batch (tests/plugin_test.cpp: the built-ins on an older host).
 * Every other option goes to the inner plugin, which asks for it itself.
 * Thread-safety: the state is read-only after init; handle runs concurrently, as the
 * inner plugin's handle allows (its KW_PLUGIN_SERIAL is not honoured: the built-ins do not
 * set it).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keywatch_plugin.h"

/* The table the inner plugin sees, and the real one its calls go to. */
typedef struct old_table {
    kw_plugin_host_t table; /* first: the inner plugin's host pointer leads back here */
    const kw_plugin_host_t *real;
} old_table_t;

typedef struct state {
    old_table_t host;
    void *lib;
    const kw_plugin_descriptor_t *inner;
    void *inner_state;
} state_t;

static const kw_plugin_host_t *real(const kw_plugin_host_t *h) {
    return ((const old_table_t *)h)->real;
}
static void old_log(const kw_plugin_host_t *h, int level, const char *message) {
    real(h)->log(real(h), level, message);
}
static void old_counter_add(const kw_plugin_host_t *h, const char *name, int64_t delta) {
    real(h)->counter_add(real(h), name, delta);
}
static int old_redis(const kw_plugin_host_t *h, int argc, const char *const *argv,
                     const size_t *argvlen, kw_reply_t **reply, char *err, size_t err_size) {
    return real(h)->redis(real(h), argc, argv, argvlen, reply, err, err_size);
}

static void release(void *p) {
    state_t *s = (state_t *)p;
    if (!s) return;
    if (s->inner && s->inner->close && s->inner_state) s->inner->close(s->inner_state);
    if (s->lib) dlclose(s->lib);
    free(s);
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **out,
                char *err, size_t n) {
    const char *path = host->config_get(config, "plugin");
    state_t *s;
    kw_plugin_entry_fn entry;
    int rc;
    if (!path) {
        snprintf(err, n, "option \"plugin\" is required: the path of the plugin to run");
        return KW_ERR_BAD_VALUE;
    }
    s = (state_t *)calloc(1, sizeof *s);
    if (!s) return KW_ERR_NOMEM;
    memcpy(&s->host.table, host, offsetof(kw_plugin_host_t, event_set_error));
    s->host.table.size = (uint32_t)offsetof(kw_plugin_host_t, event_set_error);
    s->host.table.keywatch_version = "0.2.0";
    s->host.table.log = old_log;
    s->host.table.counter_add = old_counter_add;
    s->host.table.redis = old_redis;
    s->host.real = host;
    s->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    *(void **)(&entry) = s->lib ? dlsym(s->lib, "kw_handler_entry") : NULL;
    if (!entry) {
        snprintf(err, n, "cannot load %s: %s", path, dlerror());
        release(s);
        return KW_ERR_INVALID_ARG;
    }
    s->inner = entry();
    rc = s->inner->init(&s->host.table, config, &s->inner_state, err, n);
    if (rc != KW_OK) {
        s->inner_state = NULL;
        release(s);
        return rc;
    }
    *out = s;
    return KW_OK;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    const state_t *s = (const state_t *)p;
    return s->inner->handle(s->inner_state, ev, err, n);
}

/* Sized like a 0.2 descriptor: a 0.3 host calls handle only. */
static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  offsetof(kw_plugin_descriptor_t, handle_batch),
                                                  "old_host",
                                                  "0.0.1",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
