// ClusterArrivals: where a cluster's slot queues are served, and finding those with items
// on this master (see cluster_arrivals.h). Loop thread only.
#include "core/sweeper/cluster_arrivals.h"

#include <algorithm>
#include <iterator>

#include "core/base/backoff.h"
#include "core/base/clock.h"
#include "core/queue/queue_keys.h"
#include "core/redis/reply_error.h"
#include "core/queue/reply_ms.h"

namespace keywatch {

ClusterArrivals::ClusterArrivals(EventLoop &loop, Options opts, NodeLink &link, SlotQueues &queues,
                                 Hooks hooks)
    : opts_(std::move(opts)),
      link_(link),
      queues_(queues),
      hooks_(std::move(hooks)),
      scan_timer_(loop.base(), [this] { scan("0"); }),
      dirty_timer_(loop.base(), [this] { sweep_dirty(); }) {}

void ClusterArrivals::start() {
    active_ = true;
}

void ClusterArrivals::stop() {
    active_ = false;
    scan_timer_.cancel();
    dirty_timer_.cancel();
}

void ClusterArrivals::scan_all() {
    if (opts_.cluster) scan("0");
}

void ClusterArrivals::connection_lost() {
    scanning_ = false;
}

bool ClusterArrivals::redirected(SlotQueue &q, const redisReply *r) {
    const ReplyError kind = classify(r);
    // A slot queue whose keys were restored here is swept again while this master still
    // answers MOVED, for cluster.migration_wait (redis-cli moves a slot in well under it).
    if (kind == ReplyError::Moved && q.where == SlotQueue::Where::Arriving &&
        wall_ms() - q.arrival.since_ms < opts_.migration_wait_ms) {
        // Migrating in: this master serves the slot once the migration's last step
        // (SETSLOT NODE) is done, whatever order its keys came in. Look again soon.
        if (!q.arrival.retry_ms && opts_.on_moved) opts_.on_moved();
        int64_t retry = Backoff{20, 1000}.after(q.arrival.retry_ms.value_or(0));
        q.arrival.retry_ms = retry;
        q.timer->arm(retry);
        return true;
    }
    if (kind == ReplyError::Moved) {
        // The slot lives on another master now; its sweeper takes the queue over.
        q.where = SlotQueue::Where::Moved;
        q.timer->cancel();
        if (q.claim_retry_ms) hooks_.claims_work(q);  // its failures are another master's now
        if (opts_.on_moved) opts_.on_moved();
        return true;
    }
    if (kind == ReplyError::Ask || kind == ReplyError::TryAgain) {
        // Migrating: look again shortly.
        q.timer->arm(100);
        return true;
    }
    if (kind == ReplyError::ClusterDown) {
        if (whole_cluster_down(r))
            link_.server_waits(kind, q.keys.due);  // every queue waits; polled
        else
            hooks_.claims_failing(q,
                                  r);  // this slot has no master: says so (rate-limited), backs off
        return true;
    }
    return false;
}

void ClusterArrivals::touched(const std::string &due_key, const std::string &event) {
    // New items or a slot migrated in (kArrivalEvents); not our own zrem/del as items are
    // claimed.
    if (std::find(std::begin(kArrivalEvents), std::end(kArrivalEvents), event) ==
        std::end(kArrivalEvents))
        return;
    std::string name, tag;
    if (!active_ || !parse_due_key(opts_.ns, due_key, &name, &tag)) return;
    SlotQueue *q = queues_.queue(name, tag);
    if (!q) return;
    // Its keys are on this node: served here, or on their way here (a slot importing,
    // written to with ASKING or restored by MIGRATE).
    if (event == "restore" || q->where != SlotQueue::Where::Here) arriving(*q);
    if (!q->dirty) {
        q->dirty = true;
        dirty_.push_back(q);
    }
    // Coalesce: a burst of writes to one slot queue costs one sweep.
    if (!dirty_timer_.pending()) dirty_timer_.arm(5);
}

std::vector<SlotQueueName> ClusterArrivals::queues_in(const std::vector<bool> &slots) const {
    std::vector<SlotQueueName> out;
    queues_.for_each([&](const SlotQueue &q) {
        if (slots[static_cast<size_t>(q.slot)]) out.push_back({q.name, q.tag, q.slot});
    });
    return out;
}

void ClusterArrivals::take_over(const std::vector<bool> &slots,
                                const std::vector<SlotQueueName> &known) {
    std::vector<SlotQueue *> taken;
    queues_.for_each([&](SlotQueue &q) {
        if (slots[static_cast<size_t>(q.slot)] && q.where != SlotQueue::Where::Here)
            taken.push_back(&q);
    });
    for (auto &k : known) {
        const bool fresh = !queues_.known(k.name, k.tag);
        SlotQueue *q = queues_.queue(k.name, k.tag);
        if (q && fresh) taken.push_back(q);
    }
    for (SlotQueue *q : taken) {
        // Served here now by the topology's word, or about to be (the slot's new master
        // may answer MOVED until its own SETSLOT NODE): look until it does.
        arriving(*q);
        q->arrival.since_ms = wall_ms();
        hooks_.sweep(*q);
    }
}

void ClusterArrivals::arriving(SlotQueue &q) {
    if (q.where == SlotQueue::Where::Arriving) return;  // already: keep its start and back-off
    q.where = SlotQueue::Where::Arriving;
    q.arrival = {wall_ms(), std::nullopt};
}

void ClusterArrivals::sweep_dirty() {
    std::vector<SlotQueue *> all;
    all.swap(dirty_);
    for (SlotQueue *q : all) {
        q->dirty = false;
        // A queue whose next deadline we know needs a claim only if the new items are
        // due earlier: a plain ZRANGE tells (a claim script costs ten times as much).
        if (!q->next_due || q->where != SlotQueue::Where::Here)
            hooks_.sweep(*q);
        else
            peek(*q);
    }
}

void ClusterArrivals::peek(SlotQueue &q) {
    if (q.peeking || !link_.serving()) return;
    q.peeking = true;
    SlotQueue *qp = &q;
    bool sent =
        link_.command({"ZRANGE", q.keys.due, "0", "0", "WITHSCORES"}, [this, qp](redisReply *r) {
            SlotQueue &q = *qp;
            q.peeking = false;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
                int64_t first = 0;
                // Replies come in order: next_due is what the latest claim saw. A score that
                // is not a whole ms (not keywatch's) cannot be compared: sweep.
                if (reply_ms(r->element[1], &first) && q.next_due && first >= *q.next_due) return;
            } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 0) {
                return;  // nothing due here (claimed meanwhile)
            }
            hooks_.sweep(q);
        });
    if (!sent) q.peeking = false;
}

