// InFlightGate: at most `limit` events of one handler in flight at once (in a call, or held
// and not yet completed): a plugin's set_max_in_flight. An event that finds no room is not
// waited for: it is parked (the engine's own Hold on it, core/engine/hold.h) in the gate's
// FIFO, and the worker goes on. When places free up, release() hands the parked events
// back, oldest first, each with its place taken, to be called on a worker. A parked event
// past its expiry (hold.timeout: the sweeper released it) is taken out of the queue, at the
// next park() or the engine's next look (expire(), every lease/3).
// abort() (the engine stopping) gives every parked event back and refuses new ones. It
// counts the parked events (the gauge handler.waiting.<handler>). Thread-safe; calls
// nothing while locked and never destroys a Hold: what it gives back, the caller disposes
// of.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <vector>

#include "core/engine/hold.h"

namespace keywatch {

class InFlightGate {
  public:
    struct Parked {
        std::shared_ptr<Hold> hold;
        int64_t expires_ms = 0;  // wall clock; 0: never
    };
    enum Entry { ENTERED, FULL, ABORTED };

    explicit InFlightGate(uint32_t limit) : limit_(limit) {}

    // Takes up to `want` places now, none if events are parked (they go first). *took: how
    // many (0 when FULL or ABORTED).
    Entry enter(size_t want, size_t *took) {
        std::lock_guard<std::mutex> lock(mu_);
        *took = 0;
        if (aborted_) return ABORTED;
        if (!parked_.empty() || used_ >= limit_) return FULL;
        *took = std::min<size_t>(want, limit_ - used_);
        used_ += *took;
        return ENTERED;
    }
    // What park() did. ENTERED: there was room and nothing parked: p's place is taken
    // and p is handed back in run (call it now). ABORTED: p is handed back in run (release
    // it). FULL: p is parked. expired: parked events past their expiry, taken out.
    // say_full: FULL, and the first time in say_every_ms (or ever): for a log line.
    struct Parking {
        Entry entry = FULL;
        Parked run;
        std::vector<Parked> expired;
        bool say_full = false;
    };
    // Parks p behind the others, in one step with the look for expired ones and the
    // rate-limited note of a full gate.
    Parking park(Parked p, int64_t now_ms, int64_t say_every_ms) {
        Parking out;
        std::lock_guard<std::mutex> lock(mu_);
        take_expired(now_ms, &out.expired);
        if (aborted_ || (parked_.empty() && used_ < limit_)) {
            if (!aborted_) used_++;
            out.run = std::move(p);
            out.entry = aborted_ ? ABORTED : ENTERED;
            return out;
        }
        parked_.push_back(std::move(p));
        if (!noted_ || now_ms - noted_at_ms_ >= say_every_ms) {
            noted_ = true;
            noted_at_ms_ = now_ms;
            out.say_full = true;
        }
        return out;
    }
    // The parked events past their expiry at now_ms, taken out (the timer's look).
    std::vector<Parked> expire(int64_t now_ms) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Parked> expired;
        take_expired(now_ms, &expired);
        return expired;
    }
    // k places are free again: calls that returned without holding, or a Hold that ended.
    // Returns the parked events that now have a place, oldest first.
    std::vector<Parked> release(size_t k) {
        std::lock_guard<std::mutex> lock(mu_);
        used_ -= std::min<size_t>(k, used_);
        std::vector<Parked> ready;
        while (!aborted_ && used_ < limit_ && !parked_.empty()) {
            used_++;
            ready.push_back(std::move(parked_.front()));
            parked_.pop_front();
        }
        return ready;
    }
    // The events parked now.
    size_t waiting() const {
        std::lock_guard<std::mutex> lock(mu_);
        return parked_.size();
    }
    size_t limit() const { return limit_; }
    // From now on nothing enters or is parked; returns the parked events (to release).
    std::vector<Parked> abort() {
        std::lock_guard<std::mutex> lock(mu_);
        aborted_ = true;
        std::vector<Parked> all(std::make_move_iterator(parked_.begin()),
                                std::make_move_iterator(parked_.end()));
        parked_.clear();
        return all;
    }

  private:
    void take_expired(int64_t now_ms, std::vector<Parked> *expired) {  // under mu_
        for (auto it = parked_.begin(); it != parked_.end();) {
            if (it->expires_ms == 0 || it->expires_ms > now_ms) {
                ++it;
                continue;
            }
            expired->push_back(std::move(*it));
            it = parked_.erase(it);
        }
    }

    mutable std::mutex mu_;
    const size_t limit_;
    size_t used_ = 0;
    std::deque<Parked> parked_;
    bool aborted_ = false, noted_ = false;
    int64_t noted_at_ms_ = 0;
};

}  // namespace keywatch
