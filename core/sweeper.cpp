#include "core/sweeper.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/reply_error.h"
#include "core/slots.h"

namespace keywatch {
namespace {

// Ids per script call for live claims, acks, renewals: big enough to amortise a call,
// small enough that one call never blocks Redis for long.
constexpr size_t kChunk = 500;
// Live claims kept while the queue connection is down; beyond that they are dropped (a
// tracked key among them is still swept, an untracked one is lost, as documented).
constexpr size_t kMaxBacklog = 100000;
// Queue::mine values of claimed items (handled keys hold the time they were handled).
constexpr int64_t kClaimed = -1, kNotified = -2;
// Acks wait while claims are on their way, at most this long (and a quarter of the
// lease), looking again this often.
constexpr int64_t kAckHoldMs = 1000, kAckPollMs = 5;
// Failing claims are reported at most this often per sweeper.
constexpr int64_t kClaimWarningMs = 10000;
// How long a slot queue whose keys were restored here is swept again while this master
// still answers MOVED (a migration in progress; redis-cli moves a slot in well under it).
constexpr int64_t kArrivalMs = 60000;

template <typename T, typename F>
void for_chunks(const std::vector<T> &all, F &&f) {
    for (size_t i = 0; i < all.size(); i += kChunk)
        f(all.begin() + static_cast<long>(i),
          all.begin() + static_cast<long>(std::min(all.size(), i + kChunk)));
}

}  // namespace

Sweeper::Sweeper(EventLoop &loop, RedisUrl url, Options opts, SweeperSink *sink,
                 SweeperCounters *counters)
    : loop_(loop),
      opts_(std::move(opts)),
      sink_(sink),
      counters_(counters),
      conn_(loop.base(), url, "queue", /*select_db=*/true),
      endpoint_(url.endpoint()),
      retry_timer_(loop.base(), [this] { connect(); }),
      scan_timer_(loop.base(), [this] { scan("0"); }),
      dirty_timer_(loop.base(), [this] { sweep_dirty(); }),
      prune_timer_(loop.base(), [this] { prune_done(); }),
      ack_timer_(loop.base(), [this] { send_completions(); }),
      renew_timer_(loop.base(), [this] { renew_leases(); }),
      rng_(std::random_device{}()) {
    if (!opts_.claims_in_flight) opts_.claims_in_flight = &own_claims_in_flight_;
    if (opts_.track_keys) served_.insert(kKeysQueue);
    keys_by_slot_.assign(opts_.cluster ? kSlotCount : 1, nullptr);
    served_.insert(opts_.task_queues.begin(), opts_.task_queues.end());
    // Standalone: every served queue has its one slot tag, swept from the start.
    if (!opts_.cluster)
        for (auto &name : served_) queue(name, opts_.tag);
}

Sweeper::Queue *Sweeper::queue(const std::string &name, const std::string &tag) {
    if (!served_.count(name)) return nullptr;
    std::string due = QueueKeys::due_key(opts_.ns, name, tag);
    auto it = queues_.find(due);
    if (it != queues_.end()) return &it->second;
    QueueKeys keys = QueueKeys::make(opts_.ns, name, tag);
    Queue &q = queues_[due];
    q.name = name;
    q.tag = tag;
    q.keys = keys;
    q.is_keys = name == kKeysQueue;
    q.slot = opts_.cluster ? key_slot("{" + tag + "}") : 0;
    q.timer = std::make_unique<Timer>(loop_.base(), [this, &q] { sweep(q); });
    // The slot index holds the standard queue of each slot only (a stray due key with
    // another tag that hashes to the same slot, found by a scan, is swept on its own).
    if (q.is_keys && tag == (opts_.cluster ? SlotTags::instance().tag(q.slot) : opts_.tag))
        keys_by_slot_[static_cast<size_t>(q.slot)] = &q;
    return &q;
}

Sweeper::Queue *Sweeper::queue_of(const std::string &name, const std::string &id, int slot) {
    if (!opts_.cluster)
        slot = 0;
    else if (slot < 0)
        slot = key_slot(id);
    auto tag = [&]() -> const std::string & {
        return opts_.cluster ? SlotTags::instance().tag(slot) : opts_.tag;
    };
    if (name != kKeysQueue || !opts_.track_keys) return queue(name, tag());
    Queue *&q = keys_by_slot_[static_cast<size_t>(slot)];
    if (!q) q = queue(name, tag());
    return q;
}

Sweeper::~Sweeper() = default;

void Sweeper::start() {
    started_ = true;
    down_ = false;
    claiming_ = true;
    renew_timer_.arm(std::max<int64_t>(opts_.lease_ms / 3, 1));
    connect();
}

void Sweeper::stop_claiming() {
    claiming_ = false;
    scan_timer_.cancel();
    dirty_timer_.cancel();
    for (auto &kv : queues_) kv.second.timer->cancel();
    send_completions();  // acks held back for claims go out now
}

void Sweeper::shutdown() {
    down_ = true;
    stop_claiming();
    if (size_t left = store_.take_all().size())
        sink_->log(KW_LOG_WARN, std::to_string(left) + " completions for " + endpoint_ +
                                    " were not confirmed by Redis before the stop; those "
                                    "items will be delivered again after their lease");
    retry_timer_.cancel();
    ack_timer_.cancel();
    renew_timer_.cancel();
    conn_.close();
    outstanding_ = 0;
    *opts_.claims_in_flight -= claims_out_;
    claims_out_ = 0;
}

void Sweeper::connect() {
    if (down_) return;
    conn_.connect(
        opts_.connect_timeout_ms, [this] { on_ready(); },
        [this](const RedisConn::Failure &f) { on_lost(f); });
}

void Sweeper::on_ready() {
    attempt_ = 0;
    completion_backoff_ms_ = 0;  // a new connection: completions go out at once
    ack_timer_.cancel();
    // Load our scripts before anything else is sent on this connection, so that the
    // first EVALSHAs find them. Without it, the sweep of a burst sends thousands of
    // EVALSHAs at once that all fail with NOSCRIPT and come back as EVALs, each carrying
    // and hashing the whole body. The EVAL fallback stays for a cache emptied later
    // (SCRIPT FLUSH).
    for (const Script *s :
         {&scripts::kClaimDue, &scripts::kClaimLive, &scripts::kAck, &scripts::kFail,
          &scripts::kRelease, &scripts::kRenew, &scripts::kForget})
        conn_.command({"SCRIPT", "LOAD", s->body}, [](redisReply *) {});
    if (claiming_) {
        for (auto &kv : queues_) sweep(kv.second);
        // Cluster: what arrived while we were away is found by a full scan.
        if (opts_.cluster) scan("0");
        std::vector<Event> backlog;
        backlog.swap(live_backlog_);
        if (!backlog.empty()) claim_live(std::move(backlog));
    }
    send_completions();
}

void Sweeper::on_lost(const RedisConn::Failure &f) {
    outstanding_ = 0;
    store_.connection_lost();  // no answer will come: they wait for the next connection
    *opts_.claims_in_flight -= claims_out_;  // their answers will not come
    claims_out_ = 0;
    scanning_ = false;
    for (auto &kv : queues_) {
        Queue &q = kv.second;
        q.sweeping = false;
        q.peeking = false;
        q.timer->cancel();
        for (auto &ev : q.deferred) keep_for_later(std::move(ev));
        q.deferred.clear();
    }
    if (down_) return;
    int64_t delay = opts_.reconnect.jittered(attempt_++, rng_());
    sink_->log(f.permanent ? KW_LOG_ERROR : KW_LOG_WARN,
               "queue connection: " + f.message + "; reconnecting in " + std::to_string(delay) +
                   "ms (tracked items wait safely in Redis)");
    retry_timer_.arm(delay);
}

bool Sweeper::eval(const Script &s, const Queue &q, std::vector<std::string> argv, ReplyFn fn) {
    // Kept for the rare NOSCRIPT retry, shared rather than copied into the callback.
    const QueueKeys &k = q.keys;  // the five KEYS, in QueueKeys::keys() order
    auto args = std::make_shared<std::vector<std::string>>(std::initializer_list<std::string>{
        "EVALSHA", s.sha(), "5", k.due, k.inflight, k.data, k.dead, k.done});
    args->reserve(args->size() + argv.size());
    for (auto &a : argv) args->push_back(std::move(a));
    outstanding_++;
    const Script *script = &s;
    bool sent = conn_.command(*args, [this, script, args, fn](redisReply *r) {
        if (classify(r) == ReplyError::NoScript) {
            // Empty script cache (restart, failover): EVAL loads it for next time.
            (*args)[0] = "EVAL";
            (*args)[1] = script->body;
            conn_.command(*args, [this, fn](redisReply *r2) {
                outstanding_--;
                fn(r2);
            });
            return;
        }
        outstanding_--;
        fn(r);
    });
    if (!sent) outstanding_--;
    return sent;
}

bool Sweeper::redirected(Queue &q, const redisReply *r) {
    const ReplyError kind = classify(r);
    if (kind == ReplyError::Moved && q.where == Where::Arriving &&
        wall_ms() - q.arriving_since_ms < kArrivalMs) {
        // Migrating in: this master serves the slot once the migration's last step
        // (SETSLOT NODE) is done, whatever order its keys came in. Look again soon.
        if (q.arrival_retry_ms == 0 && opts_.on_moved) opts_.on_moved();
        q.arrival_retry_ms = Backoff{20, 1000}.after(q.arrival_retry_ms);
        q.timer->arm(q.arrival_retry_ms);
        return true;
    }
    if (kind == ReplyError::Moved) {
        // The slot lives on another master now; its sweeper takes the queue over.
        q.where = Where::Moved;
        q.timer->cancel();
        if (opts_.on_moved) opts_.on_moved();
        return true;
    }
    if (kind == ReplyError::Ask || kind == ReplyError::TryAgain) {
        // Migrating: look again shortly.
        q.timer->arm(100);
        return true;
    }
    if (kind == ReplyError::ClusterDown) {
        claims_failing(q, r);  // says so (rate-limited), backs off
        return true;
    }
    return false;
}

void Sweeper::touched(const std::string &due_key, const std::string &event) {
    // New items (zadd from track/schedule/retry) or a slot migrated in (restore); not our
    // own zrem/del as items are claimed.
    if (event != "zadd" && event != "restore") return;
    std::string name, tag;
    if (!claiming_ || !parse_due_key(opts_.ns, due_key, &name, &tag)) return;
    Queue *q = queue(name, tag);
    if (!q) return;
    // Its keys are on this node: served here, or on their way here (a slot importing,
    // written to with ASKING or restored by MIGRATE).
    if (event == "restore" || q->where != Where::Here) arriving(*q);
    if (!q->dirty) {
        q->dirty = true;
        dirty_.push_back(q);
    }
    // Coalesce: a burst of writes to one slot queue costs one sweep.
    if (!dirty_timer_.pending()) dirty_timer_.arm(5);
}

void Sweeper::claims_failing(Queue &q, const redisReply *r) {
    int64_t now = wall_ms();
    const Backoff claims{opts_.interval_ms, std::max(opts_.interval_ms, opts_.reconnect.max_ms)};
    q.claim_retry_ms = claims.after(q.claim_retry_ms);
    q.timer->arm(q.claim_retry_ms);
    if (claims_failing_since_ms_ == 0) claims_failing_since_ms_ = now;
    if (now - claim_warned_ms_ < kClaimWarningMs) return;
    claim_warned_ms_ = now;
    std::string why = reply_to_string(r), hint;
    switch (classify(r)) {
        case ReplyError::ClusterDown:
            hint =
                "the cluster refuses commands: a shard has no master, and under "
                "cluster-require-full-coverage yes (Redis's default) every node refuses then";
            break;
        case ReplyError::NoPerm:
            hint =
                "the ACL user lacks a permission keywatch needs: grant it the queue scripts "
                "and keys, e.g. ACL SETUSER <user> +@scripting +@read +@write ~" +
                opts_.ns + ":* ~<your tracked keys>";
            break;
        case ReplyError::Loading:
        case ReplyError::Busy:
            hint = "the server is busy or loading its data";
            break;
        default:
            hint = "see the server's log";
    }
    sink_->log(KW_LOG_WARN, "claims on " + endpoint_ + " fail (" + q.keys.due + ": " + why +
                                "): " + hint + "; tracked items wait in Redis; retrying every " +
                                std::to_string(q.claim_retry_ms) + "ms at most");
}

void Sweeper::claims_work(Queue &q) {
    q.claim_retry_ms = 0;
    if (claims_failing_since_ms_ == 0) return;
    sink_->log(KW_LOG_INFO, "claims on " + endpoint_ + " work again, after failing for " +
                                std::to_string(wall_ms() - claims_failing_since_ms_) + "ms");
    claims_failing_since_ms_ = 0;
    claim_warned_ms_ = 0;
}

void Sweeper::arriving(Queue &q) {
    if (q.where == Where::Arriving) return;  // already: keep its start and back-off
    q.where = Where::Arriving;
    q.arriving_since_ms = wall_ms();
    q.arrival_retry_ms = 0;
}

void Sweeper::sweep_dirty() {
    std::vector<Queue *> all;
    all.swap(dirty_);
    for (Queue *q : all) {
        q->dirty = false;
        // A queue whose next deadline we know needs a claim only if the new items are
        // due earlier: a plain ZRANGE tells (a claim script costs ten times as much).
        if (q->next_due < 0 || q->where != Where::Here)
            sweep(*q);
        else
            peek(*q);
    }
}

void Sweeper::peek(Queue &q) {
    if (q.peeking || conn_.state() != RedisConn::State::Ready) return;
    q.peeking = true;
    outstanding_++;
    Queue *qp = &q;
    bool sent =
        conn_.command({"ZRANGE", q.keys.due, "0", "0", "WITHSCORES"}, [this, qp](redisReply *r) {
            outstanding_--;
            Queue &q = *qp;
            q.peeking = false;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
                const redisReply *score = r->element[1];
                int64_t first = strtoll(std::string(score->str, score->len).c_str(), nullptr, 10);
                // Replies come in order: next_due is what the latest claim saw.
                if (q.next_due >= 0 && first >= q.next_due) return;
            } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 0) {
                return;  // nothing due here (claimed meanwhile)
            }
            sweep(q);
        });
    if (!sent) {
        outstanding_--;
        q.peeking = false;
    }
}

