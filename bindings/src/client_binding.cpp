#include "bindings/src/client_binding.h"

#include <pybind11/stl.h>

#include "bindings/src/capi_seam.h"
#include "bindings/src/conf.h"

namespace py = pybind11;

namespace keywatch::python {

Client::Client(const std::map<std::string, std::string> &options) {
    Conf conf(options);
    options_ = conf.values();
    char err[512] = "";
    int rc;
    {
        py::gil_scoped_release release;
        rc = capi::client_new(conf.get(), &client_, err, sizeof err);
    }
    check(rc, err);
}

Client::~Client() {
    // A forked child must not close its parent's connection: the handle is left alone.
    if (client_ && !guard_.in_child()) capi::client_free(client_);
}

void Client::close() {
    guard_.check("this Client");
    if (!client_) return;
    kw_client_t *c = client_;
    client_ = nullptr;
    py::gil_scoped_release release;
    capi::client_free(c);
}

kw_client_t *Client::handle(const char *what) {
    guard_.check("this Client");
    if (!client_) throw StatusError(KW_ERR_STATE, std::string(what) + ": the client is closed");
    return client_;
}

template <typename F>
void Client::call(const char *what, F &&f) {
    kw_client_t *c = handle(what);
    int rc;
    std::string message;
    {
        py::gil_scoped_release release;
        rc = f(c);
        if (rc != KW_OK) message = capi::client_last_error(c);
    }
    check(rc, message);
}

int64_t Client::track(const std::string &key, const std::string &value, int64_t ttl_ms, int flags) {
    int64_t deadline = 0;
    call("track", [&](kw_client_t *c) {
        return capi::client_track(c, key, value, ttl_ms, flags, &deadline);
    });
    return deadline;
}

void Client::untrack(const std::string &key, bool delete_key) {
    call("untrack", [&](kw_client_t *c) { return capi::client_untrack(c, key, delete_key); });
}

int64_t Client::adopt(const std::string &key, int flags) {
    int64_t deadline = 0;
    call("adopt", [&](kw_client_t *c) { return capi::client_adopt(c, key, flags, &deadline); });
    return deadline;
}

int64_t Client::schedule(const std::string &queue, const std::string &id,
                         const std::string &payload, int64_t at_ms, int64_t delay_ms, int flags) {
    int64_t at = 0;
    call("schedule", [&](kw_client_t *c) {
        return capi::client_schedule(c, queue, id, payload, at_ms, delay_ms, flags, &at);
    });
    return at;
}

void Client::cancel(const std::string &queue, const std::string &id) {
    call("cancel", [&](kw_client_t *c) { return capi::client_cancel(c, queue, id); });
}

int64_t Client::reschedule(const std::string &queue, const std::string &id, int64_t at_ms,
                           int64_t delay_ms) {
    int64_t at = 0;
    call("reschedule", [&](kw_client_t *c) {
        return capi::client_reschedule(c, queue, id, at_ms, delay_ms, &at);
    });
    return at;
}

std::string Client::inspect_json() {
    std::string json;
    call("inspect", [&](kw_client_t *c) { return capi::client_inspect_json(c, &json); });
    return json;
}

std::string Client::dead_list_json(const std::string &queue, size_t limit) {
    std::string json;
    call("dead_letters",
         [&](kw_client_t *c) { return capi::client_dead_list_json(c, queue, limit, &json); });
    return json;
}

int64_t Client::dead_replay(const std::string &queue, std::optional<std::string> entry,
                            size_t limit) {
    int64_t count = 0;
    call("replay", [&](kw_client_t *c) {
        return capi::client_dead_replay(c, queue, entry ? entry->c_str() : nullptr, limit, &count);
    });
    return count;
}

int64_t Client::dead_purge(const std::string &queue, std::optional<std::string> entry) {
    int64_t count = 0;
    call("purge", [&](kw_client_t *c) {
        return capi::client_dead_purge(c, queue, entry ? entry->c_str() : nullptr, &count);
    });
    return count;
}

int Client::queue_call(const PipelineCall &p) {
    kw_client_t *c = client_;
    if (p.op == "track") return capi::client_track(c, p.a, p.b, p.n1, p.flags, nullptr);
    if (p.op == "untrack") return capi::client_untrack(c, p.a, p.flags != 0);
    if (p.op == "schedule")
        return capi::client_schedule(c, p.a, p.b, p.c, p.n1, p.n2, p.flags, nullptr);
    if (p.op == "cancel") return capi::client_cancel(c, p.a, p.b);
    return KW_ERR_INVALID_ARG;
}

std::vector<std::pair<int, std::string>> Client::run_pipeline(
    const std::vector<PipelineCall> &calls) {
    std::vector<std::pair<int, std::string>> out(calls.size(), {KW_OK, std::string()});
    call("pipeline", [&](kw_client_t *c) {
        int rc = capi::client_pipeline_begin(c);
        if (rc != KW_OK) return rc;
        // A call refused by its argument checks is not queued: its status and message are
        // kept here, and the queued ones' fill the other places.
        std::vector<size_t> queued;
        for (size_t i = 0; i < calls.size(); i++) {
            out[i].first = queue_call(calls[i]);
            if (out[i].first == KW_OK)
                queued.push_back(i);
            else
                out[i].second = capi::client_last_error(c);
        }
        std::vector<int> sent(queued.size(), KW_OK);
        size_t count = 0;
        rc = capi::client_pipeline_end(c, sent.data(), sent.size(), &count);
        for (size_t i = 0; i < queued.size() && i < count; i++) {
            out[queued[i]].first = sent[i];
            if (sent[i] != KW_OK) out[queued[i]].second = capi::client_pipeline_error(c, i);
        }
        // Per-call failures are reported through the statuses, not as one exception.
        return count == queued.size() ? KW_OK : rc;
    });
    return out;
}

void bind_client(py::module_ &m) {
    py::class_<PipelineCall>(m, "PipelineCall")
        .def(py::init([](std::string op, py::bytes a, py::bytes b, py::bytes c, int64_t n1,
                         int64_t n2,
                         int flags) { return PipelineCall{op, a, b, c, n1, n2, flags}; }),
             py::arg("op"), py::arg("a"), py::arg("b") = py::bytes(), py::arg("c") = py::bytes(),
             py::arg("n1") = 0, py::arg("n2") = 0, py::arg("flags") = 0);
    py::class_<Client>(m, "Client", "The blocking client of the C API (not thread-safe).")
        .def(py::init<const std::map<std::string, std::string> &>(), py::arg("options"))
        .def("track", &Client::track, py::arg("key"), py::arg("value"), py::arg("ttl_ms"),
             py::arg("flags"))
        .def("untrack", &Client::untrack, py::arg("key"), py::arg("delete_key"))
        .def("adopt", &Client::adopt, py::arg("key"), py::arg("flags"))
        .def("schedule", &Client::schedule, py::arg("queue"), py::arg("id"), py::arg("payload"),
             py::arg("at_ms"), py::arg("delay_ms"), py::arg("flags"))
        .def("cancel", &Client::cancel, py::arg("queue"), py::arg("id"))
        .def("reschedule", &Client::reschedule, py::arg("queue"), py::arg("id"), py::arg("at_ms"),
             py::arg("delay_ms"))
        .def("inspect_json", &Client::inspect_json)
        .def("dead_list_json", &Client::dead_list_json, py::arg("queue"), py::arg("limit"))
        .def("dead_replay", &Client::dead_replay, py::arg("queue"), py::arg("entry"),
             py::arg("limit"))
        .def("dead_purge", &Client::dead_purge, py::arg("queue"), py::arg("entry"))
        .def("run_pipeline", &Client::run_pipeline, py::arg("calls"))
        .def("options", &Client::options)
        .def("close", &Client::close);
}

}  // namespace keywatch::python
