/*
 * expiry_counter - an example handler plugin, built out of tree against the installed
 * header:  cc -std=c99 -shared -fPIC $(pkg-config --cflags keywatch-plugin) \
 *             expiry_counter.c -o expiry_counter.so
 * Counts events per event name in a Redis hash (option "hash", default "expiries"), from
 * any worker thread: host->redis routes the command, even on a cluster.
 */
#include <stdlib.h>
#include <string.h>

#include <keywatch_plugin.h>

typedef struct {
    const kw_plugin_host_t *host;
    const char *hash;
} counter_t;

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t err_size) {
    counter_t *c = (counter_t *)malloc(sizeof *c);
    const char *hash = host->config_get(config, "hash");
    (void)err, (void)err_size;
    if (!c) return KW_ERR_NOMEM;
    c->host = host;
    c->hash = hash ? hash : "expiries"; /* option strings live as long as the instance */
    *state = c;
    return KW_OK;
}

static int handle(void *state, const kw_plugin_event_t *ev, char *err, size_t err_size) {
    const counter_t *c = (const counter_t *)state;
    const char *argv[4];
    kw_reply_t *reply = NULL;
    argv[0] = "HINCRBY", argv[1] = c->hash, argv[2] = c->host->event_name(ev), argv[3] = "1";
    if (c->host->redis(c->host, 4, argv, NULL, &reply, err, err_size) != KW_OK)
        return KW_RESULT_RETRY; /* no connection now: try again later */
    c->host->reply_free(reply);
    return KW_RESULT_ACK;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "expiry_counter",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  free,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