void Sweeper::scan(const std::string &cursor) {
    if (!opts_.cluster || !claiming_ || conn_.state() != RedisConn::State::Ready) return;
    if (cursor == "0") {
        if (scanning_) return;
        scanning_ = true;
    }
    // Due and in-flight sets: a slot whose items are all in flight (their holder may have
    // died) must be found too, or its leases would never be checked.
    std::string match = opts_.ns + ":*:{*}:*";
    outstanding_++;
    bool sent = conn_.command(
        {"SCAN", cursor, "MATCH", match, "COUNT", "1000", "TYPE", "zset"}, [this](redisReply *r) {
            outstanding_--;
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                scanning_ = false;
                sink_->log(KW_LOG_WARN, "SCAN for queue keys on " + endpoint_ +
                                            " failed: " + reply_to_string(r));
                scan_timer_.arm(opts_.scan_interval_ms);
                return;
            }
            std::string next(r->element[0]->str, r->element[0]->len);
            for (size_t i = 0; i < r->element[1]->elements; i++) {
                const redisReply *k = r->element[1]->element[i];
                std::string name, tag, key(k->str, k->len);
                if (!parse_due_key(opts_.ns, key, &name, &tag) &&
                    !parse_queue_key(opts_.ns, key, "inflight", &name, &tag))
                    continue;
                if (Queue *q = queue(name, tag)) {
                    // Found on this node: here, or on its way here (a migration).
                    if (q->where != Where::Here) arriving(*q);
                    if (!q->sweeping) sweep(*q);
                }
            }
            if (next != "0") {
                scan(next);
                return;
            }
            scanning_ = false;
            scan_timer_.arm(opts_.scan_interval_ms);
        });
    if (!sent) {
        outstanding_--;
        scanning_ = false;
    }
}

