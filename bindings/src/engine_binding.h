// keywatch._keywatch.Engine: the C engine (kw_engine_t) with Python handlers. The core
// knows nothing of Python: each handler is a C handler (handler_trampoline) whose opaque
// is a HandlerSlot; it takes the GIL only for the call into Python, never lets a Python
// exception reach the engine (it becomes RETRY) and never touches Python once the
// interpreter is finalizing. start/stop/close release the GIL, so handler threads waiting
// for it can finish while stop joins them.
// Thread-safety: methods are called with the GIL held, which serialises them.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <utility>
#include <vector>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "bindings/src/status_error.h"
#include "bindings/src/held_events.h"
#include "keywatch.h"

namespace keywatch::python {

// What a handler's opaque points to: the Python callable that runs one event and returns
// a kw_result, or (KW_RESULT_RETRY, delay_ms, reason) for a retry at a given delay
// (keywatch.engine wraps the user's function in it).
struct HandlerSlot {
    pybind11::object invoke;
    std::shared_ptr<HeldEvents> held;  // async handlers: where their holds are queued
    int id = -1;                       // and the number the loop knows the handler by
};

class Engine {
  public:
    explicit Engine(const std::map<std::string, std::string> &options);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    void add_handler(const std::string &events, std::optional<std::string> prefix,
                     std::optional<std::string> glob, std::optional<int> db,
                     std::optional<std::string> queue, pybind11::object invoke);
    // An async handler: its events are held and queued for the asyncio loop (held_fd,
    // take_holds) as handler number `id`; at most `limit` holds uncompleted at once.
    void add_async_handler(const std::string &events, std::optional<std::string> prefix,
                           std::optional<std::string> glob, std::optional<int> db,
                           std::optional<std::string> queue, int id, size_t limit);
    // A handler plugin (docs/plugins.md) with its options; the lookup of a name is
    // kw_engine_add_plugin's (include/keywatch.h).
    void add_plugin(const std::string &plugin, std::optional<std::string> instance,
                    const std::string &events, std::optional<std::string> prefix,
                    std::optional<std::string> glob, std::optional<int> db,
                    std::optional<std::string> queue,
                    const std::vector<std::pair<std::string, std::string>> &options);
    int held_fd();
    std::vector<std::pair<int, std::unique_ptr<Hold>>> take_holds();
    // log(level: int, message: str), called from engine threads with the GIL taken.
    void set_logger(pybind11::object log);
    void start();
    // False when handlers were still running at the deadline (KW_ERR_TIMEOUT).
    bool stop(int64_t timeout_ms);
    int64_t stat(const std::string &name);
    // The statistics snapshot, one tuple per sample (stats_binding.h).
    pybind11::list stats();
    // Stops (if running) and frees the engine. Idempotent.
    void close();
    // The options the engine was made with, as text (passwords as "***").
    const std::map<std::string, std::string> &options() const { return options_; }

    // Refuses a filter the library would refuse (the message of kw_filter_set), without
    // an engine: the decorator keywatch.Engine.on checks its filter when it is made.
    static void check_filter(const std::string &events, const std::optional<std::string> &prefix,
                             const std::optional<std::string> &glob, std::optional<int> db,
                             const std::optional<std::string> &queue);

  private:
    kw_engine_t *handle();
    std::string last_error();
    using FilterPtr = std::unique_ptr<kw_filter_t, void (*)(kw_filter_t *)>;
    static FilterPtr make_filter(const std::string &events,
                                 const std::optional<std::string> &prefix,
                                 const std::optional<std::string> &glob, std::optional<int> db,
                                 const std::optional<std::string> &queue);
    void add(const std::string &events, std::optional<std::string> prefix,
             std::optional<std::string> glob, std::optional<int> db,
             std::optional<std::string> queue, HandlerSlot slot, kw_handler_fn fn);

    kw_engine_t *engine_ = nullptr;
    std::map<std::string, std::string> options_;
    std::list<HandlerSlot> slots_;  // stable addresses: the engine holds pointers to them
    pybind11::object log_;
    ProcessGuard guard_;
    std::shared_ptr<HeldEvents> held_;
};

void bind_engine(pybind11::module_ &m);

}  // namespace keywatch::python
