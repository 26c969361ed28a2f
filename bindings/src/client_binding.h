// keywatch._keywatch.Client: the blocking client of the C API (kw_client_t) for Python.
// Every call that talks to Redis releases the GIL. Not thread-safe by itself, like
// kw_client_t: the Python class keywatch.Client serialises calls with a lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "bindings/src/status_error.h"
#include "keywatch.h"

namespace keywatch::python {

// One queued call of a pipeline: ("track", key, value, ttl_ms, flags),
// ("untrack", key, delete), ("schedule", queue, id, payload, at_ms, delay_ms, flags) or
// ("cancel", queue, id).
struct PipelineCall {
    std::string op, a, b, c;
    int64_t n1 = 0, n2 = 0;
    int flags = 0;
};

class Client {
  public:
    explicit Client(const std::map<std::string, std::string> &options);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    int64_t track(const std::string &key, const std::string &value, int64_t ttl_ms, int flags);
    void untrack(const std::string &key, bool delete_key);
    int64_t adopt(const std::string &key, int flags);
    int64_t schedule(const std::string &queue, const std::string &id, const std::string &payload,
                     int64_t at_ms, int64_t delay_ms, int flags);
    void cancel(const std::string &queue, const std::string &id);
    int64_t reschedule(const std::string &queue, const std::string &id, int64_t at_ms,
                       int64_t delay_ms);
    std::string inspect_json();
    std::string dead_list_json(const std::string &queue, size_t limit);
    int64_t dead_replay(const std::string &queue, std::optional<std::string> entry, size_t limit);
    int64_t dead_purge(const std::string &queue, std::optional<std::string> entry);
    // Sends the calls as one pipeline: each call's status and, when it failed, the
    // library's message for it (a call refused while queued: kw_client_last_error then;
    // one that failed once sent: kw_client_pipeline_error), in order.
    std::vector<std::pair<int, std::string>> run_pipeline(const std::vector<PipelineCall> &calls);
    // Frees the connection; later calls raise keywatch.StateError. Idempotent.
    void close();
    // The options the client was made with, as text (passwords as "***").
    const std::map<std::string, std::string> &options() const { return options_; }

  private:
    // Runs f(kw_client_t*) with the GIL released and raises its failure with the client's
    // last error.
    template <typename F>
    void call(const char *what, F &&f);
    kw_client_t *handle(const char *what);
    int queue_call(const PipelineCall &call);

    kw_client_t *client_ = nullptr;
    std::map<std::string, std::string> options_;
    ProcessGuard guard_;
};

void bind_client(pybind11::module_ &m);

}  // namespace keywatch::python