void Sweeper::sweep(Queue &q) {
    if (!claiming_ || q.where == Where::Moved || conn_.state() != RedisConn::State::Ready) return;
    if (q.sweeping) {
        q.again = true;
        return;
    }
    size_t room = sink_->dispatch_room();
    if (room == 0) {
        // Workers are behind: the items wait in Redis; look again shortly.
        q.timer->arm(std::min<int64_t>(opts_.interval_ms, 20));
        return;
    }
    int64_t limit = std::min<int64_t>(opts_.batch, static_cast<int64_t>(room));
    q.sweeping = true;
    q.again = false;
    counters_->sweep_calls.fetch_add(1, std::memory_order_relaxed);
    // The `done` record is pruned by a claim at most once per tenth of its window, not on
    // every claim (it only has to stay near the window's size).
    bool prune = false;
    if (q.is_keys) {
        int64_t t = wall_ms();
        prune = q.done_pruned_ms < 0 || t - q.done_pruned_ms >= opts_.done_window_ms / 10;
        if (prune) q.done_pruned_ms = t;
    }
    bool sent = eval(
        scripts::kClaimDue, q,
        {std::to_string(limit), std::to_string(opts_.lease_ms), opts_.owner, q.is_keys ? "1" : "0",
         prune ? std::to_string(std::max<int64_t>(opts_.done_window_ms, 1)) : "0"},
        [this, &q, limit](redisReply *r) {
            q.sweeping = false;
            claim_answered();
            // Live events that came in while this claim was on its way: those about items
            // it claimed are ours now (held); the rest are claimed live.
            std::vector<Event> deferred;
            deferred.swap(q.deferred);
            struct Later {
                Sweeper *s;
                std::vector<Event> &evs;
                ~Later() {
                    if (!evs.empty()) s->claim_live(std::move(evs));
                }
            } later{this, deferred};
            if (redirected(q, r)) return;
            q.where = Where::Here;
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 7) {
                claims_failing(q, r);
                return;
            }
            claims_work(q);
            int64_t now = r->element[0]->integer, next_due = r->element[1]->integer;
            int64_t next_lease = r->element[5]->integer, inflight = r->element[6]->integer;
            size_t claimed = r->element[4]->elements / kClaimedFields;
            q.next_due = next_due;
            on_claimed(q, r->element[4]);
            // Leases matter only if someone else holds items: ours are acked (or, if we
            // die, found by the others' scans).
            bool others_hold = inflight > static_cast<int64_t>(q.holding);
            int64_t next = next_due;
            if (next_lease >= 0 && (others_hold || !opts_.cluster) &&
                (next < 0 || next_lease < next))
                next = next_lease;
            // An item is due once now is past its deadline: wake 1 ms after it.
            int64_t delay = next < 0 ? opts_.interval_ms
                                     : std::clamp<int64_t>(next - now + 1, 0, opts_.interval_ms);
            if (q.again || static_cast<int64_t>(claimed) >= limit) delay = 0;
            // Cluster: an idle slot queue waits for a notification or the next scan; one
            // with items waits for its next deadline (new earlier items notify us).
            if (opts_.cluster && !q.again && static_cast<int64_t>(claimed) < limit) {
                if (next < 0) return;
                delay = std::max<int64_t>(next - now + 1, 0);
            }
            q.timer->arm(delay);
        });
    if (sent)
        claim_sent();
    else
        q.sweeping = false;
}

