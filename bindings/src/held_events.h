// Deferred completion for asyncio (keywatch.aio): async handlers hold their event
// (kw_event_hold) on the engine's worker thread, without the GIL, and queue the hold here;
// the asyncio loop is woken through an eventfd (loop.add_reader) once per batch, takes
// every queued hold, and completes each (kw_event_complete) from its own thread when the
// coroutine ends. The number of holds not yet completed is bounded: past the bound a
// worker waits (backpressure: the rest stays in Redis).
// Thread-safety: HeldEvents is thread-safe; a Hold is used with the GIL held.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "bindings/src/capi_seam.h"

namespace keywatch::python {

class HeldEvents {
  public:
    explicit HeldEvents(size_t limit);  // throws StatusError if no eventfd can be made
    ~HeldEvents();
    HeldEvents(const HeldEvents &) = delete;
    HeldEvents &operator=(const HeldEvents &) = delete;

    int fd() const { return fd_; }
    // Worker thread: waits for room; false when closed (then nothing is held).
    bool reserve();
    // Worker thread, after reserve(): queues a hold of handler `handler` and wakes the loop.
    void push(int handler, kw_hold_t *hold);
    // Loop thread: every queued hold, in order; clears the wake-up.
    std::vector<std::pair<int, kw_hold_t *>> take();
    // A reserved place is free again (a hold completed or released).
    void release_one();
    // Refuse new holds and wake waiting workers (engine stopping).
    void close();
    // Accept holds again (engine restarted).
    void open();

  private:
    void close_fd();
    std::mutex mu_;
    std::condition_variable room_;
    std::deque<std::pair<int, kw_hold_t *>> queue_;
    size_t outstanding_ = 0;
    size_t limit_;
    bool closed_ = false;
    int fd_ = -1;
};

// keywatch._keywatch.Hold: one held event, completed once from the loop's thread.
class Hold {
  public:
    Hold(kw_hold_t *hold, std::shared_ptr<HeldEvents> held);
    ~Hold();
    Hold(const Hold &) = delete;
    Hold &operator=(const Hold &) = delete;

    // The Event over the held copy; EventCompleted once the hold is completed.
    pybind11::object event();
    // result: 0 ack, 1 retry, 2 reject; retry_delay_ms < 0: the usual backoff. False when
    // the engine had stopped (the item went back to its queue). Raises on a second call.
    bool complete(int result, std::optional<std::string> reason, int64_t retry_delay_ms);

  private:
    void finish();
    kw_hold_t *hold_;
    std::shared_ptr<HeldEvents> held_;
    pybind11::object event_;
};

void bind_hold(pybind11::module_ &m);

}  // namespace keywatch::python
