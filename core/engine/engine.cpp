#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "core/engine/config_slices.h"
#include "core/redis/sentinel.h"
#include "core/redis/topology.h"

namespace keywatch {

namespace {
std::string random_owner() {
    std::random_device rd;
    char buf[24];
    snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    return buf;
}
}  // namespace

Engine::Engine(Config config)
    : config_(std::move(config)),
      owner_(random_owner()),
      loop_(std::make_unique<EventLoop>()),
      dispatcher_(
          std::make_unique<Dispatcher>(static_cast<size_t>(config_.queue_size), config_.workers,
                                       [this](Event *evs, size_t n) { handle_take(evs, n); })) {
    holds_ = std::make_shared<HoldHub>(static_cast<HoldOwner *>(this));
    completion_ev_.reset(event_new(loop_->base(), -1, 0, &Engine::on_completions, this));
}

Engine::~Engine() {
    stop(config_.stop_timeout_ms);
    holds_->close();
    handlers_.clear();       // the handlers' release, after the workers stopped
    completion_ev_.reset();  // before the loop's event_base goes
}

int Engine::add_handler(const Filter &filter, HandlerPtr handler) {
    if (!handler) return KW_ERR_INVALID_ARG;
    if (started_) {
        set_error("handlers must be added before kw_engine_start");
        return KW_ERR_STATE;
    }
    auto serial = handler->serial() ? std::make_unique<std::mutex>() : nullptr;
    batching_ = batching_ || handler->batches();
    auto gate = handler->max_in_flight() > 0
                    ? std::make_unique<InFlightGate>(handler->max_in_flight())
                    : nullptr;
    handlers_.push_back({filter, std::move(handler), std::move(serial), std::move(gate)});
    return KW_OK;
}

int Engine::set_state_sink(StateSink sink) {
    if (started_) {
        set_error("callbacks must be set before kw_engine_start");
        return KW_ERR_STATE;
    }
    state_sink_ = std::move(sink);
    return KW_OK;
}

int Engine::set_log_sink(LogSink sink) {
    if (started_) {
        set_error("callbacks must be set before kw_engine_start");
        return KW_ERR_STATE;
    }
    log_sink_ = std::move(sink);
    return KW_OK;
}

int Engine::plan_demand(Demand *out, std::string *err) const {
    std::vector<HandlerNeeds> needs;
    for (size_t i = 0; i < handlers_.size(); i++)
        needs.push_back(HandlerNeeds::of(
            handlers_[i].filter,
            "handler " + std::to_string(i + 1) + " (" + handlers_[i].handler->name() + ")"));
    return keywatch::plan_demand(plan_config(config_), needs, out, err);
}

int Engine::start() {
    return start_or_check(false);
}

int Engine::check() {
    return start_or_check(true);
}

// start() and check(): plan what the handlers need from Redis, probe the seeds, wire the
// subscribers and sweepers from the plan, launch them and wait for the first handshake.
int Engine::start_or_check(bool check_only) {
    if (int rc = startable(); rc != KW_OK) return rc;
    Fanout::Options fo = fanout_options(config_, owner_);  // the validated config's settings
    Demand demand;
    Plan plan;
    if (int rc = plan_start(&fo, &demand, &plan); rc != KW_OK) return rc;
    wire(demand, plan, check_only, &fo);
    return launch(std::move(fo), check_only);
}

int Engine::startable() {
    if (started_) {
        set_error(running_ ? "the engine is already running"
                           : "an engine can be started only once: create a new one");
        return KW_ERR_STATE;
    }
    if (handlers_.empty()) {
        set_error(
            "no handler registered: add one with kw_engine_add_handler before "
            "kw_engine_start");
        return KW_ERR_STATE;
    }
    std::string why;
    if (int rc = config_.validate(&why); rc != KW_OK) {
        set_error(why);
        return rc;
    }
    for (const std::string &warning : config_.tls_warnings()) log(KW_LOG_WARN, warning, {});
    return KW_OK;
}

int Engine::plan_start(Fanout::Options *fo, Demand *demand, Plan *plan) {
    std::string why;
    if (int rc = plan_demand(demand, &why); rc != KW_OK) {
        set_error(why);
        return rc;
    }
    auto waiting = [this](const std::string &m) { log(KW_LOG_INFO, m, {}); };
    std::vector<RedisUrl> seeds = config_.effective_seeds();
    if (seeds.front().is_sentinel()) {
        // The one node is the master the sentinels name.
        FoundMaster found;
        if (int rc = find_master(seeds.front(), config_.connect_timeout_ms, &found, &why);
            rc != KW_OK) {
            set_error(why);
            return rc;
        }
        log(KW_LOG_INFO,
            "sentinel " + found.sentinel + " names " + found.url.endpoint() + " as master '" +
                found.url.master_name + "'",
            {{"node", found.url.endpoint()}});
        seeds = {found.url};
    }
    if (int rc = probe_seeds(seeds, config_.connect_timeout_ms, config_.mode, &fo->seed,
                             &fo->cluster, &fo->topology, &why,
                             /*wait_for_server=*/true, waiting);
        rc != KW_OK) {
        set_error(why);
        return rc;
    }
    const Deployment deployment{fo->cluster, probes_topology(config_.mode, fo->seed),
                                config_.url.db};
    if (int rc = make_plan(plan_config(config_), *demand, deployment, plan, &why); rc != KW_OK) {
        set_error(why);
        return rc;
    }
    return KW_OK;
}

void Engine::wire(const Demand &demand, const Plan &plan, bool check_only, Fanout::Options *fo) {
    Subscriber::Options &opts = fo->sub;
    Sweeper::Options &sweep = fo->sweep;
    const bool need_sweeper = demand.sweeps();
    sweep.track_keys = demand.track_keys;
    sweep.task_queues = demand.task_queues;
    sweep.bookkeeping_events = demand.bookkeeping_events;
    opts.event_patterns = plan.keyevent_patterns;
    opts.unknown_events = demand.unknown_events;
    opts.keyspace_patterns = plan.keyspace_patterns;
    opts.notify_flags = plan.notify_flags;
    opts.channel_rules = plan.channel_rules;
    opts.script_keys = plan.script_keys;
    // What a retry cannot fix fails the start at once: a db the server lacks, an ACL user
    // without the commands, channels or keys keywatch needs.
    opts.select_db = !fo->cluster;
    opts.check_scripts = need_sweeper;
    opts.dry_run = check_only;
    // A check subscribes (its handshake checks the scripts' commands and keys) but makes no
    // sweeper and starts no worker: what it reads waits in the dispatcher and is dropped.
    fo->sweepers = need_sweeper && !check_only;
    fo->dispatcher = dispatcher_.get();
    fo->events = &counters_;
    fo->counters = &sweeper_counters_;
    fo->sweep.catchup_counters = &catchup_counters_;
    fo->stats = &stats_;
    queues_ = need_sweeper;
    for (auto &e : demand.events) counters_.per_event[e];  // keys fixed from here on
    stats_.set_handlers(handlers_.size());
    if (sweep.track_keys) stats_.set_queues({kKeysQueue});
    stats_.set_queues(sweep.task_queues);
    labelled_fixed_.store(true, std::memory_order_release);
    started_ = true;
}

int Engine::launch(Fanout::Options fo, bool check_only) {
    try {
        fanout_ = std::make_unique<Fanout>(*loop_, fo, static_cast<SubscriberSink *>(this));
        if (!check_only) dispatcher_->start();
        loop_->start();
    } catch (const std::exception &e) {
        teardown();
        set_error(std::string("cannot start the engine: ") + e.what());
        return KW_ERR_INTERNAL;
    }
    loop_->post([this] { fanout_->start(); });
    std::string message;
    int status = wait_started(&message);
    if (status != KW_OK || check_only) {
        teardown();
        if (status != KW_OK) set_error(message);
        return status;
    }
    if (queues_) loop_->run_sync([this] { fanout_->start_sweepers(); });
    const bool gates = std::any_of(handlers_.begin(), handlers_.end(),
                                   [](const Slot &h) { return h.gate != nullptr; });
    if (queues_ && gates)
        loop_->run_sync([this] {
            parked_timer_ = std::make_unique<Timer>(loop_->base(), [this] { expire_parked(); });
            parked_timer_->arm(std::max<int64_t>(config_.lease_ms / 3, 1));
        });
    running_ = true;
    return KW_OK;
}

int Engine::wait_started(std::string *message) {
    std::unique_lock<std::mutex> lock(start_mu_);
    // The subscriber has its own deadline (redis.connect_timeout); this is a backstop.
    bool done =
        start_cv_.wait_for(lock, std::chrono::milliseconds(config_.connect_timeout_ms * 2 + 2000),
                           [this] { return start_done_; });
    if (!done) {
        *message = "timed out starting: no answer from " + config_.effective_url().endpoint();
        return KW_ERR_TIMEOUT;
    }
    *message = start_message_;
    return start_status_;
}

void Engine::abort_gates() {
    // The parked events are released here (their Holds end: back to their queues).
    for (auto &h : handlers_) {
        if (!h.gate) continue;
        std::vector<InFlightGate::Parked> parked = h.gate->abort();
        dispatcher_->parked(-static_cast<int64_t>(parked.size()));
    }
}

void Engine::teardown() {
    if (loop_ && fanout_) loop_->run_sync([this] { fanout_->shutdown(); });
    if (dispatcher_) {
        std::vector<Event> abandoned;
        abort_gates();
        dispatcher_->stop(0, &abandoned);
        counters_.abandoned += static_cast<int64_t>(abandoned.size());
    }
    if (loop_) loop_->stop();
    fanout_.reset();
}

int Engine::stop(int64_t timeout_ms) {
    if (!running_) return KW_OK;
    running_ = false;
    if (timeout_ms < 0) timeout_ms = config_.stop_timeout_ms;
    // No more reads: whatever was read is handed to the workers (by the nodes' intakes),
    // then they get until the deadline to finish.
    loop_->run_sync([this] {
        fanout_->shutdown_subscribers();
        fanout_->stop_claiming();
        parked_timer_.reset();  // the parked events are given back below (abort_gates)
    });
    std::vector<Event> abandoned;
    auto deadline_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    bool finished = dispatcher_->wait_idle(timeout_ms);
    // A worker still waiting for room in a handler's gate gives its events back now.
    abort_gates();
    dispatcher_->shutdown(&abandoned);
    counters_.abandoned += static_cast<int64_t>(abandoned.size());
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_at - std::chrono::steady_clock::now());
    size_t held = holds_->held();
    bool holds_done = settle_holds(left.count());
    if (queues_) {
        // Claimed items nobody will handle now: due again at once, for another instance
        // (or the next start), instead of waiting for their leases to run out.
        std::vector<Completion> back;
        for (auto &ev : abandoned)
            if (ev.tracked()) back.push_back({ev.queue, ev.key, kRelease, "", ev.slot, ev.ts_ms});
        if (!back.empty()) {
            std::lock_guard<std::mutex> lock(completion_mu_);
            for (auto &c : back) completions_.push_back(std::move(c));
        }
    }
    if (queues_) {
        // Send the acks of what the workers finished and wait (briefly) for the answers;
        // anything not acked comes back when its lease ends.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        size_t outstanding = 1;
        while (outstanding > 0 && std::chrono::steady_clock::now() < deadline) {
            loop_->run_sync([&] {
                drain_completions();
                outstanding = fanout_->outstanding();
            });
            if (outstanding > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    loop_->run_sync([this] { fanout_->shutdown(); });
    loop_->stop();
    fanout_.reset();
    if (!holds_done) {
        set_error("stop: " + std::to_string(held) +
                  " held event(s) were still not completed after " + std::to_string(timeout_ms) +
                  "ms; their items were put back in their queues (items.released) and later "
                  "completions return KW_ERR_STATE");
        return KW_ERR_TIMEOUT;
    }
    if (!finished) {
        set_error("stop: handlers were still busy after " + std::to_string(timeout_ms) + "ms; " +
                  std::to_string(abandoned.size()) +
                  " queued event(s) were abandoned (events.abandoned; claimed items were put "
                  "back in their queues)");
        return KW_ERR_TIMEOUT;
    }
    return KW_OK;
}

namespace {
// Several handlers may match: the item is acked only if all ack; any REJECT sends it to the
// dead letters, else any RETRY retries it (core/engine/hold.h for held events).
// kRelease (a handler's gate was aborted: the engine stops) ranks between ACK and RETRY,
// as for held items (core/engine/hold.cpp).
void combine(int *combined, int rc) {
    if (rc == kRelease) {
        if (*combined == KW_RESULT_ACK) *combined = kRelease;
    } else if (rc == KW_RESULT_RETRY) {
        if (*combined == KW_RESULT_ACK || *combined == kRelease) *combined = KW_RESULT_RETRY;
    } else if (rc != KW_RESULT_ACK) {
        *combined = KW_RESULT_REJECT;  // unknown codes count as REJECT
    }
}

int64_t us_since(std::chrono::steady_clock::time_point began) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 began)
        .count();
}
}  // namespace

void Engine::handle_take(Event *evs, size_t n) {
    if (!batching_) {
        for (size_t i = 0; i < n; i++) handle(evs[i]);
        return;
    }
    std::deque<Delivery> deliveries;  // not movable: built in place, one per event
    std::vector<int> combined(n, KW_RESULT_ACK);
    std::vector<char> matched(n, 0);
    for (size_t i = 0; i < n; i++) {
        prologue(evs[i]);
        deliveries.emplace_back(*holds_, evs[i]);
    }
    for (size_t h = 0; h < handlers_.size(); h++)
        if (handlers_[h].handler->batches())
            call_batch(h, evs, n, deliveries, combined.data(), matched.data());
    for (size_t i = 0; i < n; i++) {
        bool m = matched[i] != 0;
        call_each(evs[i], deliveries[i], true, &combined[i], &m);
        finish(evs[i], deliveries[i], combined[i], m);
    }
}

void Engine::handle(Event &ev) {
    prologue(ev);
    int combined = KW_RESULT_ACK;
    bool matched = false;
    Delivery delivery(*holds_, ev);
    call_each(ev, delivery, false, &combined, &matched);
    finish(ev, delivery, combined, matched);
}

void Engine::prologue(Event &ev) {
    if (!ev.tracked()) return;
    ev.max_attempts = static_cast<int>(config_.max_attempts);
    // Lateness of first deliveries: retries are late on purpose.
    int64_t late = ev.attempt == 1 ? wall_ms() - ev.deadline_ms : 0;
    if (ev.attempt == 1) stats_.lateness(ev.queue, late);
    int64_t seen = counters_.lateness_max.load(std::memory_order_relaxed);
    while (late > seen && !counters_.lateness_max.compare_exchange_weak(seen, late)) {
    }
}

void Engine::call_each(Event &ev, Delivery &delivery, bool skip_batching, int *combined,
                       bool *matched) {
    for (size_t i = 0; i < handlers_.size(); i++) {
        auto &h = handlers_[i];
        if (skip_batching && h.handler->batches()) continue;
        if (!h.filter.matches(ev.name, ev.db, ev.key, ev.queue)) continue;
        *matched = true;
        const auto began = std::chrono::steady_clock::now();
        int rc = call(i, ev, delivery);
        if (rc == kRelease) {  // not called: the engine stops
            combine(combined, rc);
            continue;
        }
        if (rc == kParked) continue;  // called later: run_parked
        stats_.handler_done(i, rc, us_since(began));
        if (rc == KW_RESULT_PENDING) continue;  // completes through its Hold
        count_result(rc);
        combine(combined, rc);
    }
}

void Engine::finish(Event &ev, Delivery &delivery, int combined, bool matched) {
    bool tracked = ev.tracked();
    if (tracked && !matched) note_unhandled(ev);
    if (delivery.held()) {
        delivery.finish(combined, std::move(ev.error));
        return;
    }
    if (tracked && matched && combined != kRelease) stats_.queue_done(ev.queue, combined);
    if (tracked)
        push_completion({std::move(ev.queue), std::move(ev.key), combined, std::move(ev.error),
                         ev.slot, ev.ts_ms});
}

void Engine::call_batch(size_t index, Event *evs, size_t n, std::deque<Delivery> &deliveries,
                        int *combined, char *matched) {
    Slot &h = handlers_[index];
    std::vector<Event *> pick;
    std::vector<size_t> at;
    for (size_t i = 0; i < n; i++) {
        Event &ev = evs[i];
        if (!h.filter.matches(ev.name, ev.db, ev.key, ev.queue)) continue;
        matched[i] = 1;
        pick.push_back(&ev);
        at.push_back(i);
    }
    size_t k = pick.size();
    if (h.gate) {
        // As many as there is room for now; the others are parked, in order.
        if (h.gate->enter(pick.size(), &k) == InFlightGate::ABORTED) {
            for (size_t j = 0; j < pick.size(); j++) combine(&combined[at[j]], kRelease);
            return;
        }
        for (size_t j = k; j < pick.size(); j++)
            if (park(index, *pick[j], deliveries[at[j]]) == kRelease)
                combine(&combined[at[j]], kRelease);
    }
    if (k > 0) batch_call(index, pick.data(), at.data(), k, deliveries, combined);
}

void Engine::batch_call(size_t index, Event *const *events, const size_t *at, size_t k,
                        std::deque<Delivery> &deliveries, int *combined) {
    Slot &h = handlers_[index];
    std::vector<int> rcs(k, Handler::kNoResult);
    for (size_t j = 0; j < k; j++) deliveries[at[j]].begin_call(index);
    const auto began = std::chrono::steady_clock::now();
    try {
        std::unique_lock<std::mutex> one_at_a_time;
        if (h.serial) one_at_a_time = std::unique_lock<std::mutex>(*h.serial);
        h.handler->handle_batch(events, k, rcs.data());
    } catch (...) {
        // Nothing crosses back into the engine: the events without a result are retried.
        for (size_t j = 0; j < k; j++)
            if (rcs[j] == Handler::kNoResult && events[j]->error.empty())
                events[j]->error = "the handler threw an exception";
    }
    const int64_t took = us_since(began);
    stats_.handler_batch(index);
    for (size_t j = 0; j < k; j++) {
        Event &ev = *events[j];
        int rc = rcs[j];
        if (rc == Handler::kNoResult) {
            rc = KW_RESULT_RETRY;
            if (ev.error.empty()) ev.error = h.handler->name() + ": gave this event no result";
        }
        std::shared_ptr<Hold> held = deliveries[at[j]].end_call();
        const bool was_held = held != nullptr;
        rc = settle(ev, std::move(held), rc);
        call_ended(index, was_held);
        // Each event records the duration of the call it was in.
        stats_.handler_done(index, rc, took);
        if (rc == KW_RESULT_PENDING) continue;
        count_result(rc);
        combine(&combined[at[j]], rc);
    }
}

void Engine::call_ended(size_t index, bool held) {
    if (!held) free_place(index);
}

void Engine::hold_ended(size_t handler) {
    free_place(handler);
}

void Engine::free_place(size_t index) {
    InFlightGate *gate = handlers_[index].gate.get();
    if (!gate) return;
    // Any thread, maybe inside a plugin's host->complete or under the hub's lock: the
    // parked events that now have a place are called on a worker.
    std::vector<InFlightGate::Parked> ready = gate->release(1);
    if (!ready.empty()) dispatcher_->parked(-static_cast<int64_t>(ready.size()));
    for (auto &p : ready) {
        std::shared_ptr<Hold> hold = std::move(p.hold);
        dispatcher_->post([this, index, hold]() mutable { run_parked(index, std::move(hold)); });
    }
}

void Engine::note_unhandled(const Event &ev) {
    counters_.unhandled.fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(unhandled_mu_);
        if (!unhandled_queues_.insert(ev.queue).second) return;
    }
    log(KW_LOG_WARN,
        "queue '" + ev.queue + "': item " + event_id(ev) +
            " matched no handler's filter and was acked without a handler (items.unhandled "
            "counts them; said once per queue). An engine takes every due item of the queues "
            "it serves: give it a handler whose filter takes all of this queue's items, or "
            "keep the items of services that share this Redis in their own namespace",
        {{"queue", ev.queue}, {"event_id", event_id(ev)}});
}

