// LeaseRenewal: renewal of the leases a Sweeper holds, and hold.timeout (see
// lease_renewal.h). Loop thread only.
#include "core/sweeper/lease_renewal.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "core/base/clock.h"

namespace keywatch {

LeaseRenewal::LeaseRenewal(EventLoop &loop, Options opts, NodeLink &link, SlotQueues &queues,
                           std::atomic<int64_t> &late_acks,
                           std::function<void(std::vector<Completion> &&)> release, QueueLog log)
    : opts_(std::move(opts)),
      link_(link),
      queues_(queues),
      late_acks_(late_acks),
      release_(std::move(release)),
      log_(std::move(log)),
      renew_timer_(loop.base(), [this] { renew_leases(); }) {}

void LeaseRenewal::start() {
    renew_timer_.arm(std::max<int64_t>(opts_.lease_ms / 3, 1));
}

void LeaseRenewal::stop() {
    renew_timer_.cancel();
}

void LeaseRenewal::renew_leases() {
    renew_timer_.arm(std::max<int64_t>(opts_.lease_ms / 3, 1));
    int64_t now = wall_ms();
    std::vector<Completion> overdue;
    queues_.for_each([&](SlotQueue &q) {
        // The lease members of the batches holding items within hold.timeout.
        std::set<uint64_t> seqs;
        for (auto &held : q.marks) {
            if (held.second.held == SlotQueue::Held::Handled) continue;
            int64_t claimed = held.second.claimed_ms;
            if (now - claimed < opts_.hold_timeout_ms) {
                seqs.insert(held.second.batch_seq);
                continue;
            }
            q.timed_out[held.first] = claimed;
            overdue.push_back({q.name, held.first, kRelease, "", q.slot, claimed});
        }
        // A completion of a timed-out claim that never comes is forgotten after a while
        // (Redis refuses it then anyway: the item is no longer ours).
        for (auto it = q.timed_out.begin(); it != q.timed_out.end();)
            it = now - it->second > 4 * opts_.hold_timeout_ms ? q.timed_out.erase(it) : ++it;
        std::vector<std::string> members;
        for (uint64_t seq : seqs) {
            auto b = q.batches.find(seq);
            if (b != q.batches.end())
                members.push_back(lease_member(opts_.owner, seq, b->second.b));
        }
        if (!members.empty()) renew_queue(q, std::move(members));
    });
    if (overdue.empty()) return;
    log_(KW_LOG_WARN,
         std::to_string(overdue.size()) + " item(s) of " + link_.endpoint() +
             " were held longer than hold.timeout (" + std::to_string(opts_.hold_timeout_ms) +
             "ms): released for redelivery; their completions will count as late "
             "(items.late_acks)",
         nullptr);
    release_(std::move(overdue));
}

void LeaseRenewal::renew_queue(SlotQueue &q, std::vector<std::string> &&members) {
    if (!link_.serving()) return;
    const int64_t sent = wall_ms();
    SlotQueue *qp = &q;  // queues are never erased
    for (size_t i = 0; i < members.size(); i += kChunk) {
        std::vector<std::string> argv = {std::to_string(opts_.lease_ms)};
        auto begin = members.begin() + static_cast<long>(i);
        auto end = members.begin() + static_cast<long>(std::min(members.size(), i + kChunk));
        argv.insert(argv.end(), std::make_move_iterator(begin), std::make_move_iterator(end));
        link_.eval(scripts::batch::kRenew, std::vector<std::string>{q.keys.leases}, std::move(argv),
                   [qp, sent](redisReply *r) {
                       // Their leases run at least a lease from when it went out (completions
                       // use it).
                       if (r->type == REDIS_REPLY_ARRAY)
                           qp->renewed_ms = std::max(qp->renewed_ms, sent);
                   });
    }
}

bool LeaseRenewal::late_after_hold_timeout(const Completion &c) {
    SlotQueue *q = queues_.queue_of(c.queue, c.id, c.slot);
    if (!q || q->timed_out.empty()) return false;
    auto it = q->timed_out.find(c.id);
    if (it == q->timed_out.end() || it->second != c.claimed_ms) return false;
    if (c.result == kRelease) {
        // Our own release at hold.timeout (the claim still held) goes out. Another, for
        // a claim already released, is dropped: the item may be ours again by a new claim
        // (the release script checks only the owner), which it would give back.
        const SlotQueue::Mark *h = q->held_mark(c.id);
        if (h && h->claimed_ms == c.claimed_ms) return false;
        q->timed_out.erase(it);
        return true;
    }
    q->timed_out.erase(it);
    late_acks_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

}  // namespace keywatch