Event Sweeper::make_event(const Queue &q, const ClaimedItem &item, const Event *live) {
    Event ev;
    ev.queue = q.name;
    ev.key = item.id;
    ev.slot = q.slot;
    ev.has_value = item.has_payload;
    if (item.has_payload) ev.value = item.payload;
    ev.last_error = item.last_error;
    ev.deadline_ms = item.deadline_ms;
    ev.attempt = item.attempt;
    ev.ts_ms = live ? live->ts_ms : wall_ms();
    ev.db = conn_.url().db;
    ev.node = opts_.node_name ? opts_.node_name : &endpoint_;
    // A tracked key that is gone at its deadline is "expired" whichever path found it; a
    // live eviction before the deadline keeps its name.
    ev.name = !q.is_keys ? "task" : (live ? live->name : "expired");
    if (item.source == 'L') {
        ev.source = KW_SOURCE_LEASE_EXPIRED;
        counters_->lease_expired.fetch_add(1, std::memory_order_relaxed);
    } else if (item.source == 'N') {
        ev.source = KW_SOURCE_NOTIFICATION;
    } else {
        ev.source = q.is_keys ? KW_SOURCE_SWEEP : KW_SOURCE_TASK;
    }
    return ev;
}

Event Sweeper::hold(Queue &q, const ClaimedItem &item, const Event *live) {
    auto [m, fresh] = q.mine.try_emplace(item.id, kClaimed);
    if (fresh) {
        q.holding++;
    } else if (m->second >= 0) {  // remembered as handled: ours again
        q.holding++;
        remembered_--;
    }
    m->second = live ? kNotified : kClaimed;
    Event ev = make_event(q, item, live);
    q.claimed_at[item.id] = ev.ts_ms;
    return ev;
}

