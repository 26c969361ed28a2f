// probe_cpp - a test plugin in C++: handle throws, and KW_HANDLER_DEFINE's guard turns the
// exception into KW_RESULT_RETRY with its text as the reason. Also the check that
// keywatch_plugin.h compiles as C++. With KW_TEST_BATCH (probe_cpp_batch), handle_batch
// acks every event whose key does not start with "throw" and then throws when one does:
// the guard retries the events it left without a result. Thread-safe (no state).
#include <cstring>
#include <stdexcept>

#include "keywatch_plugin.h"

namespace {

int handle(void *, const kw_plugin_event_t *, char *, size_t) {
    throw std::runtime_error("thrown on purpose");
}

#ifdef KW_TEST_BATCH
const kw_plugin_host_t *host;

int init(const kw_plugin_host_t *h, const kw_plugin_config_t *, void **, char *, size_t) {
    host = h;
    return KW_OK;
}

int handle_batch(void *, const kw_plugin_event_t *const *events, size_t n, int *results, char *,
                 size_t) {
    bool throws = false;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *key = static_cast<const char *>(host->event_key(events[i], &len));
        if (len >= 5 && memcmp(key, "throw", 5) == 0)
            throws = true;
        else
            results[i] = KW_RESULT_ACK;
    }
    if (throws) throw std::runtime_error("batch thrown on purpose");
    return KW_OK;
}
#define INIT init
#define BATCH handle_batch
#else
#define INIT nullptr
#define BATCH nullptr
#endif

const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                           sizeof(kw_plugin_descriptor_t),
                                           "probe_cpp",
                                           "0.0.1",
                                           0,
                                           INIT,
                                           handle,
                                           nullptr,
                                           BATCH};

}  // namespace

KW_HANDLER_DEFINE(descriptor)
