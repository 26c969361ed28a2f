// Dispatcher: a bounded queue of events and the worker threads that run handlers, so a
// slow handler never stalls the event loop. push() is called by the loop thread (batches,
// one lock per batch); workers pop batches too. Thread-safe as documented per method.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/event.h"

namespace keywatch {

class Dispatcher {
  public:
    // Runs every handler an event matches; called on a worker thread.
    using Handle = std::function<void(Event &)>;

    Dispatcher(size_t capacity, int workers, Handle handle);
    ~Dispatcher();  // stop(0) if still running
    Dispatcher(const Dispatcher &) = delete;
    Dispatcher &operator=(const Dispatcher &) = delete;

    void start();  // owner thread
    // Queue events (moved from batch, which is left empty). Unless force, events that do
    // not fit are dropped; returns how many. Claimed items are pushed with force: their
    // number is already bounded by room(). Any thread.
    size_t push(std::vector<Event> &batch, bool force = false);
    // Free places in the queue (0 when full or over). Any thread.
    size_t room() const;
    // Let queued and running handlers finish until deadline_ms from now, then drop what is
    // still queued and join the workers (a handler still running is waited for). Returns
    // true if everything finished in time; *abandoned gets the number dropped. Owner thread.
    bool stop(int64_t deadline_ms, size_t *abandoned);

    size_t queued() const;

  private:
    void work();

    const size_t capacity_;
    const int nworkers_;
    Handle handle_;
    mutable std::mutex mu_;
    std::condition_variable not_empty_, idle_;
    std::deque<Event> queue_;
    int busy_ = 0;  // workers running handlers
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace keywatch