int Engine::call(size_t index, Event &ev, Delivery &delivery) {
    size_t took = 1;
    if (handlers_[index].gate) {
        const InFlightGate::Entry entry = handlers_[index].gate->enter(1, &took);
        if (entry == InFlightGate::ABORTED) return kRelease;  // the engine stops
        if (entry == InFlightGate::FULL) return park(index, ev, delivery);
    }
    return invoke(index, ev, delivery);
}

int Engine::invoke(size_t index, Event &ev, Delivery &delivery) {
    Slot &h = handlers_[index];
    int rc;
    delivery.begin_call(index);
    try {
        std::unique_lock<std::mutex> one_at_a_time;
        if (h.serial) one_at_a_time = std::unique_lock<std::mutex>(*h.serial);
        rc = h.handler->handle(ev);
    } catch (...) {
        // A C++ handler may throw; nothing crosses back into the engine.
        rc = KW_RESULT_RETRY;
        if (ev.error.empty()) ev.error = "the handler threw an exception";
    }
    stats_.handler_batch(index);
    std::shared_ptr<Hold> held = delivery.end_call();
    const bool was_held = held != nullptr;
    rc = settle(ev, std::move(held), rc);
    call_ended(index, was_held);
    return rc;
}

int Engine::park(size_t index, Event &ev, Delivery &delivery) {
    std::shared_ptr<Hold> hold = delivery.park(index);
    if (!hold) return kRelease;  // the engine stops
    InFlightGate::Parking p =
        handlers_[index].gate->park({std::move(hold), hold_expiry(ev)}, wall_ms(), 30000);
    dispatcher_->parked((p.entry == InFlightGate::FULL ? 1 : 0) -
                        static_cast<int64_t>(p.expired.size()));
    if (p.say_full) say_full(index);
    if (p.entry == InFlightGate::ENTERED) run_parked(index, std::move(p.run.hold));  // room came
    return kParked;  // p.expired, and p.run.hold when ABORTED, are released here
}

