// The C API's handler adapter: a kw_handler_fn + opaque (+ optional free_opaque) behind
// the core's Handler interface (core/engine/handler.h), and the cast between the core's Event and
// the C API's opaque kw_event_t. Thread-safety: as core/engine/handler.h.
#pragma once

#include <string>

#include "core/base/event.h"
#include "core/engine/handler.h"
#include "keywatch.h"

namespace keywatch {

class CHandler final : public Handler {
  public:
    CHandler(kw_handler_fn fn, void *opaque) : fn_(fn), opaque_(opaque) {}
    // The release: free_opaque(opaque), once, if armed.
    ~CHandler() override;
    int handle(Event &ev) override;
    const std::string &name() const override;
    // Set only once the engine took the handler (a failed add does not free opaque).
    void arm_free_opaque(void (*free_opaque)(void *)) { free_opaque_ = free_opaque; }

  private:
    kw_handler_fn fn_;
    void *opaque_;
    void (*free_opaque_)(void *) = nullptr;
};

// kw_event_t is keywatch::Event behind an opaque pointer.
inline kw_event_t *to_c(Event *ev) {
    return reinterpret_cast<kw_event_t *>(ev);
}

}  // namespace keywatch
