// Sweeper, 3 of 3: live claims. `expired`/`evicted` events of the tracked db, from
// the node's intake, are claimed in one script call per chunk (claim_live), so that one
// instance gets each tracked key and the others are handed back as untracked; our own
// items and keys handled a moment ago are recognised without asking. `del` events drop
// keys from the queue (forget); keys other programs write are adopted (adopt, adoption.h);
// untracked events are de-duplicated across instances when
// asked (SET NX PX). Loop thread only.
#include "core/sweeper/sweeper.h"

#include <algorithm>
#include <map>

#include "core/redis/reply_error.h"
#include "core/redis/slots.h"

namespace keywatch {
namespace {

// Live claims kept while the queue connection is down; beyond that they are dropped (a
// tracked key among them is still swept, an untracked one is lost, as documented).
constexpr size_t kMaxBacklog = 100000;

}  // namespace

void Sweeper::claim_live(std::vector<Event> &&events) {
    // Asked even once claiming has stopped (events read just before a stop): only Redis
    // can tell a tracked key from an untracked one, and a tracked key claimed now is given
    // back at once rather than delivered a second time as an untracked event.
    if (!queues_.served(kKeysQueue) && opts_.adopt.empty()) {
        untracked(std::move(events));
        return;
    }
    // Per slot queue (one per key queue in standalone).
    std::map<Queue *, std::vector<Event>> ask;
    std::vector<Event> plain;  // in no queue served here
    int64_t now = wall_ms();
    for (auto &ev : events) {
        Queue *q = queues_.queue_of(key_queue(ev.key), ev.key, ev.slot);
        if (!q) {
            plain.push_back(std::move(ev));
            continue;
        }
        // Our own claims make Redis publish `expired` too, and so do keys we handled a
        // moment ago: no need to ask about those.
        if (auto m = q->marks.find(ev.key); m != q->marks.end()) {
            Queue::Mark &mark = m->second;
            const bool handled = mark.held == Queue::Held::Handled;
            if (!handled) mark.held = Queue::Held::Notified;
            if (!handled || now - mark.handled_ms <= opts_.done_window_ms) {
                counters_->suppressed.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
        }
        // A claim in flight on this slot queue may be what deleted the key (a sweep's key
        // lookup does): wait for its answer rather than ask Redis about our own claim.
        // Cluster: always. Standalone, where one queue takes every key, an `expired` event
        // waits while the claims on their way take due items (a deadline's sweep, or a
        // burst: claims coming back full, several on their way), for a bounded time
        // (waits_for_sweeps, release_deferred): the sweeps take what is due, in order, far
        // more cheaply than live claims of the same items could.
        if (q->sweeping() &&
            (opts_.cluster || (ev.name == "expired" && waits_for_sweeps(*q, now, ev.ts_ms)))) {
            if (q->deferred.empty() || ev.ts_ms < q->deferred_since_ms)
                q->deferred_since_ms = ev.ts_ms;
            q->deferred.push_back(std::move(ev));
            continue;
        }
        ask[q].push_back(std::move(ev));
    }
    if (!plain.empty()) untracked(std::move(plain));
    shed_beyond_room(ask);
    if (ask.empty()) return;
    if (!link_.serving()) {
        for (auto &kv : ask) {
            // Stopping: nobody will ask later; hand them over as untracked (what they
            // most likely are, as a tracked key is swept anyway). Not yet started (the
            // subscriber hears events before the engine starts its sweepers): they wait
            // for the connection like any other, or a tracked key would be handed over as
            // untracked and delivered twice (found by the chaos test).
            if (!claiming_ && started_)
                untracked(std::move(kv.second));
            else
                for (auto &ev : kv.second) keep_for_later(std::move(ev));
        }
        return;
    }
    for (auto &kv : ask) {
        std::vector<Event> &all = kv.second;
        // `expired` events apart from the rest (evictions), so that each chunk is one kind
        // (see send_live): a gone key is due now for the first, looked up for the second.
        // Nearly always there is one kind only, and nothing moves.
        auto expired = [](const Event &ev) { return ev.name == "expired"; };
        auto kinds = std::find_if_not(all.begin(), all.end(), expired);
        if (std::find_if(kinds, all.end(), expired) != all.end())
            kinds = std::stable_partition(all.begin(), all.end(), expired);
        size_t split = static_cast<size_t>(kinds - all.begin());
        for (auto [from, to] :
             {std::make_pair(size_t{0}, split), std::make_pair(split, all.size())})
            for (size_t i = from; i < to; i += kChunk) {
                size_t end = std::min(to, i + kChunk);
                send_live(*kv.first,
                          std::vector<Event>(
                              std::make_move_iterator(all.begin() + static_cast<long>(i)),
                              std::make_move_iterator(all.begin() + static_cast<long>(end))));
            }
    }
}

void Sweeper::shed_beyond_room(std::map<Queue *, std::vector<Event>> &ask) {
    // Backpressure: a claimed item is never dropped, so a live claim must not ask for more
    // than the workers have room for (with the claims already on their way); the rest
    // stays in Redis for the sweep, which claims by room too.
    size_t room = sink_->dispatch_room();
    room = room > *live_asking_ ? room - *live_asking_ : 0;
    size_t shed = 0;
    for (auto it = ask.begin(); it != ask.end();) {
        auto &events = it->second;
        size_t keep = std::min(events.size(), room);
        room -= keep;
        shed += events.size() - keep;
        events.resize(keep);
        it = events.empty() ? ask.erase(it) : std::next(it);
    }
    if (shed) sink_->shed_live(shed);
}

void Sweeper::send_live(Queue &q, std::vector<Event> &&events) {
    // A chunk of `expired` events (claim_live keeps them apart) needs no key lookups for
    // items past their deadline (their keys are gone); anything else (evictions) is checked
    // key by key.
    bool all_expired = std::all_of(events.begin(), events.end(),
                                   [](const Event &ev) { return ev.name == "expired"; });
    // The event keys are declared (after the claim's own keys).
    const uint64_t seq = next_batch_seq();
    std::vector<std::string> keys = q.keys.claim_keys(opts_.owner, seq);
    // The claim_due on its way (sent before this call, on the same connection): what it
    // takes alone has no inflight entry, and its notifications may come before its answer.
    // So may those whose answer was lost.
    const std::vector<uint64_t> pending = q.pending_claims(wall_ms(), opts_.lease_ms);
    for (uint64_t p : pending) keys.push_back(q.keys.batch(opts_.owner, p));
    for (auto &ev : events) keys.push_back(ev.key);
    std::vector<std::string> argv = {
        std::to_string(opts_.lease_ms), opts_.owner,           std::to_string(seq),
        all_expired ? "x" : "e",        opts_.engines_channel, shared_flag(),
        std::to_string(pending.size()), opts_.own_channel};
    auto evs = std::make_shared<std::vector<Event>>(std::move(events));
    auto asking = std::make_shared<LiveAsk>(live_asking_, evs->size());
    Queue *qp = &q;
    bool sent = link_.eval(scripts::batch::kClaimLive, keys, std::move(argv),
                           [this, evs, qp, asking, seq](redisReply *r) {
                               claim_answered();
                               on_live_claimed(*qp, *evs, r, seq);
                           });
    if (sent) claim_sent();
}

// The reply of claim_live: per event C (claimed: ours now), U (untracked) or anything
// else (someone else's, or handled a moment ago: suppressed).
void Sweeper::on_live_claimed(Queue &q, std::vector<Event> &events, redisReply *r, uint64_t seq) {
    if (classify(r) == ReplyError::Loading) {
        // Asked again once the server has loaded (resume() claims the backlog).
        for (auto &ev : events) keep_for_later(std::move(ev));
        link_.server_waits(ReplyError::Loading);
        return;
    }
    if (arrivals_.redirected(q, r)) {
        // The slot is on the move (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: what redirected()
        // deals with): the events go to whoever serves it once the topology says so (a
        // tracked key among them is never handed over as untracked).
        if (opts_.on_unrouted_live) opts_.on_unrouted_live(std::move(events));
        return;
    }
    LiveClaimReply c;
    std::string err;
    if (!parse_live_claim_reply(r, &c, &err) || c.letters.size() != events.size()) {
        log(KW_LOG_ERROR,
            "claim_live failed: " + reply_to_string(r) +
                "; tracked keys among these events will be swept",
            &q);
        return;
    }
    if (c.b >= 0) q.batches[seq].b = c.b;
    saw_listeners(c.listeners);
    std::vector<Event> tracked, plain;
    // A rule queue's U: the key may be a kw_client_track key, in `keys`: asked there too.
    std::map<Queue *, std::vector<Event>> again;
    const bool ask_keys = q.name != kKeysQueue && queues_.served(kKeysQueue);
    size_t next = 0;  // the next claimed item
    for (size_t i = 0; i < events.size(); i++) {
        Event &live = events[i];
        if (c.letters[i] == 'C') {
            if (next < c.items.size()) tracked.push_back(hold(q, c.items[next++], &live, seq));
        } else if (c.letters[i] == 'U' && ask_keys) {
            again[queues_.queue_of(kKeysQueue, live.key, live.slot)].push_back(std::move(live));
        } else if (c.letters[i] == 'U') {
            plain.push_back(std::move(live));
        } else {
            counters_->suppressed.fetch_add(1, std::memory_order_relaxed);
        }
    }
    counters_->claimed.fetch_add(static_cast<int64_t>(tracked.size()), std::memory_order_relaxed);
    if (q.stats)
        q.stats->claimed.fetch_add(static_cast<int64_t>(tracked.size()), std::memory_order_relaxed);
    if (!claiming_) {
        give_back(q, tracked);
        tracked.clear();
    }
    if (!tracked.empty()) sink_->deliver_tracked(tracked);
    if (!plain.empty()) untracked(std::move(plain));
    for (auto &kv : again) send_live(*kv.first, std::move(kv.second));
}

const std::string &Sweeper::key_queue(const std::string &key) const {
    static const std::string keys = kKeysQueue;
    int r = opts_.adopt.match(key);
    return r < 0 ? keys : opts_.adopt.rules()[static_cast<size_t>(r)].queue;
}

void Sweeper::adopt(std::vector<AdoptKey> &&keys, Adoption::Answered answered) {
    adoption_.add(std::move(keys), std::move(answered));
}

void Sweeper::keep_for_later(Event &&ev) {
    if (live_backlog_.size() < kMaxBacklog) live_backlog_.push_back(std::move(ev));
}

void Sweeper::forget(std::vector<std::string> &&keys) {
    if (!link_.serving()) return;  // the sweep checks later
    // From `keys` and from the key's rule queue: a key a rule matches may be in either.
    std::map<Queue *, std::vector<std::string>> by_queue;
    for (auto &k : keys) {
        const std::string &rq = key_queue(k);
        if (rq != kKeysQueue)
            if (Queue *q = queues_.queue_of(rq, k)) by_queue[q].push_back(k);
        if (Queue *q = queues_.served(kKeysQueue) ? queues_.queue_of(kKeysQueue, k) : nullptr)
            by_queue[q].push_back(std::move(k));
    }
    for (auto &kv : by_queue) {
        Queue *q = kv.first;
        for_chunks(kv.second, [this, q](auto begin, auto end) {
            link_.eval(scripts::kForget, q->keys, std::vector<std::string>(begin, end),
                       [](redisReply *) {});
        });
    }
}

void Sweeper::untracked(std::vector<Event> &&events) {
    if (!opts_.dedupe || !link_.serving()) {
        sink_->deliver_untracked(events);  // cannot ask: deliver (best effort)
        return;
    }
    // One SET NX per event; the batch is delivered when every answer is in.
    struct Pending {
        std::vector<Event> events;
        std::vector<bool> won;
        size_t left;
    };
    auto p = std::make_shared<Pending>();
    p->events = std::move(events);
    p->won.assign(p->events.size(), false);
    p->left = p->events.size();
    for (size_t i = 0; i < p->events.size(); i++) {
        const Event &ev = p->events[i];
        // In the event key's slot, so that in a cluster it lives on the node that published.
        std::string key =
            dedupe_key(opts_.ns, SlotTags::instance().tag_for_key(ev.key), ev.db, ev.name, ev.key);
        bool sent =
            link_.command({"SET", key, "1", "NX", "PX", std::to_string(opts_.dedupe_ttl_ms)},
                          [this, p, i](redisReply *r) {
                              p->won[i] = r->type == REDIS_REPLY_STATUS;
                              if (--p->left > 0) return;
                              std::vector<Event> mine;
                              for (size_t j = 0; j < p->events.size(); j++) {
                                  if (p->won[j])
                                      mine.push_back(std::move(p->events[j]));
                                  else
                                      counters_->suppressed.fetch_add(1);
                              }
                              if (!mine.empty()) sink_->deliver_untracked(mine);
                          });
        if (!sent) {
            p->won[i] = true;  // cannot ask: deliver (best effort)
            if (--p->left == 0) sink_->deliver_untracked(p->events);
        }
    }
}

}  // namespace keywatch