int64_t Engine::hold_expiry(const Event &ev) const {
    // A tracked item's lease is renewed up to hold.timeout after its claim: past that the
    // sweeper released it for redelivery.
    return ev.tracked() ? ev.ts_ms + config_.hold_timeout_ms : 0;
}

void Engine::expire_parked() {
    parked_timer_->arm(std::max<int64_t>(config_.lease_ms / 3, 1));
    const int64_t now = wall_ms();
    for (auto &h : handlers_) {
        if (!h.gate) continue;
        std::vector<InFlightGate::Parked> expired = h.gate->expire(now);
        dispatcher_->parked(-static_cast<int64_t>(expired.size()));
    }  // released here: the sweeper released their items already, or does at its next look
}

void Engine::run_parked(size_t index, std::shared_ptr<Hold> parked) {
    Event ev = parked->event();
    ev.error.clear();
    if (ev.tracked() && wall_ms() >= hold_expiry(ev)) {
        parked.reset();  // released at hold.timeout: not called
        call_ended(index, false);
        return;
    }
    int combined = KW_RESULT_ACK;
    if (handlers_[index].handler->batches()) {
        std::deque<Delivery> deliveries;
        deliveries.emplace_back(*holds_, ev, *parked);
        Event *events[1] = {&ev};
        const size_t at[1] = {0};
        batch_call(index, events, at, 1, deliveries, &combined);
    } else {
        Delivery delivery(*holds_, ev, *parked);
        const auto began = std::chrono::steady_clock::now();
        const int rc = invoke(index, ev, delivery);
        stats_.handler_done(index, rc, us_since(began));
        if (rc != KW_RESULT_PENDING) {
            count_result(rc);
            combine(&combined, rc);
        }
    }
    // Held again: the new Hold completes the item; else the call's result does.
    parked->hand_on(combined, combined == KW_RESULT_ACK ? "" : std::move(ev.error));
}

