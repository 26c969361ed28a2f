// NodeIntake: the claim intake of one Redis node, the middle of the path of one expiry
// (docs/life-of-an-expiry.md). Node N's subscriber hands it every event it reads
// (on_event); when the read is done (flush) it passes them on without leaving node N:
//  - `expired`/`evicted` on the tracked db: to node N's sweeper, which claims the tracked
//    keys among them (Sweeper::claim_live) and hands the others back as untracked;
//  - `del`/`rename_from` on the tracked db: to the sweeper, which drops those keys from
//    its queue (Sweeper::forget), and on to the handlers like any other event (when one
//    takes them);
//  - events about keys an adopt rule matches, on the tracked db (core/queue/adopt_rules.h):
//    what the event table's adoption column says (AdoptUse): `adopt` for those that can
//    set, move or remove a TTL (Sweeper::adopt, after the read's claims and forgets), and
//    `forget` for those where the key left (move_from too);
//  - events subscribed only for that bookkeeping (tracking, adoption: no handler takes
//    them) go no further;
//  - any other event: straight to the dispatcher, or through the sweeper's
//    de-duplication across instances when dedupe.enable is on (Sweeper::untracked).
// Node N's sweeper hands what it claimed back here (deliver_tracked, deliver_untracked),
// and this intake gives it to the workers (Dispatcher::push). Events of keys in a slot
// node N no longer serves meet MOVED/ASK there; the sweeper passes them to the Fanout,
// which keeps them until the next topology.
// Loop thread only (the counters it writes are atomics).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/engine/dispatcher.h"
#include "core/engine/engine_counters.h"
#include "core/redis/event_loop.h"
#include "core/base/stats.h"
#include "core/engine/subscriber.h"
#include "core/redis/keyspace_events.h"
#include "core/sweeper/sweeper.h"

namespace keywatch {

class NodeIntake : public EventSink, public SweeperSink {
  public:
    struct Options {
        std::string ns;      // keywatch's namespace: its own keys are never news
        int tracked_db = 0;  // the db of the tracked keys (cluster: 0)
        bool dedupe = false;
    };

    // node: where this node's node.received is counted (null: nowhere).
    NodeIntake(EventLoop &loop, Options opts, Dispatcher &dispatcher, EngineCounters &counters,
               NodeStats *node, LogFn log);
    ~NodeIntake() override;
    NodeIntake(const NodeIntake &) = delete;
    NodeIntake &operator=(const NodeIntake &) = delete;

    // The node's sweeper (none when the engine serves no queue): set once, before start.
    void attach(Sweeper *sweeper) { sweeper_ = sweeper; }

    // EventSink: an event node N's subscriber read.
    void on_event(Event &&ev) override;
    // Passes on what on_event gathered (at the end of each read, and at stop).
    void flush();
    // The live claims gathered and not yet passed on, taken out (the node is retired:
    // the owner routes them to the masters of their slots).
    std::vector<Event> take_claims() {
        std::vector<Event> out;
        out.swap(claims_);
        return out;
    }
    // Likewise the adoptions gathered.
    std::vector<AdoptKey> take_adopts() {
        std::vector<AdoptKey> out;
        out.swap(adopts_);
        return out;
    }

    // SweeperSink: node N's sweeper hands over what it claimed and what was not tracked.
    void deliver_tracked(std::vector<Event> &items) override;
    void deliver_untracked(std::vector<Event> &events) override;
    size_t dispatch_room() const override;
    void shed_live(size_t count) override;
    void log(kw_log_level level, const std::string &message, const LogFields &fields) override {
        log_(level, message, fields);
    }

  private:
    // Counts the event, and looks up what its name means (last_spec_, last_bookkeeping_).
    void count(const Event &ev);
    // An event on the tracked db, when there are adopt rules: its key queued for adopt or
    // forget as the event table says (*forgotten: for forget).
    void route_adoption(Event &ev, bool *forgotten);
    static void on_flush(evutil_socket_t, short, void *arg);

    Options opts_;
    Dispatcher &dispatcher_;
    EngineCounters &counters_;
    NodeStats *node_;
    LogFn log_;
    Sweeper *sweeper_ = nullptr;
    EventPtr flush_ev_;
    bool flush_scheduled_ = false;
    int64_t batch_ts_ms_ = 0;  // the read's one clock reading
    // Events of the current read: live claims, keys deleted, everything else.
    std::vector<Event> claims_, others_;
    std::vector<std::string> deleted_;
    std::vector<AdoptKey> adopts_;
    // A flood is mostly one event name: what the last name means, looked up once per run
    // of one name (count): its counter, its row of the event table (null: not in it) and
    // whether it is subscribed only for the queues' bookkeeping (no handler takes it).
    std::string last_event_name_;
    std::atomic<int64_t> *last_event_counter_ = nullptr;
    const EventSpec *last_spec_ = nullptr;
    bool last_bookkeeping_ = false;
};

}  // namespace keywatch
