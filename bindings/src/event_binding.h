// keywatch.Event: one event as a handler sees it. It reads the C event (kw_event_t)
// lazily and only while the handler runs: once the handler returned, the event is
// completed, the C event is gone, and every accessor raises keywatch.EventCompleted
// instead of reading freed memory. Used with the GIL held; not shared between threads.
#pragma once

#include <cstdint>
#include <string>

#include <pybind11/pybind11.h>

#include "bindings/src/capi_seam.h"

namespace keywatch::python {

class Event {
  public:
    // The event of a handler call.
    explicit Event(capi::EventPtr ev) : ev_(ev), writable_(ev) {}
    // The event of a hold (deferred completion): read-only, its reason goes with the
    // completion instead of set_error.
    struct Held {};
    Event(Held, const kw_event_t *held) : ev_(held), writable_(nullptr) {}

    std::string name() const;
    pybind11::bytes key() const;
    pybind11::object value() const;  // bytes or None
    int db() const;
    int64_t ts_ms() const;
    int64_t deadline_ms() const;  // 0: unknown
    int attempt() const;
    int max_attempts() const;
    std::string source() const;
    pybind11::object queue() const;  // str or None for live events
    std::string id() const;
    std::string node() const;
    pybind11::object deadline() const;    // aware datetime or None
    pybind11::object ts() const;          // aware datetime
    pybind11::object last_error() const;  // the previous attempt's error, None if none
    std::string repr() const;
    // The line `keywatch watch` prints for this event (kw_event_json), with its '\n'.
    std::string json_line() const;
    // Records why the handler retries or rejects (kept with the item, dead letters).
    void set_error(const std::string &reason) const;
    bool completed() const { return ev_ == nullptr; }

    // The handler returned: the C event is no longer readable.
    void complete() { ev_ = nullptr, writable_ = nullptr; }

  private:
    const kw_event_t *get() const;
    const kw_event_t *ev_;
    capi::EventPtr writable_;
};

void bind_event(pybind11::module_ &m);

}  // namespace keywatch::python