void Engine::say_full(size_t index) {
    Slot &h = handlers_[index];
    const std::string name = h.handler->name();
    // Information, not a warning: a full gate is the limit doing its work (exec with more
    // events than max_in_flight); handler.waiting staying up is what to watch.
    log(KW_LOG_INFO,
        "handler " + name + ": at its max_in_flight (" + std::to_string(h.gate->limit()) +
            "): its next events wait for room, parked while the workers go on "
            "(handler.waiting." +
            std::to_string(index) + " counts them; said at most every 30 s)",
        {{"handler", name}});
}

int Engine::settle(Event &ev, std::shared_ptr<Hold> held, int rc) {
    counters_.delivered.fetch_add(1, std::memory_order_relaxed);
    if (held) {
        // Held, but returned a result: that result completes the Hold.
        if (rc != KW_RESULT_PENDING)
            held->complete(rc == KW_RESULT_ACK || rc == KW_RESULT_RETRY ? rc : KW_RESULT_REJECT,
                           ev.error, -1);
        return KW_RESULT_PENDING;
    }
    if (rc == KW_RESULT_PENDING) {
        rc = KW_RESULT_RETRY;
        ev.error = kPendingWithoutHold;
    }
    return rc;
}

void Engine::count_result(int rc) {
    if (rc == KW_RESULT_ACK) return;
    counters_.handler_errors.fetch_add(1, std::memory_order_relaxed);
    if (rc == KW_RESULT_RETRY) counters_.handler_retries.fetch_add(1, std::memory_order_relaxed);
}

