#include "core/redis/event_loop.h"

#include <event2/thread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <stdexcept>

#include "core/redis/sigpipe_guard.h"

namespace keywatch {

EventLoop::EventLoop() {
    static std::once_flag threads_enabled;
    std::call_once(threads_enabled, [] { evthread_use_pthreads(); });
    base_ = event_base_new();
    if (!base_) throw std::runtime_error("event_base_new failed");
    wake_.reset(event_new(base_, -1, 0, &EventLoop::on_wake, this));
}

EventLoop::~EventLoop() {
    stop();
    wake_.reset();
    event_base_free(base_);
}

void EventLoop::start() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = false;
    }
    thread_ = std::thread([this] {
        SigpipeGuard quiet;  // a write to a node that is gone is a lost connection
        event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY);
    });
}

void EventLoop::stop() {
    if (!thread_.joinable()) return;
    post([this] {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping_ = true;
        }
        event_base_loopbreak(base_);
    });
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.clear();
}

bool EventLoop::post(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return false;
        tasks_.push_back(std::move(fn));
    }
    event_active(wake_.get(), EV_READ, 0);
    return true;
}

bool EventLoop::run_sync(std::function<void()> fn) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    bool posted = post([&] {
        fn();
        std::lock_guard<std::mutex> lock(m);
        done = true;
        cv.notify_one();
    });
    if (!posted) return false;
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
    return true;
}

void EventLoop::on_wake(evutil_socket_t, short, void *arg) {
    auto *self = static_cast<EventLoop *>(arg);
    std::vector<std::function<void()>> batch;
    {
        std::lock_guard<std::mutex> lock(self->mu_);
        batch.swap(self->tasks_);
    }
    for (auto &fn : batch) fn();
}

Timer::Timer(event_base *base, std::function<void()> fn)
    : fn_(std::move(fn)), ev_(evtimer_new(base, &Timer::on_fire, this)) {}

void Timer::arm(int64_t delay_ms) {
    if (delay_ms < 0) delay_ms = 0;
    timeval tv{static_cast<time_t>(delay_ms / 1000),
               static_cast<suseconds_t>(delay_ms % 1000) * 1000};
    evtimer_add(ev_.get(), &tv);
}

void Timer::cancel() {
    evtimer_del(ev_.get());
}

bool Timer::pending() const {
    return evtimer_pending(ev_.get(), nullptr);
}

void Timer::on_fire(evutil_socket_t, short, void *arg) {
    static_cast<Timer *>(arg)->fn_();
}

}  // namespace keywatch
