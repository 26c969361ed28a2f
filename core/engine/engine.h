// Engine: lifecycle, configuration and handlers: it owns the loop thread, the dispatcher
// (workers running the handlers) and the Fanout (nodes and topology), and stays off the
// path of each event, which runs node by node (docs/life-of-an-expiry.md). The C API's
// kw_engine_t wraps one. Handlers are core/engine/handler.h objects; a held event
// (core/engine/hold.h) completes through the engine's HoldHub. Thread-safety:
// add_handler/set_*_sink/start/stop are called by the owner, not concurrently with each
// other; stat()/stats_json()/ last_error()/log() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/engine/dispatcher.h"
#include "core/engine/engine_counters.h"
#include "core/redis/event_loop.h"
#include "core/engine/fanout.h"
#include "core/engine/filter.h"
#include "core/engine/handler.h"
#include "core/engine/hold.h"
#include "core/engine/in_flight_gate.h"
#include "core/engine/plan.h"
#include "core/base/stats.h"
#include "core/engine/subscriber.h"
#include "core/sweeper/adopt_scan.h"
#include "core/sweeper/sweeper.h"

namespace keywatch {

class Engine : private SubscriberSink, private HoldOwner {
  public:
    explicit Engine(Config config);
    ~Engine() override;
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Connection state changes (loop thread) and log lines (any engine thread).
    using StateSink =
        std::function<void(const std::string &node, kw_conn_state, const std::string &detail)>;
    using LogSink = LogFn;  // a line and its fields (core/base/log_fields.h)

    // Only before start(). On failure (KW_ERR_STATE) the handler is destroyed at once.
    int add_handler(const Filter &filter, HandlerPtr handler);
    // Only before start(); an empty function removes (logs then go to stderr: warnings
    // and errors).
    int set_state_sink(StateSink sink);
    int set_log_sink(LogSink sink);
    // A log line through the log sink (plugins' host->log). Any thread.
    void log(kw_log_level level, const std::string &message, const LogFields &fields) override;

    int start();
    // Everything start() does up to being subscribed to every node (the same checks, the
    // same statuses and messages), then disconnects: no worker runs, no sweeper claims, so
    // no handler is called and no item is taken. The engine cannot start afterwards.
    int check();
    int stop(int64_t timeout_ms);

    // Samples of a row the engine does not record itself (plugin.<counter>: the plugin
    // instances'), added to every snapshot at that row. Only before start(); the source
    // is called from any thread that takes a snapshot.
    using StatSource = std::function<void(std::vector<StatSample> *out)>;
    void set_stat_source(StatId row, StatSource source);

    // A statistic by name (core/base/stats.h: a histogram gives its count). Any thread.
    int stat(const std::string &name, int64_t *value) const;
    // Every sample, in the table's order (labelled families: one per label). Any thread.
    std::vector<StatSample> stats_snapshot() const;
    std::string stats_json() const;

    // Last error message: set by start() and stop().
    std::string last_error() const;