void Engine::hold_completed(size_t handler, int result) {
    count_result(result);
    stats_.handler_result(handler, result);
}

void Engine::held_item_done(const Event &ev, int result, std::string error,
                            int64_t retry_delay_ms) {
    if (!ev.tracked()) return;
    if (result != kRelease) stats_.queue_done(ev.queue, result);
    Completion c{ev.queue, ev.key, result, std::move(error), ev.slot, ev.ts_ms};
    c.retry_delay_ms = retry_delay_ms;
    push_completion(std::move(c));
}

void Engine::push_completion(Completion &&c) {
    bool wake;
    {
        std::lock_guard<std::mutex> lock(completion_mu_);
        completions_.push_back(std::move(c));
        wake = !completions_signalled_;  // one wake-up per drain
        completions_signalled_ = true;
    }
    if (wake) event_active(completion_ev_.get(), EV_READ, 0);
}

bool Engine::settle_holds(int64_t timeout_ms) {
    bool done = holds_->wait_idle(timeout_ms);
    // Still held: back to the queue for another engine; a later completion is refused.
    std::vector<Completion> back;
    for (auto &ev : holds_->close())
        if (ev.tracked()) back.push_back({ev.queue, ev.key, kRelease, "", ev.slot, ev.ts_ms});
    if (!back.empty()) {
        std::lock_guard<std::mutex> lock(completion_mu_);
        for (auto &c : back) completions_.push_back(std::move(c));
    }
    return done;
}

