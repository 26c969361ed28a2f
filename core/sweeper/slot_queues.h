// SlotQueues: the slot queues one Sweeper serves, by due key - which queues it serves
// (served()), each created on first use (queue()), and the `keys` queue of each slot found
// without building its key (queue_of(), asked per live event and completion). Queues are
// never erased: a SlotQueue & stays valid for the owner's life. Also the chunk size of the
// sweeper's per-id script calls (kChunk).
// Loop thread only (owned by a Sweeper).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/stats.h"
#include "core/queue/queue_keys.h"
#include "core/redis/event_loop.h"
#include "core/sweeper/slot_queue.h"
#include "keywatch_types.h"

namespace keywatch {

// Ids per script call for live claims, acks, renewals, forgets: big enough to amortise a
// call, small enough that one call never blocks Redis for long. (A due claim takes up to
// sweep.batch, 1000 by default: its own bound.)
inline constexpr size_t kChunk = 500;

// Calls f(begin, end) for each run of at most kChunk elements of `all`.
template <typename T, typename F>
void for_chunks(const std::vector<T> &all, F &&f) {
    for (size_t i = 0; i < all.size(); i += kChunk)
        f(all.begin() + static_cast<long>(i),
          all.begin() + static_cast<long>(std::min(all.size(), i + kChunk)));
}

// A log line, about a queue when one is given (its name becomes the line's `queue` field).
using QueueLog = std::function<void(kw_log_level, const std::string &, const SlotQueue *)>;

class SlotQueues {
  public:
    struct Options {
        std::string ns, tag;  // tag: standalone's one slot tag
        bool cluster = false, track_keys = true;
        std::vector<std::string> task_queues;
        const EngineStats *stats = nullptr;  // each queue's record (null: none)
    };
    // `sweep` runs when a queue's timer fires. Standalone: every served queue is created
    // at once (one slot tag).
    SlotQueues(EventLoop &loop, Options opts, std::function<void(SlotQueue &)> sweep);
    SlotQueues(const SlotQueues &) = delete;
    SlotQueues &operator=(const SlotQueues &) = delete;

    // The queue `name` in the slot tag `tag`, created if it is served (null otherwise).
    SlotQueue *queue(const std::string &name, const std::string &tag);
    // The queue `name` of the slot item `id` lives in (see queue()); `slot`: the id's
    // slot if known (cluster), else -1.
    SlotQueue *queue_of(const std::string &name, const std::string &id, int slot = -1);
    // The queue queue_of() would give, if it exists already (null otherwise): never creates.
    SlotQueue *existing_of(const std::string &name, const std::string &id, int slot = -1);
    // Serves `name` as a key queue too (an adopt rule's queue: items are keys, swept like
    // `keys`). Standalone: created at once.
    void serve_key_queue(const std::string &name);
    // Whether the queue `name` (any tag) is served here.
    bool served(const std::string &name) const { return served_.count(name) > 0; }
    // Whether the queue `name` in the slot tag `tag` exists already.
    bool known(const std::string &name, const std::string &tag) const;
    template <typename F>
    void for_each(F &&f) {
        for (auto &kv : queues_) f(kv.second);
    }
    template <typename F>
    void for_each(F &&f) const {
        for (auto &kv : queues_) f(kv.second);
    }

  private:
    int slot_of(const std::string &id, int slot) const;  // standalone: 0
    const std::string &tag_of(int slot) const;

    EventLoop &loop_;
    Options opts_;
    std::function<void(SlotQueue &)> sweep_;
    std::unordered_map<std::string, SlotQueue> queues_;  // by due key
    // The `keys` queue of each slot (standalone: one), as queue_of() finds it often.
    std::vector<SlotQueue *> keys_by_slot_;
    std::set<std::string> served_;                  // names of the queues served
    std::set<std::string> key_queues_{kKeysQueue};  // those whose items are keys
};

}  // namespace keywatch
