#include "bindings/src/engine_binding.h"

#include <pybind11/stl.h>

#include "bindings/src/capi_seam.h"
#include "bindings/src/conf.h"
#include "bindings/src/event_binding.h"
#include "bindings/src/stats_binding.h"

namespace py = pybind11;

namespace keywatch::python {
namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

// An engine worker's Python thread state, made at its first handler call and kept until
// the thread ends. Without it pybind11's gil_scoped_acquire creates a PyThreadState and
// deletes it again on every call, most of what a no-op handler costs. At the thread's end
// (the engine stopping: stop() and close() release the GIL while they join) the state is
// deleted, unless the interpreter is finalizing: then it is left to the interpreter.
class KeptThreadState {
  public:
    // Call with the GIL held through a gil_scoped_acquire of this thread.
    void keep(py::gil_scoped_acquire &gil) {
        if (kept_) return;
        gil.inc_ref();
        kept_ = true;
    }
    ~KeptThreadState() {
        if (!kept_ || interpreter_finalizing()) return;
        py::gil_scoped_acquire gil;  // finds the kept state
        gil.dec_ref();               // the scope's end deletes it
    }

  private:
    bool kept_ = false;
};

// A retry at a given delay: only a completion carries one, so the handler holds its own
// event and completes it before returning (KW_RESULT_PENDING). Without a hold (the engine
// is stopping) or if the completion is refused, it is a plain retry with the reason.
int retry_after(capi::EventPtr ev, int64_t delay_ms, const std::string &reason) {
    capi::event_set_error(ev, reason.c_str());
    kw_hold_t *hold = capi::event_hold(ev);
    if (!hold) return KW_RESULT_RETRY;
    int rc = capi::event_complete(hold, KW_RESULT_RETRY, reason.c_str(), delay_ms);
    capi::hold_free(hold);
    return rc == KW_OK ? KW_RESULT_PENDING : KW_RESULT_RETRY;
}

// What the invoker returned: a kw_result, or (RETRY, delay_ms, reason).
int outcome(capi::EventPtr ev, const py::object &returned) {
    if (!py::isinstance<py::tuple>(returned)) return returned.cast<int>();
    auto t = returned.cast<py::tuple>();
    const auto delay_ms = t[1].cast<int64_t>();
    const auto reason = t[2].cast<std::string>();
    py::gil_scoped_release release;  // the completion takes the engine's locks
    return retry_after(ev, delay_ms, reason);
}

// A C handler calling into Python. Runs on an engine worker thread.
int handler_trampoline(capi::EventPtr ev, void *opaque) {
    // Taking the GIL while the interpreter shuts down would end this thread inside the
    // engine: give the item back for redelivery instead.
    if (interpreter_finalizing()) return KW_RESULT_RETRY;
    auto *slot = static_cast<HandlerSlot *>(opaque);
    thread_local KeptThreadState thread_state;
    py::gil_scoped_acquire gil;
    thread_state.keep(gil);
    py::object event = py::cast(Event(ev));
    int result = KW_RESULT_RETRY;
    try {
        result = outcome(ev, slot->invoke(event));
    } catch (py::error_already_set &e) {
        // keywatch.engine's wrapper handles the user's exceptions; this is a failure of
        // the wrapper itself. Report it and retry the item.
        e.discard_as_unraisable("keywatch handler");
    } catch (const std::exception &e) {
        PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "keywatch handler: %s", e.what());
    }
    event.cast<Event &>().complete();
    return result;
}

// The C handler of an async handler: holds the event and queues it for the loop, without
// the GIL; waits for room first (backpressure). Runs on an engine worker thread.
int async_trampoline(capi::EventPtr ev, void *opaque) {
    auto *slot = static_cast<HandlerSlot *>(opaque);
    if (!slot->held->reserve()) return KW_RESULT_RETRY;  // stopping
    kw_hold_t *hold = capi::event_hold(ev);
    if (!hold) {
        slot->held->release_one();
        return KW_RESULT_RETRY;
    }
    slot->held->push(slot->id, hold);
    return KW_RESULT_PENDING;
}