void Engine::on_completions(evutil_socket_t, short, void *arg) {
    static_cast<Engine *>(arg)->drain_completions();
}

void Engine::drain_completions() {
    std::vector<Completion> all;
    {
        std::lock_guard<std::mutex> lock(completion_mu_);
        all.swap(completions_);
        completions_signalled_ = false;
    }
    if (!queues_ || all.empty()) return;
    fanout_->complete(std::move(all));
}

void Engine::on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) {
    // A node's first READY is a connect; any later one a reconnect.
    const bool reconnect = state == KW_CONN_READY && !ever_ready_.insert(sub.endpoint()).second;
    if (reconnect) reconnects_.fetch_add(1, std::memory_order_relaxed);
    stats_.node_state(sub.endpoint(), state, reconnect);
    if (state_sink_) state_sink_(sub.endpoint(), state, detail);
}

void Engine::on_started(Subscriber &, int status, const std::string &message) {
    std::lock_guard<std::mutex> lock(start_mu_);
    start_done_ = true;
    start_status_ = status;
    start_message_ = message;
    start_cv_.notify_all();
}

void Engine::log(kw_log_level level, const std::string &message, const LogFields &fields) {
    if (log_sink_) {
        log_sink_(level, message, fields);
        return;
    }
    if (level >= KW_LOG_WARN)
        fprintf(stderr, "keywatch: %s: %s\n", level == KW_LOG_WARN ? "warning" : "error",
                message.c_str());
}

