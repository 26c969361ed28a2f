/* noop_plugin - the no-op handler as a plugin, for kw_bench_plugin: acks every event. */
#include "keywatch_plugin.h"

static int handle(void *state, const kw_plugin_event_t *ev, char *err, size_t err_size) {
    (void)state, (void)ev, (void)err, (void)err_size;
    return KW_RESULT_ACK;
}

static const kw_plugin_descriptor_t descriptor = {
    KW_PLUGIN_ABI_VERSION, sizeof(kw_plugin_descriptor_t), "noop", "1.0.0", 0, 0, handle, 0, 0};

KW_HANDLER_DEFINE(descriptor)