void Sweeper::keep_for_later(Event &&ev) {
    if (live_backlog_.size() < kMaxBacklog) live_backlog_.push_back(std::move(ev));
}

void Sweeper::on_claimed(Queue &q, redisReply *items) {
    std::vector<Event> batch;
    size_t n = items->elements / kClaimedFields;
    batch.reserve(n);
    ClaimedItem item;
    for (size_t i = 0; i < n; i++) {
        if (!parse_claimed(items, i, &item)) continue;
        batch.push_back(hold(q, item, nullptr));
    }
    counters_->claimed.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
    if (!claiming_) {
        give_back(q, batch);
        return;
    }
    if (!batch.empty()) sink_->deliver_tracked(batch);
}

void Sweeper::give_back(const Queue &q, const std::vector<Event> &items) {
    std::vector<Completion> back;
    for (auto &ev : items) back.push_back({q.name, ev.key, kRelease, "", q.slot});
    if (!back.empty()) complete(std::move(back));
}

void Sweeper::claim_live(std::vector<Event> &&events) {
    // Asked even once claiming has stopped (events read just before a stop): only Redis
    // can tell a tracked key from an untracked one, and a tracked key claimed now is given
    // back at once rather than delivered a second time as an untracked event.
    if (!served_.count(kKeysQueue)) {
        untracked(std::move(events));
        return;
    }
    // Per slot queue (one in standalone).
    std::map<Queue *, std::vector<Event>> ask;
    int64_t now = wall_ms();
    for (auto &ev : events) {
        Queue *q = queue_of(kKeysQueue, ev.key, ev.slot);
        // Our own claims make Redis publish `expired` too, and so do keys we handled a
        // moment ago: no need to ask about those.
        auto m = q->mine.find(ev.key);
        if (m != q->mine.end() && (m->second < 0 || now - m->second <= opts_.done_window_ms)) {
            if (m->second == kClaimed) m->second = kNotified;
            counters_->suppressed.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        // Cluster: a claim in flight on this slot queue may be what deleted the key (a
        // sweep's key lookup does): wait for its answer rather than ask Redis about our
        // own claim for a handful of ids. (One standalone queue is nearly always being
        // swept during a burst: there, waiting would hold back the live path.)
        if (opts_.cluster && q->sweeping) {
            q->deferred.push_back(std::move(ev));
            continue;
        }
        ask[q].push_back(std::move(ev));
    }
    if (ask.empty()) return;
    if (conn_.state() != RedisConn::State::Ready) {
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

void Sweeper::send_live(Queue &q, std::vector<Event> &&events) {
    // A chunk of `expired` events (claim_live keeps them apart) needs no key lookups for
    // items past their deadline (their keys are gone); anything else (evictions) is checked
    // key by key.
    bool all_expired = std::all_of(events.begin(), events.end(),
                                   [](const Event &ev) { return ev.name == "expired"; });
    std::vector<std::string> argv = {std::to_string(opts_.lease_ms), opts_.owner,
                                     all_expired ? "x" : "e"};
    for (auto &ev : events) argv.push_back(ev.key);
    auto evs = std::make_shared<std::vector<Event>>(std::move(events));
    Queue *qp = &q;
    bool sent = eval(scripts::kClaimLive, q, std::move(argv), [this, evs, qp](redisReply *r) {
        claim_answered();
        if (redirected(*qp, r)) {
            // The slot is on the move (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: what redirected()
            // deals with): the events go to whoever serves it once the topology says so (a
            // tracked key among them is never handed over as untracked).
            if (opts_.on_unrouted_live) opts_.on_unrouted_live(std::move(*evs));
            return;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
            r->element[1]->elements != evs->size()) {
            sink_->log(KW_LOG_ERROR, "claim_live failed: " + reply_to_string(r) +
                                         "; tracked keys among these events will be swept");
            return;
        }
        std::vector<Event> tracked, plain;
        ClaimedItem item;
        size_t next = 0;  // the next claimed item in the flat list
        for (size_t i = 0; i < evs->size(); i++) {
            redisReply *res = r->element[1]->element[i];
            Event &live = (*evs)[i];
            bool one = res->type == REDIS_REPLY_STRING && res->len == 1;
            if (one && res->str[0] == 'C') {
                if (!parse_claimed(r->element[2], next++, &item)) continue;
                tracked.push_back(hold(*qp, item, &live));
            } else if (one && res->str[0] == 'U') {
                plain.push_back(std::move(live));
            } else {
                counters_->suppressed.fetch_add(1, std::memory_order_relaxed);
            }
        }
        counters_->claimed.fetch_add(static_cast<int64_t>(tracked.size()),
                                     std::memory_order_relaxed);
        if (!claiming_) {
            give_back(*qp, tracked);
            tracked.clear();
        }
        if (!tracked.empty()) sink_->deliver_tracked(tracked);
        if (!plain.empty()) untracked(std::move(plain));
    });
    if (sent) claim_sent();
}

void Sweeper::forget(std::vector<std::string> &&keys) {
    if (!served_.count(kKeysQueue) || conn_.state() != RedisConn::State::Ready)
        return;  // the sweep checks later
    std::map<Queue *, std::vector<std::string>> by_queue;
    for (auto &k : keys) by_queue[queue_of(kKeysQueue, k)].push_back(std::move(k));
    for (auto &kv : by_queue) {
        Queue *q = kv.first;
        for_chunks(kv.second, [this, q](auto begin, auto end) {
            eval(scripts::kForget, *q, std::vector<std::string>(begin, end), [](redisReply *) {});
        });
    }
}

void Sweeper::untracked(std::vector<Event> &&events) {
    if (!opts_.dedupe || conn_.state() != RedisConn::State::Ready) {
        sink_->deliver_untracked(events);
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
        std::string key = opts_.ns + ":dedupe:{" + SlotTags::instance().tag_for_key(ev.key) +
                          "}:" + std::to_string(ev.db) + ":" + ev.name + ":" + ev.key;
        outstanding_++;
        bool sent =
            conn_.command({"SET", key, "1", "NX", "PX", std::to_string(opts_.dedupe_ttl_ms)},
                          [this, p, i](redisReply *r) {
                              outstanding_--;
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
            outstanding_--;
            p->won[i] = true;  // cannot ask: deliver (best effort)
            if (--p->left == 0) sink_->deliver_untracked(p->events);
        }
    }
}

void Sweeper::claim_sent() {
    claims_out_++;
    (*opts_.claims_in_flight)++;
}

void Sweeper::claim_answered() {
    claims_out_--;
    (*opts_.claims_in_flight)--;
}

void Sweeper::complete(std::vector<Completion> &&done) {
    int64_t now = wall_ms();
    if (!store_.has_waiting()) {
        completions_since_ms_ = now;
        oldest_claim_ms_ = now;
    }
    for (auto &c : done) {
        if (c.done_ms == 0 && late_after_hold_timeout(c)) continue;
        if (c.done_ms == 0) {
            c.done_ms = now;
            note_completed(c, now);  // once, on intake (a rerouted one was noted before)
        }
        oldest_claim_ms_ = std::min(oldest_claim_ms_, c.claimed_ms > 0 ? c.claimed_ms : 0);
        store_.add(std::move(c));
    }
    send_completions();
}

void Sweeper::note_completed(const Completion &c, int64_t now) {
    Queue *qp = queue_of(c.queue, c.id, c.slot);
    if (!qp) return;
    Queue &q = *qp;
    // A handled key stays in `mine` for a while, so that its late `expired` notification
    // is recognised without asking Redis; not if that already came.
    bool handled = c.result != KW_RESULT_RETRY && c.result != kRelease;
    auto m = q.mine.find(c.id);
    if (m == q.mine.end() || m->second >= 0) return;
    q.holding--;
    q.claimed_at.erase(c.id);
    if (q.is_keys && handled && m->second == kClaimed) {
        m->second = now;
        if (remembered_++ == 0) prune_timer_.arm(std::max<int64_t>(opts_.done_window_ms, 1));
    } else {
        q.mine.erase(m);
    }
}

void Sweeper::send_completions() {
    if (!store_.has_waiting() || conn_.state() != RedisConn::State::Ready) return;
    if (ack_timer_.pending() && completion_backoff_ms_ > 0) return;  // backing off
    // Deliveries first: while claims are on their way (to any master: they share the
    // CPU) acks wait, up to kAckHoldMs. Nothing waits on an ack but bookkeeping: the
    // items stay leased to us meanwhile. Not once claiming has stopped, and not for an
    // item claimed half a lease ago or earlier (its ack must beat the lease's end; an
    // unknown claim time counts as long ago).
    int64_t hold = std::min<int64_t>(kAckHoldMs, opts_.lease_ms / 4);
    int64_t t = wall_ms();
    if (claiming_ && *opts_.claims_in_flight > 0 && t - completions_since_ms_ < hold &&
        t - oldest_claim_ms_ < opts_.lease_ms / 2) {
        if (!ack_timer_.pending()) ack_timer_.arm(kAckPollMs);
        return;
    }
    ack_timer_.cancel();
    if (size_t late = store_.drop_expired(t, opts_.lease_ms)) {
        counters_->late_acks.fetch_add(static_cast<int64_t>(late));
        sink_->log(KW_LOG_WARN, std::to_string(late) + " completions for " + endpoint_ +
                                    " could not be written before their lease ended; those "
                                    "items will be delivered again");
    }
    std::map<Queue *, std::vector<Completion>> acks, releases;
    for (auto &c : store_.take_waiting()) {
        Queue *qp = queue_of(c.queue, c.id, c.slot);
        if (!qp) continue;
        if (c.result == kRelease)
            releases[qp].push_back(std::move(c));
        else if (c.result == KW_RESULT_ACK)
            acks[qp].push_back(std::move(c));
        else
            send_fail(*qp, std::move(c));
    }
    for (auto &kv : releases) send_ids(scripts::kRelease, *kv.first, std::move(kv.second));
    for (auto &kv : acks) send_ids(scripts::kAck, *kv.first, std::move(kv.second));
}

void Sweeper::send_fail(Queue &q, Completion &&c) {
    bool reject = c.result != KW_RESULT_RETRY;
    std::uniform_real_distribution<double> jitter(0.0, 1.0);
    std::vector<std::string> argv = {
        opts_.owner,
        q.is_keys ? "1" : "0",
        c.id,
        c.error.empty() ? (reject ? "rejected by the handler" : "the handler asked for a retry")
                        : c.error,
        reject ? "1" : "0",
        std::to_string(opts_.max_attempts),
        std::to_string(opts_.retry_base_ms),
        std::to_string(opts_.retry_max_ms),
        std::to_string(jitter(rng_)),
        std::to_string(c.retry_delay_ms)};
    std::vector<Completion> batch;
    batch.push_back(std::move(c));
    send_batch(scripts::kFail, q, std::move(argv), std::move(batch), [this](redisReply *r) {
        if (r->type != REDIS_REPLY_INTEGER) {
            sink_->log(KW_LOG_ERROR, "fail script: " + reply_to_string(r) +
                                         "; the item will come back when its lease ends");
            return;
        }
        if (r->integer == 1)
            counters_->retried.fetch_add(1);
        else if (r->integer == 2)
            counters_->dead.fetch_add(1);
        else
            counters_->late_acks.fetch_add(1);
    });
}

void Sweeper::send_ids(const Script &s, Queue &q, std::vector<Completion> &&all) {
    const bool ack = &s == &scripts::kAck;
    for (size_t i = 0; i < all.size(); i += kChunk) {
        size_t end = std::min(all.size(), i + kChunk);
        std::vector<std::string> argv = {opts_.owner};
        if (ack) argv.push_back(q.is_keys ? "1" : "0");
        std::vector<Completion> batch;
        for (size_t j = i; j < end; j++) {
            argv.push_back(all[j].id);
            batch.push_back(std::move(all[j]));
        }
        int64_t sent = static_cast<int64_t>(end - i);
        send_batch(s, q, std::move(argv), std::move(batch), [this, ack, sent](redisReply *r) {
            if (r->type != REDIS_REPLY_INTEGER) {
                sink_->log(KW_LOG_ERROR, std::string(ack ? "ack" : "release") +
                                             " failed: " + reply_to_string(r) +
                                             "; the items will be redelivered after their lease");
                return;
            }
            if (!ack) {
                counters_->released.fetch_add(r->integer);
                return;
            }
            counters_->acked.fetch_add(r->integer);
            // An ack for an item whose lease passed to another holder is refused.
            counters_->late_acks.fetch_add(sent - r->integer);
        });
    }
}

void Sweeper::send_batch(const Script &s, Queue &q, std::vector<std::string> argv,
                         std::vector<Completion> &&batch, ReplyFn on_done) {
    CompletionStore::Ticket ticket = store_.sent(std::move(batch));
    bool sent = eval(s, q, std::move(argv), [this, ticket, on_done](redisReply *r) {
        const ReplyError kind = classify(r);
        if (is_transient(kind) || kind == ReplyError::Ask ||
            (kind == ReplyError::Moved && !opts_.on_redirect)) {
            // Loading, busy, a slot on the move: Redis did nothing; send it again.
            store_.retry_later(ticket);
            completions_wait(reply_to_string(r));
            return;
        }
        if (kind == ReplyError::Moved) {
            // The slot is served by another master now: route them there.
            opts_.on_redirect(store_.take(ticket));
            return;
        }
        store_.confirmed(ticket);
        completion_backoff_ms_ = 0;
        on_done(r);
    });
    if (!sent) store_.retry_later(ticket);  // the connection is down: on_ready sends them
}

void Sweeper::completions_wait(const std::string &why) {
    int64_t previous = completion_backoff_ms_;
    completion_backoff_ms_ = opts_.reconnect.after(previous);
    if (completion_backoff_ms_ != previous)
        sink_->log(KW_LOG_WARN, "completions for " + endpoint_ + " must wait: " + why +
                                    "; sending them again in " +
                                    std::to_string(completion_backoff_ms_) +
                                    "ms (the items stay leased to us)");
    ack_timer_.arm(completion_backoff_ms_);
}

void Sweeper::prune_done() {
    int64_t oldest = wall_ms() - opts_.done_window_ms;
    for (auto &kv : queues_) {
        auto &mine = kv.second.mine;
        for (auto it = mine.begin(); it != mine.end();) {
            if (it->second >= 0 && it->second < oldest) {
                it = mine.erase(it);
                remembered_--;
            } else {
                ++it;
            }
        }
    }
    if (remembered_ > 0) prune_timer_.arm(std::max<int64_t>(opts_.done_window_ms, 1));
}

}  // namespace keywatch