void Engine::set_error(const std::string &msg) {
    std::lock_guard<std::mutex> lock(err_mu_);
    last_error_ = msg;
}

std::string Engine::last_error() const {
    std::lock_guard<std::mutex> lock(err_mu_);
    return last_error_;
}

int64_t Engine::stat_value(StatId id) const {
    auto load = [](const std::atomic<int64_t> &a) { return a.load(std::memory_order_relaxed); };
    const SweeperCounters &sc = sweeper_counters_;
    switch (id) {
        case StatId::EVENTS_RECEIVED:
            return load(counters_.received);
        case StatId::EVENTS_DELIVERED:
            return load(counters_.delivered);
        case StatId::EVENTS_DROPPED:
            return load(counters_.dropped);
        case StatId::EVENTS_ABANDONED:
            return load(counters_.abandoned);
        case StatId::EVENTS_SUPPRESSED:
            return load(sc.suppressed);
        case StatId::EVENTS_UNROUTED:
            return load(sc.unrouted);
        case StatId::HANDLER_ERRORS:
            return load(counters_.handler_errors);
        case StatId::HANDLER_RETRIES:
            return load(counters_.handler_retries);
        case StatId::CONN_RECONNECTS:
            return load(reconnects_);
        case StatId::CONN_STATE:
            return stats_.worst_state();
        case StatId::CONN_NODES:
            return stats_.node_count();
        case StatId::TOPOLOGY_REFRESHES:
            return load(counters_.topology_refreshes);
        case StatId::CONN_SLOTS_UNCOVERED:
            return load(counters_.slots_uncovered);
        case StatId::DISPATCH_QUEUED:
            return static_cast<int64_t>(dispatcher_->queued());
        case StatId::ITEMS_CLAIMED:
            return load(sc.claimed);
        case StatId::ITEMS_ACKED:
            return load(sc.acked);
        case StatId::ITEMS_RETRIED:
            return load(sc.retried);
        case StatId::ITEMS_DEAD:
            return load(sc.dead);
        case StatId::ITEMS_LEASE_EXPIRED:
            return load(sc.lease_expired);
        case StatId::ITEMS_UNHANDLED:
            return load(counters_.unhandled);
        case StatId::ITEMS_LATE_ACKS:
            return load(sc.late_acks);
        case StatId::ITEMS_RELEASED:
            return load(sc.released);
        case StatId::SWEEP_CALLS:
            return load(sc.sweep_calls);
        case StatId::LATENESS_MAX:
            return load(counters_.lateness_max);
        case StatId::ADOPT_ADOPTED:
            return load(sc.adopt_adopted);
        case StatId::ADOPT_RESCHEDULED:
            return load(sc.adopt_rescheduled);
        case StatId::ADOPT_UNTRACKED:
            return load(sc.adopt_untracked);
        case StatId::ADOPT_LATE:
            return load(sc.adopt_late);
        case StatId::ADOPT_DROPPED:
            return load(sc.adopt_dropped);
        case StatId::ADOPT_PARKED:
            return load(sc.adopt_parked);
        case StatId::ADOPT_RESENT:
            return load(sc.adopt_resent);
        case StatId::CATCHUP_SCANS:
            return load(catchup_counters_.scans);
        case StatId::CATCHUP_KEYS:
            return load(catchup_counters_.keys);
        // Labelled rows: their samples come from stats_snapshot().
        case StatId::EVENTS_RECEIVED_BY_NAME:
        case StatId::HANDLER_CALLS_BY_HANDLER:
        case StatId::HANDLER_ERRORS_BY_HANDLER:
        case StatId::HANDLER_ACKED:
        case StatId::HANDLER_RETRIED:
        case StatId::HANDLER_REJECTED:
        case StatId::HANDLER_PENDING:
        case StatId::HANDLER_DURATION:
        case StatId::HANDLER_BATCHES:
        case StatId::HANDLER_WAITING:
        case StatId::NODE_STATE:
        case StatId::NODE_RECONNECTS:
        case StatId::NODE_RECEIVED:
        case StatId::NODE_SWEEPING:
        case StatId::CATCHUP_SCANNING:
        case StatId::CATCHUP_PROGRESS:
        case StatId::QUEUE_ACKED:
        case StatId::QUEUE_RETRIED:
        case StatId::QUEUE_REJECTED:
        case StatId::QUEUE_CLAIMED:
        case StatId::QUEUE_DEAD:
        case StatId::QUEUE_LEASE_EXPIRED:
        case StatId::EXPIRY_LATENESS:
        case StatId::PLUGIN_COUNTER:  // from its stat source
            break;
    }
    return 0;
}

