// InFlightGate: at most `limit` events of one handler in flight at once (in a call, or held
// and not yet completed): a plugin's set_max_in_flight. A worker that has more of the
// handler's events waits for room while the other workers go on; abort() (the engine
// stopping) ends every wait with nothing granted. It counts the events waiting (the gauge
// handler.waiting.<handler>). Thread-safe; calls nothing while locked.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace keywatch {

class InFlightGate {
  public:
    explicit InFlightGate(uint32_t limit) : limit_(limit) {}

    // Waits until at least one place is free, then takes up to `want`. 0: aborted.
    size_t acquire(size_t want) {
        std::unique_lock<std::mutex> lock(mu_);
        if (!aborted_ && used_ >= limit_) {
            waiting_ += want;
            cv_.wait(lock, [this] { return aborted_ || used_ < limit_; });
            waiting_ -= want;
        }
        if (aborted_) return 0;
        const size_t k = std::min<size_t>(want, limit_ - used_);
        used_ += k;
        return k;
    }
    // k places are free again: calls that returned without holding, or a Hold that ended.
    void release(size_t k) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            used_ -= std::min<size_t>(k, used_);
        }
        cv_.notify_all();
    }
    // The events of the workers waiting for room now.
    size_t waiting() const {
        std::lock_guard<std::mutex> lock(mu_);
        return waiting_;
    }
    // True when the gate is full now and this was last true at least every_ms before
    // now_ms (or never): for a log line about a full gate, rate-limited.
    bool note_full(int64_t now_ms, int64_t every_ms) {
        std::lock_guard<std::mutex> lock(mu_);
        if (aborted_ || used_ < limit_ || (noted_ && now_ms - noted_at_ms_ < every_ms))
            return false;
        noted_ = true;
        noted_at_ms_ = now_ms;
        return true;
    }
    size_t limit() const { return limit_; }
    // Every wait ends with 0, now and later.
    void abort() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            aborted_ = true;
        }
        cv_.notify_all();
    }

  private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    const size_t limit_;
    size_t used_ = 0, waiting_ = 0;
    bool aborted_ = false, noted_ = false;
    int64_t noted_at_ms_ = 0;
};

}  // namespace keywatch
