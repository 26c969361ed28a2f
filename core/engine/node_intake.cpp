// NodeIntake (see node_intake.h): one node's events in, sorted, and passed on per read; what
// the node's sweeper claimed, out to the workers. Loop thread only.
#include "core/engine/node_intake.h"

#include <algorithm>

#include "core/base/clock.h"
#include "core/queue/queue_keys.h"

namespace keywatch {

namespace {
// A read from Redis yields a few hundred events at most; they are passed on in one batch
// when the read is done, or earlier if a batch grows this large.
constexpr size_t kMaxPending = 1024;
}  // namespace

NodeIntake::NodeIntake(EventLoop &loop, Options opts, Dispatcher &dispatcher,
                       EngineCounters &counters, NodeStats *node, LogFn log)
    : opts_(std::move(opts)),
      dispatcher_(dispatcher),
      counters_(counters),
      node_(node),
      log_(std::move(log)),
      flush_ev_(event_new(loop.base(), -1, 0, &NodeIntake::on_flush, this)) {}

NodeIntake::~NodeIntake() = default;

void NodeIntake::count(const Event &ev) {
    counters_.received.fetch_add(1, std::memory_order_relaxed);
    if (node_) node_->received.fetch_add(1, std::memory_order_relaxed);
    if (ev.name != last_event_name_) {
        auto it = counters_.per_event.find(ev.name);
        last_event_counter_ = it == counters_.per_event.end() ? nullptr : &it->second;
        last_event_name_ = ev.name;
        last_spec_ = find_event(ev.name);
        const std::vector<std::string> *own = sweeper_ ? &sweeper_->bookkeeping_events() : nullptr;
        last_bookkeeping_ = own && std::find(own->begin(), own->end(), ev.name) != own->end();
    }
    if (last_event_counter_) last_event_counter_->fetch_add(1, std::memory_order_relaxed);
}

void NodeIntake::route_adoption(Event &ev, bool *forgotten) {
    const AdoptRules &rules = sweeper_->adopt_rules();
    const AdoptUse use = last_spec_ ? last_spec_->adopt : AdoptUse::None;
    if (use != AdoptUse::Adopt && use != AdoptUse::Snapshot && use != AdoptUse::Forget) return;
    int rule = rules.match(ev.key);
    if (rule < 0) return;
    if (use == AdoptUse::Forget) {
        deleted_.push_back(ev.key);
        *forgotten = true;
    } else if (use == AdoptUse::Adopt || rules.rules()[static_cast<size_t>(rule)].snapshot) {
        adopts_.push_back({ev.key, rule, ev.slot, true});
    }
}

void NodeIntake::on_event(Event &&ev) {
    if (is_keywatch_key(opts_.ns, ev.key)) return;
    // One clock read per read from Redis: events that arrived together share it.
    if (!flush_scheduled_) batch_ts_ms_ = wall_ms();
    ev.ts_ms = batch_ts_ms_;
    count(ev);
    const bool tracked_db = sweeper_ && ev.db == opts_.tracked_db;
    bool forgotten = false;
    if (tracked_db && !sweeper_->adopt_rules().empty()) route_adoption(ev, &forgotten);
    if (tracked_db && (ev.name == "expired" || ev.name == "evicted")) {
        // Possibly a tracked key: the sweeper claims it, or hands it back as untracked.
        claims_.push_back(std::move(ev));
    } else {
        if (tracked_db && !forgotten && (ev.name == "del" || ev.name == "rename_from"))
            deleted_.push_back(ev.key);
        // Subscribed only for the queues' bookkeeping (tracking, adoption): no handler
        // takes it.
        if (!last_bookkeeping_) others_.push_back(std::move(ev));
    }
    if (claims_.size() + others_.size() + adopts_.size() >= kMaxPending) {
        flush();
    } else if (!flush_scheduled_) {
        // Runs once the loop is done with the current read.
        flush_scheduled_ = true;
        event_active(flush_ev_.get(), EV_READ, 0);
    }
}

void NodeIntake::on_flush(evutil_socket_t, short, void *arg) {
    static_cast<NodeIntake *>(arg)->flush();
}

void NodeIntake::flush() {
    flush_scheduled_ = false;
    if (!claims_.empty()) {
        std::vector<Event> claims;
        claims.swap(claims_);
        // Room for as many as came now (the next read's are likely as many), rather than
        // growing event by event, each growth moving every Event.
        claims_.reserve(claims.size());
        sweeper_->claim_live(std::move(claims));
    }
    if (!deleted_.empty()) {
        std::vector<std::string> keys;
        keys.swap(deleted_);
        sweeper_->forget(std::move(keys));
    }
    if (!adopts_.empty()) {
        // After the claims and forgets, on the same connection: a key that expired and
        // was written again is claimed before it is adopted again. Only as sent here: on a
        // cluster what a slot on the move refused is sent again later, live claims at the
        // next topology, adoptions once their backoff is over (Fanout::park_adopt).
        std::vector<AdoptKey> keys;
        keys.swap(adopts_);
        sweeper_->adopt(std::move(keys));
    }
    if (others_.empty()) return;
    if (opts_.dedupe && sweeper_) {
        std::vector<Event> events;
        events.swap(others_);
        sweeper_->untracked(std::move(events));
        return;
    }
    deliver_untracked(others_);  // leaves others_ empty
}

void NodeIntake::deliver_tracked(std::vector<Event> &items) {
    // Claimed items are never dropped: the sweeper claims no more than room() allows.
    dispatcher_.push(items, true);
}

size_t NodeIntake::dispatch_room() const {
    return dispatcher_.room();
}

void NodeIntake::deliver_untracked(std::vector<Event> &events) {
    shed_live(dispatcher_.push(events));
}

void NodeIntake::shed_live(size_t count) {
    int64_t dropped = static_cast<int64_t>(count);
    if (dropped == 0) return;
    // Live events only: nothing tracked is lost by dropping them here.
    int64_t before = counters_.dropped.fetch_add(dropped);
    if (before == 0 || (before / 100000) != ((before + dropped) / 100000))
        log_(KW_LOG_WARN,
             "dispatch queue full (dispatch.queue_size): " + std::to_string(before + dropped) +
                 " live event(s) dropped so far; handlers are too slow: raise "
                 "workers or dispatch.queue_size, or make handlers faster",
             {});
}

}  // namespace keywatch
