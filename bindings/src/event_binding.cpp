#include "bindings/src/event_binding.h"

#include "bindings/src/capi_seam.h"
#include "bindings/src/status_error.h"

namespace py = pybind11;

namespace keywatch::python {
namespace {

// ms since the epoch as keywatch's Python layer shows times (aware UTC datetime, None for 0).
py::object from_epoch_ms(int64_t ms) {
    return py::module_::import("keywatch._convert").attr("from_epoch_ms")(ms);
}

}  // namespace

const kw_event_t *Event::get() const {
    if (!ev_)
        raise_python_error("EventCompleted",
                           "this event was completed when its handler returned and its data is "
                           "gone: read the fields you need (key, value, id, ...) inside the "
                           "handler and keep those");
    return ev_;
}

std::string Event::name() const {
    return capi::event_name(get());
}

py::bytes Event::key() const {
    size_t len = 0;
    const void *p = capi::event_key(get(), &len);
    return py::bytes(static_cast<const char *>(p), p ? len : 0);
}

py::object Event::value() const {
    size_t len = 0;
    const void *p = capi::event_value(get(), &len);
    if (!p) return py::none();
    return py::bytes(static_cast<const char *>(p), len);
}

int Event::db() const {
    return capi::event_db(get());
}
int64_t Event::ts_ms() const {
    return capi::event_ts_ms(get());
}
int64_t Event::deadline_ms() const {
    return capi::event_deadline_ms(get());
}
int Event::attempt() const {
    return capi::event_attempt(get());
}

int Event::max_attempts() const {
    return capi::event_max_attempts(get());
}

std::string Event::source() const {
    return capi::source_name(capi::event_source(get()));
}

py::object Event::queue() const {
    const char *q = capi::event_queue(get());
    if (!q || !*q) return py::none();
    return py::str(q);
}

py::object Event::deadline() const {
    return from_epoch_ms(deadline_ms());
}
py::object Event::ts() const {
    return from_epoch_ms(ts_ms());
}

py::object Event::last_error() const {
    const char *text = capi::event_last_error(get());
    if (!text || !*text) return py::none();
    return py::str(text);
}

std::string Event::repr() const {
    if (!ev_) return "<keywatch.Event completed>";
    return "<keywatch.Event " + name() + " " + py::repr(key()).cast<std::string>() + " attempt " +
           std::to_string(attempt()) + " id " + id() + ">";
}

std::string Event::id() const {
    return capi::event_id(get());
}
std::string Event::node() const {
    return capi::event_node(get());
}
std::string Event::json_line() const {
    std::string line;
    check(capi::event_json(get(), &line), "");
    return line + '\n';
}
void Event::set_error(const std::string &reason) const {
    get();
    if (!writable_)
        raise_python_error("StateError",
                           "a held event takes its reason with its completion, not set_error");
    capi::event_set_error(writable_, reason.c_str());
}

void bind_event(py::module_ &m) {
    py::class_<Event>(m, "Event",
                      "One event, readable while its handler runs (EventCompleted after).")
        .def_property_readonly("name", &Event::name, "event name: expired, del, task, ...")
        .def_property_readonly("key", &Event::key, "the key (task: its id), bytes")
        .def_property_readonly("value", &Event::value, "value snapshot or task payload, or None")
        .def_property_readonly("db", &Event::db, "the database number of the key")
        .def_property_readonly("ts_ms", &Event::ts_ms, "when keywatch received it (ms)")
        .def_property_readonly("deadline_ms", &Event::deadline_ms, "deadline (ms), 0 if unknown")
        .def_property_readonly("attempt", &Event::attempt, "delivery attempt, 1 for the first")
        .def_property_readonly("max_attempts", &Event::max_attempts,
                               "deliveries before the item is dead-lettered")
        .def_property_readonly("source", &Event::source,
                               "notification, sweep, lease_expired or task")
        .def_property_readonly("queue", &Event::queue, "keys, a task queue, or None")
        .def_property_readonly("id", &Event::id, "stable id, the same for every redelivery")
        .def_property_readonly("node", &Event::node, "the Redis node it came from")
        .def_property_readonly("deadline", &Event::deadline,
                               "the deadline as an aware UTC datetime, None if unknown")
        .def_property_readonly("ts", &Event::ts, "when keywatch received it (aware UTC)")
        .def_property_readonly("last_error", &Event::last_error,
                               "the previous attempt's error (a Retry's or Reject's reason, "
                               "an exception's text), None if none")
        .def_property_readonly("completed", &Event::completed,
                               "True once its handler returned (the fields are gone then)")
        .def("__repr__", &Event::repr)
        .def("json_line", &Event::json_line, "the line keywatch watch prints for it")
        .def("set_error", &Event::set_error, py::arg("reason"),
             "records why the handler retries or rejects the event (the next attempt's "
             "last_error, the dead letter's error); raising Retry or Reject does it for you");
}

}  // namespace keywatch::python
