// EventLoop: one thread running a libevent event_base. Every Redis connection and every
// timer lives on this thread; other threads hand work over with post(). The thread blocks
// SIGPIPE: a write to a dead server is an error there, never the end of the process.
// post() is thread-safe; everything else is called from the owner or the loop thread as
// noted.
#pragma once

#include <event2/event.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/clock.h"

namespace keywatch {

struct EventDeleter {
    void operator()(event *ev) const { event_free(ev); }
};
using EventPtr = std::unique_ptr<event, EventDeleter>;

class EventLoop {
  public:
    EventLoop();
    ~EventLoop();  // stops the thread if running
    EventLoop(const EventLoop &) = delete;
    EventLoop &operator=(const EventLoop &) = delete;

    void start();  // owner thread
    // Runs every posted task still queued, then ends the loop and joins. Owner thread.
    void stop();
    // Run fn on the loop thread soon. Any thread. Returns false (and drops fn) once the
    // loop is stopping.
    bool post(std::function<void()> fn);
    // Run fn on the loop thread and wait for it; false if the loop is stopping. Must not
    // be called from the loop thread.
    bool run_sync(std::function<void()> fn);

    event_base *base() const { return base_; }
    bool in_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  private:
    static void on_wake(evutil_socket_t, short, void *arg);

    event_base *base_ = nullptr;
    EventPtr wake_;
    std::thread thread_;
    std::mutex mu_;
    std::vector<std::function<void()>> tasks_;
    bool stopping_ = false;
};

// A timer on the loop thread calling a function; re-armable. Loop thread only.
class Timer {
  public:
    Timer(event_base *base, std::function<void()> fn);
    void arm(int64_t delay_ms);
    void cancel();
    bool pending() const;

  private:
    static void on_fire(evutil_socket_t, short, void *arg);
    std::function<void()> fn_;
    EventPtr ev_;
};

}  // namespace keywatch