  private:
    struct Slot {
        Filter filter;
        HandlerPtr handler;
        std::unique_ptr<std::mutex> serial;  // for a serial() handler: one call at a time
        std::unique_ptr<InFlightGate> gate;  // for a max_in_flight() handler
    };
    // SubscriberSink (loop thread)
    void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) override;
    void on_started(Subscriber &sub, int status, const std::string &message) override;
    // start() and check(), in order: startable, plan_start, wire, launch (wait_started).
    int start_or_check(bool check_only);
    int startable();  // started once, a handler, a valid config (its TLS warnings logged)
    // What the handlers ask for (plan.h), before any connection.
    int plan_demand(Demand *out, std::string *err) const;
    // The handlers' demand, the seeds probed (into fo), the plan for that deployment.
    int plan_start(Fanout::Options *fo, Demand *demand, Plan *plan);
    // The subscribers' and sweepers' options from the plan; fixes the labelled stats.
    void wire(const Demand &demand, const Plan &plan, bool check_only, Fanout::Options *fo);
    // Fanout, workers and loop started; waits for the first handshake; the sweepers after.
    int launch(Fanout::Options fo, bool check_only);
    int wait_started(std::string *message);  // the backstop deadline; start_status_
    // A worker's take: with no handler that batches, handle() per event; else each such
    // handler gets the events it matches in one call, then the others run per event.
    void handle_take(Event *evs, size_t n);  // worker thread
    void handle(Event &ev);                  // worker thread
    // handle's parts: lateness and attempts; the per-event handlers (those that batch
    // skipped when skip_batching); the combined result to the hold or the sweepers.
    void prologue(Event &ev);
    void call_each(Event &ev, Delivery &delivery, bool skip_batching, int *combined, bool *matched);
    void finish(Event &ev, Delivery &delivery, int combined, bool matched);
    // One handler call; rc as the handler returned it, or its hold's part; kParked: the
    // handler is at its max_in_flight, the event is parked; kRelease: the engine stops.
    // Worker thread.
    int call(size_t handler, Event &ev, Delivery &delivery);
    static constexpr int kParked = -100;
    // The call itself, its place in the gate taken.
    int invoke(size_t handler, Event &ev, Delivery &delivery);
    // The take's events a handler that batches matches, in one handle_batch call of as
    // many as its gate has room for now (all of them without a gate); the rest parked.
    void call_batch(size_t handler, Event *evs, size_t n, std::deque<Delivery> &deliveries,
                    int *combined, char *matched);
    // One handle_batch call over events[0..k-1] (at[j]: events[j]'s index in the take).
    void batch_call(size_t handler, Event *const *events, const size_t *at, size_t k,
                    std::deque<Delivery> &deliveries, int *combined);
    // The handler is at its max_in_flight: an engine Hold on ev joins its gate's queue
    // (kParked), or the event is called now if room came meanwhile; kRelease: stopping.
    int park(size_t handler, Event &ev, Delivery &delivery);
    // A parked event with its place: the handler's call (worker thread) completes the
    // parked Hold, or holds the item again. Past hold.timeout it is not called.
    void run_parked(size_t handler, std::shared_ptr<Hold> parked);
    void say_full(size_t handler);  // the gate is full (said at most every 30 s: park())
    int64_t hold_expiry(const Event &ev) const;  // claim + hold.timeout; 0: untracked
    // Every lease/3 (as the sweeper looks at hold.timeout): the parked events past it are
    // taken out of their gates and released, even if nothing else parks. Loop thread.
    void expire_parked();
    // A call returned: its place in the handler's gate is free unless it held the event
    // (then the Hold's end frees it: hold_ended).
    void call_ended(size_t handler, bool held);
    // A place in the handler's gate is free: the next parked event, if any, goes to a
    // worker (the dispatcher). Any thread; never calls a handler.
    void free_place(size_t handler);
    // After a call: a held event's result completes its Hold (PENDING); PENDING without a
    // hold is RETRY (kPendingWithoutHold). Counts events.delivered.
    int settle(Event &ev, std::shared_ptr<Hold> held, int rc);
    void count_result(int rc);  // handler.errors / handler.retries
    // A claimed item no handler's filter took (acked unseen): counted, and said once per
    // queue with what to do. Worker thread.
    void note_unhandled(const Event &ev);
    // A tracked item's combined result goes to the sweepers. Any thread.
    void push_completion(Completion &&c);
    // HoldOwner (any thread)
    void hold_completed(size_t handler, int result) override;
    void hold_ended(size_t handler) override;
    void held_item_done(const Event &ev, int result, std::string error,
                        int64_t retry_delay_ms) override;
    // stop(): waits for the holds until the deadline, then releases what is still held.
    bool settle_holds(int64_t timeout_ms);
    void drain_completions();  // loop thread
    static void on_completions(evutil_socket_t, short, void *arg);
    void set_error(const std::string &msg);
    int64_t stat_value(StatId id) const;  // an unlabelled row's value
    void teardown();
    void abort_gates();  // stopping: the gates' parked events are released

    Config config_;
    std::string owner_;  // this engine's name in claims: random per engine
    std::vector<Slot> handlers_;
    bool batching_ = false;  // a handler batches(): handle_take's batch path
    StateSink state_sink_;
    LogSink log_sink_;
    std::shared_ptr<HoldHub> holds_;  // held events; closed by stop()

    bool running_ = false;
    bool started_ = false;              // start() was called: an engine starts once
    std::set<std::string> ever_ready_;  // loop thread: nodes that were READY once
    std::atomic<int64_t> reconnects_{0};
    std::unique_ptr<EventLoop> loop_;
    std::unique_ptr<Dispatcher> dispatcher_;
    std::unique_ptr<Fanout> fanout_;
    bool queues_ = false;  // the engine serves queues (has sweepers)
    EventPtr completion_ev_;
    std::unique_ptr<Timer> parked_timer_;  // expire_parked(); while running, with gates
    EngineCounters counters_;
    EngineStats stats_;  // labelled: per node, queue and handler; conn.nodes, conn.state
    // Set once start() has fixed the per-event, queue and handler records: until then a
    // snapshot taken on another thread (an HTTP scrape) reads none of them.
    std::atomic<bool> labelled_fixed_{false};
    SweeperCounters sweeper_counters_;
    CatchupCounters catchup_counters_;
    std::map<StatId, StatSource> stat_sources_;  // fixed before start

    std::mutex completion_mu_;  // workers -> loop
    std::vector<Completion> completions_;
    bool completions_signalled_ = false;

    std::mutex start_mu_;
    std::condition_variable start_cv_;
    bool start_done_ = false;
    int start_status_ = 0;
    std::string start_message_;

    mutable std::mutex err_mu_;
    std::string last_error_;

    std::mutex unhandled_mu_;
    std::set<std::string> unhandled_queues_;  // queues whose unhandled items were said
};

}  // namespace keywatch