void log_trampoline(kw_log_level level, const char *message, void *opaque) {
    if (interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    try {
        static_cast<py::object *>(opaque)->operator()(static_cast<int>(level), message);
    } catch (py::error_already_set &e) {
        e.discard_as_unraisable("keywatch log");
    } catch (...) {
    }
}

}  // namespace

Engine::Engine(const std::map<std::string, std::string> &options) {
    Conf conf(options);
    options_ = conf.values();
    char err[512] = "";
    // The status first: as arguments of one call, err could be read before it is written.
    const int rc = capi::engine_new(conf.get(), &engine_, err, sizeof err);
    check(rc, err);
}

Engine::~Engine() {
    // In a forked child the engine's threads do not exist: freeing would wait for them.
    if (!engine_ || guard_.in_child()) return;
    py::gil_scoped_release release;
    capi::engine_free(engine_);
}

kw_engine_t *Engine::handle() {
    guard_.check("this Engine");
    if (!engine_) throw StatusError(KW_ERR_STATE, "the engine is closed");
    return engine_;
}

std::string Engine::last_error() {
    return capi::engine_last_error(engine_);
}

Engine::FilterPtr Engine::make_filter(const std::string &events,
                                      const std::optional<std::string> &prefix,
                                      const std::optional<std::string> &glob, std::optional<int> db,
                                      const std::optional<std::string> &queue) {
    FilterPtr filter(capi::filter_new(), capi::filter_free);
    if (!filter) throw std::bad_alloc();
    // The filter's values are the handler's arguments: a refused one is a bad argument
    // (keywatch.InvalidArgument), named by the library's message.
    auto set = [&](const char *name, const std::string &value, bool bytes) {
        char err[512] = "";
        const int rc = bytes ? capi::filter_set_bytes(filter.get(), name, value, err, sizeof err)
                             : capi::filter_set(filter.get(), name, value.c_str(), err, sizeof err);
        check(rc == KW_ERR_BAD_VALUE ? KW_ERR_INVALID_ARG : rc, err);
    };
    set("events", events, false);
    if (prefix) set("prefix", *prefix, true);
    if (glob) set("glob", *glob, true);
    if (db) set("db", std::to_string(*db), false);
    if (queue) set("queue", *queue, false);
    return filter;
}

void Engine::check_filter(const std::string &events, const std::optional<std::string> &prefix,
                          const std::optional<std::string> &glob, std::optional<int> db,
                          const std::optional<std::string> &queue) {
    make_filter(events, prefix, glob, db, queue);
}

void Engine::add(const std::string &events, std::optional<std::string> prefix,
                 std::optional<std::string> glob, std::optional<int> db,
                 std::optional<std::string> queue, HandlerSlot slot, kw_handler_fn fn) {
    kw_engine_t *e = handle();
    FilterPtr filter = make_filter(events, prefix, glob, db, queue);
    slots_.push_back(std::move(slot));
    int rc = capi::engine_add_handler(e, filter.get(), fn, &slots_.back());
    if (rc != KW_OK) {
        slots_.pop_back();
        check(rc, rc == KW_ERR_STATE ? "handlers can only be added before the engine starts"
                                     : last_error());
    }
}

void Engine::add_plugin(const std::string &plugin, std::optional<std::string> instance,
                        const std::string &events, std::optional<std::string> prefix,
                        std::optional<std::string> glob, std::optional<int> db,
                        std::optional<std::string> queue,
                        const std::vector<std::pair<std::string, std::string>> &options) {
    kw_engine_t *e = handle();
    FilterPtr filter = make_filter(events, prefix, glob, db, queue);
    std::vector<const char *> argv;  // name, value, ..., NULL
    for (const auto &[name, value] : options) {
        argv.push_back(name.c_str());
        argv.push_back(value.c_str());
    }
    argv.push_back(nullptr);
    char err[1024] = "";
    const int rc =
        capi::engine_add_plugin(e, plugin.c_str(), instance ? instance->c_str() : nullptr,
                                filter.get(), argv.data(), err, sizeof err);
    if (rc == KW_OK) return;
    if (err[0]) check(rc, err);
    check(rc,
          rc == KW_ERR_STATE ? "plugins can only be added before the engine starts" : last_error());
}

