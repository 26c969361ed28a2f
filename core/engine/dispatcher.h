// Dispatcher: a bounded queue of events and the worker threads that run handlers, so a
// slow handler never stalls the event loop. The loop hands over whole batches (one lock,
// at most one wake-up per batch, and the batch's vector is recycled rather than copied
// event by event); a worker takes its fair share (up to kTakeBatch events, across as many
// handed-over batches as that needs) in order, hands the whole take to the engine, and
// wakes a sleeping worker only when some are left. Besides events, it runs posted tasks
// (an event parked at a handler's max_in_flight that now has room), before taking events.
// Thread-safe as documented per method.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/event.h"

namespace keywatch {

class Dispatcher {
  public:
    // Runs every handler each event of a take matches; called on a worker thread.
    using Handle = std::function<void(Event *events, size_t n)>;

    Dispatcher(size_t capacity, int workers, Handle handle);
    ~Dispatcher();  // stop(0) if still running
    Dispatcher(const Dispatcher &) = delete;
    Dispatcher &operator=(const Dispatcher &) = delete;

    void start();  // owner thread
    // Queue events (taken from batch, which is left empty, possibly with another vector's
    // capacity). Unless force, events that do not fit are dropped; returns how many.
    // Claimed items are pushed with force: their number is already bounded by room().
    // Any thread.
    size_t push(std::vector<Event> &batch, bool force = false);
    // Runs task on a worker, before the events queued. Any thread, even under a lock the
    // task's destructor takes: a task is destroyed on a worker once run, or by shutdown()
    // or the destructor (not run) if the dispatcher stops first.
    void post(std::function<void()> task);
    // Places free for claims (0 when full or over): the queued events, those parked
    // outside it (see parked) and those in the workers' takes counted in. Any thread.
    size_t room() const;
    // delta events more (fewer) wait outside the queue, parked at a handler's
    // max_in_flight: they take places as queued events do, so that claims and live events
    // stop at the same bound. Any thread.
    void parked(int64_t delta);
    // Let queued and running handlers finish until deadline_ms from now, then take what is
    // still queued out (into *abandoned, in order) and join the workers (a handler still
    // running is waited for). Returns true if everything finished in time. Owner thread.
    bool stop(int64_t deadline_ms, std::vector<Event> *abandoned);
    // stop() in two steps, so that the engine can act in between (end the waits of its
    // in-flight gates): wait_idle waits until nothing is queued or running, at most
    // deadline_ms (true: idle); shutdown takes the queued rest out, drops the tasks not
    // run and joins. Owner thread.
    bool wait_idle(int64_t deadline_ms);
    void shutdown(std::vector<Event> *abandoned);

    size_t queued() const;

  private:
    // A worker's current take: the events it took from the queue.
    struct Take {
        std::vector<Event> events;
    };

    void work(Take &take);
    // The next task or take; false: stopping and drained. With mu_ held (lock).
    bool next(std::unique_lock<std::mutex> &lock, std::vector<Event> &mine,
              std::function<void()> *task);
    bool idle() const { return count_ == 0 && tasks_.empty() && busy_ == 0; }  // under mu_

    const size_t capacity_;
    const int nworkers_;
    Handle handle_;
    mutable std::mutex mu_;
    std::condition_variable not_empty_, idle_;
    std::deque<std::vector<Event>> batches_;   // FIFO of batches; the front one is partly taken
    size_t front_taken_ = 0;                   // events already taken from batches_.front()
    size_t count_ = 0;                         // events queued in all
    size_t parked_ = 0;                        // events parked outside (parked())
    size_t taken_ = 0;                         // events in the workers' takes now
    std::deque<std::function<void()>> tasks_;  // posted, not run yet
    std::vector<std::vector<Event>> spare_;    // emptied batch vectors, for the loop to reuse
    int busy_ = 0;                             // workers running handlers
    int sleepers_ = 0;                         // workers waiting for work
    bool wake_pending_ = false;                // a notify went out and no worker woke yet
    bool stopping_ = false;
    std::vector<std::thread> threads_;
    std::vector<std::unique_ptr<Take>> takes_;  // one per worker
};

}  // namespace keywatch