void ClusterArrivals::scan(const std::string &cursor) {
    if (!opts_.cluster || !active_ || !link_.serving())
        return;  // waiting: resume() scans once the server serves
    if (cursor == "0") {
        if (scanning_) return;
        scanning_ = true;
    }
    // Due, in-flight and lease sets: a slot whose items are all in flight (their holder may
    // have died) must be found too, or its leases would never be checked; a batch claimed
    // alone has no in-flight entries, only its lease member.
    std::string match = queue_key_glob(opts_.ns, "*", "*");
    bool sent = link_.command(
        {"SCAN", cursor, "MATCH", match, "COUNT", "1000", "TYPE", "zset"}, [this](redisReply *r) {
            if (classify(r) == ReplyError::Loading) {
                scanning_ = false;
                link_.server_waits(ReplyError::Loading);
                return;
            }
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                scanning_ = false;
                hooks_.log(
                    KW_LOG_WARN,
                    "SCAN for queue keys on " + link_.endpoint() + " failed: " + reply_to_string(r),
                    nullptr);
                scan_timer_.arm(opts_.scan_interval_ms);
                return;
            }
            std::string next(r->element[0]->str, r->element[0]->len);
            for (size_t i = 0; i < r->element[1]->elements; i++) {
                const redisReply *k = r->element[1]->element[i];
                std::string name, tag, key(k->str, k->len);
                if (!parse_due_key(opts_.ns, key, &name, &tag) &&
                    !parse_queue_key(opts_.ns, key, "inflight", &name, &tag) &&
                    !parse_queue_key(opts_.ns, key, "leases", &name, &tag))
                    continue;
                if (SlotQueue *q = queues_.queue(name, tag)) {
                    // Found on this node: here, or on its way here (a migration).
                    if (q->where != SlotQueue::Where::Here) arriving(*q);
                    if (!q->sweeping()) hooks_.sweep(*q);
                }
            }
            if (next != "0") {
                scan(next);
                return;
            }
            scanning_ = false;
            scan_timer_.arm(opts_.scan_interval_ms);
        });
    if (!sent) scanning_ = false;
}

}  // namespace keywatch