void Engine::add_handler(const std::string &events, std::optional<std::string> prefix,
                         std::optional<std::string> glob, std::optional<int> db,
                         std::optional<std::string> queue, py::object invoke) {
    HandlerSlot slot;
    slot.invoke = std::move(invoke);
    add(events, std::move(prefix), std::move(glob), db, std::move(queue), std::move(slot),
        handler_trampoline);
}

void Engine::add_async_handler(const std::string &events, std::optional<std::string> prefix,
                               std::optional<std::string> glob, std::optional<int> db,
                               std::optional<std::string> queue, int id, size_t limit) {
    handle();
    if (!held_) held_ = std::make_shared<HeldEvents>(limit);
    HandlerSlot slot;
    slot.held = held_;
    slot.id = id;
    add(events, std::move(prefix), std::move(glob), db, std::move(queue), std::move(slot),
        async_trampoline);
}

int Engine::held_fd() {
    handle();
    if (!held_) throw StatusError(KW_ERR_STATE, "the engine has no async handler");
    return held_->fd();
}

std::vector<std::pair<int, std::unique_ptr<Hold>>> Engine::take_holds() {
    handle();
    std::vector<std::pair<int, std::unique_ptr<Hold>>> out;
    if (!held_) return out;
    for (auto &[id, hold] : held_->take())
        out.emplace_back(id, std::make_unique<Hold>(hold, held_));
    return out;
}

void Engine::set_logger(py::object log) {
    kw_engine_t *e = handle();
    log_ = std::move(log);
    check(capi::engine_set_log_cb(e, log_trampoline, &log_),
          "the logger can only be set before the engine starts");
}

void Engine::start() {
    kw_engine_t *e = handle();
    if (held_) held_->open();
    int rc;
    std::string message;
    {
        py::gil_scoped_release release;
        rc = capi::engine_start(e);
        if (rc != KW_OK) message = capi::engine_last_error(e);
    }
    check(rc, message);
}

bool Engine::stop(int64_t timeout_ms) {
    kw_engine_t *e = handle();
    if (held_) held_->close();  // workers waiting for room give their event back
    int rc;
    {
        py::gil_scoped_release release;
        rc = capi::engine_stop(e, timeout_ms);
    }
    if (rc == KW_ERR_TIMEOUT) return false;
    check(rc, last_error());
    return true;
}

int64_t Engine::stat(const std::string &name) {
    int64_t value = 0;
    check(capi::engine_stat(handle(), name.c_str(), &value), "unknown statistic '" + name + "'");
    return value;
}

py::list Engine::stats() {
    return stats_samples(handle());
}

void Engine::close() {
    if (!engine_) return;
    guard_.check("this Engine");
    kw_engine_t *e = engine_;
    engine_ = nullptr;
    py::gil_scoped_release release;
    capi::engine_free(e);
}

void bind_engine(py::module_ &m) {
    py::class_<Engine>(m, "Engine", "The C engine with Python handlers.")
        .def(py::init<const std::map<std::string, std::string> &>(), py::arg("options"))
        .def("add_handler", &Engine::add_handler, py::arg("events"), py::arg("prefix"),
             py::arg("glob"), py::arg("db"), py::arg("queue"), py::arg("invoke"))
        .def("set_logger", &Engine::set_logger, py::arg("log"))
        .def("start", &Engine::start)
        .def("stop", &Engine::stop, py::arg("timeout_ms"))
        .def("stat", &Engine::stat, py::arg("name"))
        .def("stats", &Engine::stats)
        .def("close", &Engine::close)
        .def("options", &Engine::options)
        .def("add_async_handler", &Engine::add_async_handler, py::arg("events"), py::arg("prefix"),
             py::arg("glob"), py::arg("db"), py::arg("queue"), py::arg("id"), py::arg("limit"))
        .def("add_plugin", &Engine::add_plugin, py::arg("plugin"), py::arg("instance"),
             py::arg("events"), py::arg("prefix"), py::arg("glob"), py::arg("db"), py::arg("queue"),
             py::arg("options"))
        .def_static("check_filter", &Engine::check_filter, py::arg("events"), py::arg("prefix"),
                    py::arg("glob"), py::arg("db"), py::arg("queue"))
        .def("held_fd", &Engine::held_fd)
        .def("take_holds", &Engine::take_holds);
}

}  // namespace keywatch::python
