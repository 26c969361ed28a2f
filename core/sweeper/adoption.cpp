// Adoption (see adoption.h): adopt calls per slot queue, their replies counted. Loop thread
// only.
#include "core/sweeper/adoption.h"

#include <map>
#include <tuple>
#include <unordered_set>

#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/redis/reply_error.h"
#include "core/redis/reply_text.h"

namespace keywatch {

// The calls of one add() on their way, and what they found.
struct Adoption::Pending {
    Answered answered;
    size_t left = 1;  // calls, plus one while add() is still sending
    AdoptTally tally;
    void done() {
        if (--left == 0 && answered) answered(tally);
    }
};

Adoption::Adoption(Options opts, NodeLink &link, SlotQueues &queues, SweeperCounters &counters,
                   QueueLog log)
    : opts_(std::move(opts)),
      link_(link),
      queues_(queues),
      counters_(counters),
      log_(std::move(log)) {
    for (const AdoptRule &r : opts_.rules.rules()) queues_.serve_key_queue(r.queue);
}

void Adoption::add(std::vector<AdoptKey> &&keys, Answered answered) {
    auto pending = std::make_shared<Pending>();
    pending->answered = std::move(answered);
    if (!link_.serving()) {
        pending->tally.not_adopted = static_cast<int64_t>(keys.size());
        keep(std::move(keys));
        pending->done();
        return;
    }
    // Per (rule queue's slot queue, snapshot), each key once.
    std::map<std::tuple<SlotQueue *, SlotQueue *, bool>, std::vector<AdoptKey>> groups;
    std::unordered_set<std::string> seen;
    const auto &rules = opts_.rules.rules();
    for (AdoptKey &a : keys) {
        if (a.rule < 0 || static_cast<size_t>(a.rule) >= rules.size() || !seen.insert(a.key).second)
            continue;
        const AdoptRule &rule = rules[static_cast<size_t>(a.rule)];
        SlotQueue *p = queues_.queue_of(rule.queue, a.key, a.slot);
        SlotQueue *k = rule.queue != kKeysQueue && queues_.served(kKeysQueue)
                           ? queues_.queue_of(kKeysQueue, a.key, a.slot)
                           : nullptr;
        if (!p) continue;
        groups[{p, k, rule.snapshot}].push_back(std::move(a));
    }
    for (auto &[where, group] : groups)
        for (size_t i = 0; i < group.size(); i += kAdoptChunk) {
            auto end = group.begin() + static_cast<long>(std::min(group.size(), i + kAdoptChunk));
            send(
                *std::get<0>(where), std::get<1>(where), std::get<2>(where),
                std::vector<AdoptKey>(std::make_move_iterator(group.begin() + static_cast<long>(i)),
                                      std::make_move_iterator(end)),
                pending);
        }
    pending->done();
}

void Adoption::send(SlotQueue &p, SlotQueue *k, bool snapshot, std::vector<AdoptKey> &&keys,
                    const std::shared_ptr<Pending> &pending) {
    std::vector<std::string> kv = {p.keys.due, p.keys.data};
    if (k) kv.insert(kv.end(), {k->keys.due, k->keys.data});
    for (const AdoptKey &a : keys) kv.push_back(a.key);
    auto chunk = std::make_shared<std::vector<AdoptKey>>(std::move(keys));
    pending->left++;
    SlotQueue *pp = &p;
    bool sent = link_.eval(scripts::kAdopt, kv, {snapshot ? "1" : "0", k ? "2" : "1", "0"},
                           [this, pp, chunk, pending](redisReply *r) {
                               on_reply(*pp, *chunk, r, &pending->tally);
                               pending->done();
                           });
    if (!sent) {
        pending->tally.not_adopted += static_cast<int64_t>(chunk->size());
        keep(std::move(*chunk));
        pending->done();
    }
}

void Adoption::on_reply(SlotQueue &p, std::vector<AdoptKey> &keys, redisReply *r,
                        AdoptTally *tally) {
    const int64_t n = static_cast<int64_t>(keys.size());
    if (!r) {  // defensive: RedisConn drops a lost connection's callbacks, so not seen
        tally->not_adopted += n;
        drop(keys.size());
        return;
    }
    const ReplyError kind = classify(r);
    if (kind == ReplyError::Loading || whole_cluster_down(r)) {
        // The server (or the whole cluster) serves nothing now: the keys wait here and go
        // again once it serves (the link polls it, as for the queues).
        tally->not_adopted += n;
        keep(std::move(keys));
        if (kind == ReplyError::ClusterDown) link_.server_waits(kind, p.keys.due);
        return;
    }
    switch (kind) {
        case ReplyError::ClusterDown:
            // This slot has no master: dropped; its next master rescans when it takes the
            // slot over (Fanout::apply).
            tally->not_adopted += n;
            drop(keys.size());
            return;
        case ReplyError::Moved:
        case ReplyError::Ask:
        case ReplyError::TryAgain:
            // The slot is on the move or served elsewhere now: nothing was written. Sent
            // again to the slot's master after a topology (the script is idempotent), else
            // dropped and rescanned.
            tally->not_adopted += n;
            if (opts_.on_unrouted)
                opts_.on_unrouted(std::move(keys));
            else
                drop(keys.size());
            return;
        default:
            break;
    }
    if (r->type != REDIS_REPLY_STRING || r->len != keys.size()) {
        log_(KW_LOG_ERROR, "adopt failed: " + reply_to_string(r) + "; a catch-up scan follows", &p);
        tally->not_adopted += n;
        drop(keys.size());
        return;
    }
    for (size_t i = 0; i < keys.size(); i++) {
        switch (r->str[i]) {
            case 'a':
            case 'S':
                tally->adopted++;
                counters_.adopt_adopted.fetch_add(1, std::memory_order_relaxed);
                break;
            case 'r':
                tally->tracked++;
                counters_.adopt_rescheduled.fetch_add(1, std::memory_order_relaxed);
                break;
            case '=':
                tally->tracked++;
                break;
            case 'u':
                tally->untracked++;
                counters_.adopt_untracked.fetch_add(1, std::memory_order_relaxed);
                break;
            case 'g':
                tally->gone++;
                if (keys[i].from_event)
                    counters_.adopt_late.fetch_add(1, std::memory_order_relaxed);
                break;
            default:  // n, x
                tally->not_adopted++;
                break;
        }
    }
}

void Adoption::keep(std::vector<AdoptKey> &&keys) {
    size_t room = kMaxAdoptWaiting - std::min(kMaxAdoptWaiting, waiting_.size());
    size_t kept = std::min(room, keys.size());
    for (size_t i = 0; i < kept; i++) waiting_.push_back(std::move(keys[i]));
    if (kept < keys.size()) drop(keys.size() - kept);
}

void Adoption::drop(size_t count) {
    if (count == 0) return;
    counters_.adopt_dropped.fetch_add(static_cast<int64_t>(count), std::memory_order_relaxed);
    if (opts_.on_dropped) opts_.on_dropped();
}

std::vector<AdoptKey> Adoption::take_waiting() {
    std::vector<AdoptKey> out;
    out.swap(waiting_);
    return out;
}

void Adoption::resume() {
    if (waiting_.empty()) return;
    std::vector<AdoptKey> keys;
    keys.swap(waiting_);
    add(std::move(keys));
}

}  // namespace keywatch
