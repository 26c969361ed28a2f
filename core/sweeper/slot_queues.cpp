// SlotQueues: the slot queues a Sweeper serves (see slot_queues.h). Loop thread only.
#include "core/sweeper/slot_queues.h"

#include <memory>

#include "core/queue/queue_keys.h"
#include "core/redis/slots.h"

namespace keywatch {

SlotQueues::SlotQueues(EventLoop &loop, Options opts, std::function<void(SlotQueue &)> sweep)
    : loop_(loop), opts_(std::move(opts)), sweep_(std::move(sweep)) {
    if (opts_.track_keys) served_.insert(kKeysQueue);
    keys_by_slot_.assign(opts_.cluster ? kSlotCount : 1, nullptr);
    served_.insert(opts_.task_queues.begin(), opts_.task_queues.end());
    if (!opts_.cluster)
        for (auto &name : served_) queue(name, opts_.tag);
}

SlotQueue *SlotQueues::queue(const std::string &name, const std::string &tag) {
    if (!served_.count(name)) return nullptr;
    std::string due = QueueKeys::due_key(opts_.ns, name, tag);
    auto it = queues_.find(due);
    if (it != queues_.end()) return &it->second;
    QueueKeys keys = QueueKeys::make(opts_.ns, name, tag);
    SlotQueue &q = queues_[due];
    q.name = name;
    q.tag = tag;
    q.keys = keys;
    q.is_keys = key_queues_.count(name) > 0;
    q.stats = opts_.stats ? opts_.stats->queue(name) : nullptr;
    q.slot = opts_.cluster ? key_slot("{" + tag + "}") : 0;
    q.timer = std::make_unique<Timer>(loop_.base(), [this, &q] { sweep_(q); });
    // The slot index holds the standard queue of each slot only (a stray due key with
    // another tag that hashes to the same slot, found by a scan, is swept on its own).
    if (name == kKeysQueue && tag == (opts_.cluster ? SlotTags::instance().tag(q.slot) : opts_.tag))
        keys_by_slot_[static_cast<size_t>(q.slot)] = &q;
    return &q;
}

int SlotQueues::slot_of(const std::string &id, int slot) const {
    if (!opts_.cluster) return 0;
    return slot < 0 ? key_slot(id) : slot;
}

const std::string &SlotQueues::tag_of(int slot) const {
    return opts_.cluster ? SlotTags::instance().tag(slot) : opts_.tag;
}

SlotQueue *SlotQueues::queue_of(const std::string &name, const std::string &id, int slot) {
    slot = slot_of(id, slot);
    if (name != kKeysQueue || !opts_.track_keys) return queue(name, tag_of(slot));
    SlotQueue *&q = keys_by_slot_[static_cast<size_t>(slot)];
    if (!q) q = queue(name, tag_of(slot));
    return q;
}

SlotQueue *SlotQueues::existing_of(const std::string &name, const std::string &id, int slot) {
    slot = slot_of(id, slot);
    return known(name, tag_of(slot)) ? queue_of(name, id, slot) : nullptr;
}

void SlotQueues::serve_key_queue(const std::string &name) {
    key_queues_.insert(name);
    if (served_.insert(name).second && !opts_.cluster) queue(name, opts_.tag);
}

bool SlotQueues::known(const std::string &name, const std::string &tag) const {
    return queues_.count(QueueKeys::due_key(opts_.ns, name, tag)) > 0;
}

}  // namespace keywatch
