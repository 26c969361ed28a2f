#include "core/dispatcher.h"

#include <chrono>

namespace keywatch {

// Workers take up to this many events per lock: fewer handoffs under a flood, while a
// batch stays small enough that other workers get work too.
static constexpr size_t kTakeBatch = 32;

Dispatcher::Dispatcher(size_t capacity, int workers, Handle handle)
    : capacity_(capacity), nworkers_(workers), handle_(std::move(handle)) {}

Dispatcher::~Dispatcher() {
    size_t ignored;
    stop(0, &ignored);
}

void Dispatcher::start() {
    stopping_ = false;
    for (int i = 0; i < nworkers_; i++) threads_.emplace_back([this] { work(); });
}

size_t Dispatcher::push(std::vector<Event> &batch, bool force) {
    size_t dropped = 0, offered = batch.size();
    bool was_empty;
    {
        std::lock_guard<std::mutex> lock(mu_);
        was_empty = queue_.empty();
        for (auto &ev : batch) {
            if (stopping_ || (queue_.size() >= capacity_ && !force)) {
                dropped++;
                continue;
            }
            queue_.push_back(std::move(ev));
        }
    }
    batch.clear();
    // Workers that find the queue non-empty keep draining it, so only a transition from
    // empty needs a wake-up; a large batch wakes everyone.
    if (was_empty) {
        if (offered > kTakeBatch)
            not_empty_.notify_all();
        else
            not_empty_.notify_one();
    }
    return dropped;
}

size_t Dispatcher::room() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size() >= capacity_ ? 0 : capacity_ - queue_.size();
}

size_t Dispatcher::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

void Dispatcher::work() {
    std::vector<Event> mine;
    mine.reserve(kTakeBatch);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        not_empty_.wait(lock, [this] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping and drained
        size_t n = std::min(kTakeBatch, (queue_.size() + nworkers_ - 1) / nworkers_);
        for (size_t i = 0; i < n; i++) {
            mine.push_back(std::move(queue_.front()));
            queue_.pop_front();
        }
        if (!queue_.empty()) not_empty_.notify_one();
        busy_++;
        lock.unlock();
        for (auto &ev : mine) handle_(ev);
        mine.clear();
        lock.lock();
        busy_--;
        if (queue_.empty() && busy_ == 0) idle_.notify_all();
    }
}

bool Dispatcher::stop(int64_t deadline_ms, size_t *abandoned) {
    *abandoned = 0;
    if (threads_.empty()) return true;
    bool finished;
    {
        std::unique_lock<std::mutex> lock(mu_);
        finished = idle_.wait_for(lock, std::chrono::milliseconds(deadline_ms),
                                  [this] { return queue_.empty() && busy_ == 0; });
        *abandoned = queue_.size();
        queue_.clear();
        stopping_ = true;
    }
    not_empty_.notify_all();
    for (auto &t : threads_) t.join();
    threads_.clear();
    return finished;
}

}  // namespace keywatch
