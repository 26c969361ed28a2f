#include "core/engine/dispatcher.h"

#include <algorithm>
#include <chrono>

namespace keywatch {

// Workers take up to this many events per lock: fewer handoffs under a flood, while a
// take stays small enough that other workers get work too.
static constexpr size_t kTakeBatch = 64;
// Emptied batch vectors kept for reuse.
static constexpr size_t kMaxSpare = 16;

Dispatcher::Dispatcher(size_t capacity, int workers, Handle handle)
    : capacity_(capacity), nworkers_(workers), handle_(std::move(handle)) {}

Dispatcher::~Dispatcher() {
    std::vector<Event> ignored;
    stop(0, &ignored);
}

void Dispatcher::start() {
    stopping_ = false;
    takes_.clear();
    for (int i = 0; i < nworkers_; i++) takes_.push_back(std::make_unique<Take>());
    for (int i = 0; i < nworkers_; i++)
        threads_.emplace_back([this, i] { work(*takes_[static_cast<size_t>(i)]); });
}

size_t Dispatcher::push(std::vector<Event> &batch, bool force) {
    if (batch.empty()) return 0;
    size_t dropped = 0;
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {
            dropped = batch.size();
            batch.clear();
            return dropped;
        }
        const size_t waiting = count_ + parked_;
        if (!force && waiting + batch.size() > capacity_) {
            size_t fits = waiting >= capacity_ ? 0 : capacity_ - waiting;
            dropped = batch.size() - fits;
            batch.resize(fits);
        }
        if (!batch.empty()) {
            count_ += batch.size();
            batches_.push_back(std::move(batch));
            batch = std::vector<Event>();
            if (!spare_.empty()) {
                batch.swap(spare_.back());  // its capacity comes back to the loop
                spare_.pop_back();
            }
            // One wake-up per batch at most, and none while every worker is busy: a
            // worker that finishes looks at the queue before it sleeps.
            wake = sleepers_ > 0 && !wake_pending_;
            if (wake) wake_pending_ = true;
        }
    }
    if (wake) not_empty_.notify_one();
    return dropped;
}

size_t Dispatcher::room() const {
    std::lock_guard<std::mutex> lock(mu_);
    // The events of the takes being handled too: those a handler at its max_in_flight will
    // park, before they are counted as parked.
    const size_t waiting = count_ + parked_ + taken_;
    return waiting >= capacity_ ? 0 : capacity_ - waiting;
}

void Dispatcher::parked(int64_t delta) {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = delta < 0 ? parked_ - std::min(parked_, static_cast<size_t>(-delta))
                        : parked_ + static_cast<size_t>(delta);
}

size_t Dispatcher::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
}

void Dispatcher::post(std::function<void()> task) {
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mu_);
        tasks_.push_back(std::move(task));
        wake = sleepers_ > 0 && !wake_pending_;
        if (wake) wake_pending_ = true;
    }
    if (wake) not_empty_.notify_one();
}

void Dispatcher::work(Take &take) {
    std::vector<Event> &mine = take.events;
    mine.reserve(kTakeBatch);
    std::unique_lock<std::mutex> lock(mu_);
    std::function<void()> task;
    while (next(lock, mine, &task)) {
        busy_++;
        lock.unlock();
        if (task) {
            task();
            task = nullptr;  // destroyed here, unlocked
        } else {
            handle_(mine.data(), mine.size());
        }
        lock.lock();
        taken_ -= mine.size();
        mine.clear();
        busy_--;
        if (idle()) idle_.notify_all();
    }
}

bool Dispatcher::next(std::unique_lock<std::mutex> &lock, std::vector<Event> &mine,
                      std::function<void()> *task) {
    if (count_ == 0 && tasks_.empty() && !stopping_) {
        sleepers_++;
        not_empty_.wait(lock, [this] { return count_ > 0 || !tasks_.empty() || stopping_; });
        sleepers_--;
    }
    if (stopping_ && count_ == 0) return false;  // stopping and drained (tasks: dropped)
    // Whoever takes work answers any wake-up in flight: the notified worker may find
    // nothing left and sleep again, and the next push must be free to wake someone.
    wake_pending_ = false;
    if (!tasks_.empty()) {
        *task = std::move(tasks_.front());
        tasks_.pop_front();
    } else {
        // A fair share, so that one slow handler holds up as few other events as possible,
        // in order, from as many pushed batches as it takes (on a cluster each claim reply
        // is pushed on its own, and handlers that batch want the whole share).
        size_t share =
            (count_ + static_cast<size_t>(nworkers_) - 1) / static_cast<size_t>(nworkers_);
        const size_t want = std::min(kTakeBatch, share);
        while (mine.size() < want && !batches_.empty()) {
            std::vector<Event> &front = batches_.front();
            size_t n = std::min(want - mine.size(), front.size() - front_taken_);
            for (size_t i = 0; i < n; i++) mine.push_back(std::move(front[front_taken_ + i]));
            front_taken_ += n;
            count_ -= n;
            taken_ += n;
            if (front_taken_ == front.size()) {
                front.clear();
                if (spare_.size() < kMaxSpare) spare_.push_back(std::move(front));
                batches_.pop_front();
                front_taken_ = 0;
            }
        }
    }
    // More left: let a sleeping worker help.
    if ((count_ > 0 || !tasks_.empty()) && sleepers_ > 0 && !wake_pending_) {
        wake_pending_ = true;
        not_empty_.notify_one();
    }
    return true;
}

bool Dispatcher::stop(int64_t deadline_ms, std::vector<Event> *abandoned) {
    bool finished = wait_idle(deadline_ms);
    shutdown(abandoned);
    return finished;
}

bool Dispatcher::wait_idle(int64_t deadline_ms) {
    if (threads_.empty()) return true;
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_for(lock, std::chrono::milliseconds(deadline_ms), [this] { return idle(); });
}

void Dispatcher::shutdown(std::vector<Event> *abandoned) {
    abandoned->clear();
    std::deque<std::function<void()>> dropped;  // destroyed unlocked, after the join
    if (threads_.empty()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        dropped.swap(tasks_);
        for (auto &b : batches_) {
            for (size_t i = front_taken_; i < b.size(); i++) abandoned->push_back(std::move(b[i]));
            front_taken_ = 0;
        }
        batches_.clear();
        count_ = 0;
        stopping_ = true;
    }
    not_empty_.notify_all();
    for (auto &t : threads_) t.join();
    threads_.clear();
}

}  // namespace keywatch
