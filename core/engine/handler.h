// Handler: the engine's one seam for business code. Every kind of handler is an adapter
// behind this interface: the C API's function pointer + opaque (capi/), a dlopen-loaded
// plugin (handlers/ and the plugin loader), the Python bindings (bindings/).
//
// The contract (docs/reliable-delivery.md, "Handlers and leases"):
//  - handle() runs on a worker thread, never on the event loop; calls run concurrently on
//    several workers unless serial() says otherwise.
//  - It returns KW_RESULT_ACK, KW_RESULT_RETRY or KW_RESULT_REJECT, or KW_RESULT_PENDING
//    after taking the event over with hold() (core/engine/hold.h): the event is then completed
//    later, from any thread, through the Hold.
//  - It must not throw; an exception that escapes anyway counts as KW_RESULT_RETRY.
//  - The destructor is the release: the engine destroys its handlers once, after its
//    workers stopped (kw_engine_free), so a handler never runs after it is released.
//  - A handler whose batches() is true gets, instead, the events of a worker's take that its
//    filter matches in one handle_batch() call (plugins with handle_batch): results[i] is
//    events[i]'s result, as handle() would return it (reasons in events[i]->error).
// Thread-safety: handle() and handle_batch() as above; name(), serial() and batches() from
// any thread (constant).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/base/event.h"

namespace keywatch {

class Handler {
  public:
    virtual ~Handler() = default;
    // Worker thread. See above.
    virtual int handle(Event &ev) = 0;
    // For logs and statistics labels ("c", a plugin instance's name, ...).
    virtual const std::string &name() const = 0;
    // True: calls must not overlap (the engine runs them one at a time).
    virtual bool serial() const { return false; }
    // True: the engine calls handle_batch (worker thread) instead of handle per event.
    virtual bool batches() const { return false; }
    // results come in at kNoResult; one left there is retried. An exception retries every
    // event still at kNoResult.
    virtual void handle_batch(Event *const *events, size_t n, int *results) {
        (void)events;
        (void)n;
        (void)results;
    }
    static constexpr int kNoResult = -1;  // = KW_PLUGIN_NO_RESULT
    // > 0: at most this many of its events in flight at once (in a call, or held). Read
    // once, when the handler is added.
    virtual uint32_t max_in_flight() const { return 0; }
};

using HandlerPtr = std::unique_ptr<Handler>;

}  // namespace keywatch
