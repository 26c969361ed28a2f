// InFlightGate: at most `limit` events of one handler in flight at once (in a call, or held
// and not yet completed): a plugin's set_max_in_flight. A worker that has more of the
// handler's events waits for room while the other workers go on; abort() (the engine
// stopping) ends every wait with nothing granted. Thread-safe; calls nothing while locked.
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
        cv_.wait(lock, [this] { return aborted_ || used_ < limit_; });
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
    // Every wait ends with 0, now and later.
    void abort() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            aborted_ = true;
        }
        cv_.notify_all();
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    const size_t limit_;
    size_t used_ = 0;
    bool aborted_ = false;
};

}  // namespace keywatch
