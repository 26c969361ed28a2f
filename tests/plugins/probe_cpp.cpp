// probe_cpp - a test plugin in C++: handle throws, and KW_HANDLER_DEFINE's guard turns the
// exception into KW_RESULT_RETRY with its text as the reason. Also the check that
// keywatch_plugin.h compiles as C++. Thread-safe (no state).
#include <stdexcept>

#include "keywatch_plugin.h"

namespace {

int handle(void *, const kw_plugin_event_t *, char *, size_t) {
    throw std::runtime_error("thrown on purpose");
}

const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                           sizeof(kw_plugin_descriptor_t),
                                           "probe_cpp",
                                           "0.0.1",
                                           0,
                                           nullptr,
                                           handle,
                                           nullptr,
                                           nullptr};

}  // namespace

KW_HANDLER_DEFINE(descriptor)
