/*
 * holding.h - what the built-in plugins that hold their events and complete them from a
 * thread of their own (exec, webhook) need of the host, checked once at init: hold,
 * complete, event_json and set_max_in_flight (keywatch 0.3.0 or later). Header-only: each
 * built-in is its own shared object and links nothing of keywatch.
 * Thread-safety: reads the host table only.
 */
#ifndef KW_HANDLERS_HOLDING_H
#define KW_HANDLERS_HOLDING_H

#include <stdio.h>

#include "keywatch_plugin.h"

/* KW_OK when the host has every member named above; else KW_ERR_INVALID_ARG with err saying
 * which keywatch to use with `plugin` (its name). */
static inline int kw_host_holds(const kw_plugin_host_t *host, const char *plugin, char *err,
                                size_t n) {
    if (KW_PLUGIN_HAS(host->size, kw_plugin_host_t, set_max_in_flight) && host->set_max_in_flight &&
        host->hold && host->complete && host->event_json)
        return KW_OK;
    snprintf(err, n,
             "this keywatch host (%s) has no set_max_in_flight (keywatch 0.3.0 or later): use "
             "the %s plugin that ships with your keywatch",
             host->keywatch_version ? host->keywatch_version : "?", plugin);
    return KW_ERR_INVALID_ARG;
}

#endif