std::vector<StatSample> Engine::stats_snapshot() const {
    std::vector<StatSample> out, labelled;
    const bool fixed = labelled_fixed_.load(std::memory_order_acquire);
    stats_.append(&labelled, fixed);
    for (size_t i = 0; i < stat_table().size(); i++) {
        const auto id = static_cast<StatId>(i);
        if (stat_info(id).label[0] == '\0') {
            out.push_back({id, "", stat_value(id), {}});
        } else if (id == StatId::EVENTS_RECEIVED_BY_NAME) {
            if (!fixed) continue;
            for (auto &kv : counters_.per_event)
                out.push_back({id, kv.first, kv.second.load(std::memory_order_relaxed), {}});
        } else if (id == StatId::HANDLER_WAITING) {
            if (!fixed) continue;
            for (size_t h = 0; h < handlers_.size(); h++) {
                const InFlightGate *gate = handlers_[h].gate.get();
                out.push_back(
                    {id, std::to_string(h), gate ? static_cast<int64_t>(gate->waiting()) : 0, {}});
            }
        } else if (auto source = stat_sources_.find(id); source != stat_sources_.end()) {
            source->second(&out);
        } else {
            for (auto &s : labelled)
                if (s.id == id) out.push_back(s);
        }
    }
    return out;
}

void Engine::set_stat_source(StatId row, StatSource source) {
    stat_sources_[row] = std::move(source);
}

int Engine::stat(const std::string &name, int64_t *value) const {
    StatId id;
    std::string label;
    if (!find_stat(name, &id, &label)) return KW_ERR_INVALID_ARG;
    if (label.empty()) {
        *value = stat_value(id);
        return KW_OK;
    }
    // A label value not seen (yet): the counter has not moved.
    *value = 0;
    for (auto &s : stats_snapshot())
        if (s.id == id && s.label == label) *value = s.value;
    return KW_OK;
}

std::string Engine::stats_json() const {
    return keywatch::stats_json(stats_snapshot());
}

}  // namespace keywatch
