#include "core/engine.h"

#include <chrono>
#include <cstdio>

namespace keywatch {

namespace {
// A read from Redis yields a few hundred events at most; hand them to the workers in one
// batch when the read is done, or earlier if a batch grows this large.
constexpr size_t kMaxPending = 1024;
}  // namespace

Engine::Engine(Config config)
    : config_(std::move(config)),
      loop_(std::make_unique<EventLoop>()),
      dispatcher_(std::make_unique<Dispatcher>(static_cast<size_t>(config_.queue_size),
                                               config_.workers,
                                               [this](Event &ev) { handle(ev); })) {
    flush_ev_.reset(event_new(loop_->base(), -1, 0, &Engine::on_flush, this));
}

Engine::~Engine() {
    stop(config_.stop_timeout_ms);
    flush_ev_.reset();  // before the loop's event_base goes
}

int Engine::add_handler(const Filter &filter, kw_handler_fn fn, void *opaque) {
    if (started_) {
        set_error("handlers must be added before kw_engine_start");
        return KW_ERR_STATE;
    }
    handlers_.push_back({filter, fn, opaque});
    return KW_OK;
}

void Engine::set_state_cb(kw_state_fn fn, void *opaque) {
    state_cb_ = fn;
    state_opaque_ = opaque;
}

void Engine::set_log_cb(kw_log_fn fn, void *opaque) {
    log_cb_ = fn;
    log_opaque_ = opaque;
}

std::vector<std::string> Engine::subscribed_events() const {
    std::set<std::string> all;
    for (auto &h : handlers_) all.insert(h.filter.events.begin(), h.filter.events.end());
    return {all.begin(), all.end()};
}

int Engine::start() {
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
    Subscriber::Options opts;
    opts.connect_timeout_ms = config_.connect_timeout_ms;
    opts.reconnect_min_ms = config_.reconnect_min_ms;
    opts.reconnect_max_ms = config_.reconnect_max_ms;
    opts.health_interval_ms = config_.health_interval_ms;
    opts.health_timeout_ms = config_.health_timeout_ms;
    opts.notify_enable = config_.notify_enable;
    opts.events = subscribed_events();
    for (auto &e : opts.events) counters_.per_event[e];  // keys fixed from here on
    started_ = true;

    try {
        subscriber_ = std::make_unique<Subscriber>(*loop_, config_.effective_url(), opts,
                                                   static_cast<SubscriberSink *>(this));
        dispatcher_->start();
        loop_->start();
    } catch (const std::exception &e) {
        teardown();
        set_error(std::string("cannot start the engine: ") + e.what());
        return KW_ERR_INTERNAL;
    }
    loop_->post([this] { subscriber_->start(); });

    std::unique_lock<std::mutex> lock(start_mu_);
    // The subscriber has its own deadline (redis.connect_timeout); this is a backstop.
    bool done =
        start_cv_.wait_for(lock, std::chrono::milliseconds(config_.connect_timeout_ms * 2 + 2000),
                           [this] { return start_done_; });
    int status = done ? start_status_ : static_cast<int>(KW_ERR_TIMEOUT);
    std::string message =
        done ? start_message_
             : "timed out starting: no answer from " + config_.effective_url().endpoint();
    lock.unlock();
    if (status != KW_OK) {
        teardown();
        set_error(message);
        return status;
    }
    running_ = true;
    return KW_OK;
}

void Engine::teardown() {
    if (loop_ && subscriber_) loop_->run_sync([this] { subscriber_->shutdown(); });
    if (dispatcher_) {
        size_t abandoned = 0;
        dispatcher_->stop(0, &abandoned);
        counters_.abandoned += static_cast<int64_t>(abandoned);
    }
    if (loop_) loop_->stop();
    subscriber_.reset();
}

int Engine::stop(int64_t timeout_ms) {
    if (!running_) return KW_OK;
    running_ = false;
    if (timeout_ms < 0) timeout_ms = config_.stop_timeout_ms;
    // No more reads: whatever was read is handed to the workers, then they get until the
    // deadline to finish.
    loop_->run_sync([this] {
        subscriber_->shutdown();
        flush();
    });
    size_t abandoned = 0;
    bool finished = dispatcher_->stop(timeout_ms, &abandoned);
    counters_.abandoned += static_cast<int64_t>(abandoned);
    loop_->stop();
    subscriber_.reset();
    if (!finished) {
        set_error("stop: handlers were still busy after " + std::to_string(timeout_ms) + "ms; " +
                  std::to_string(abandoned) + " queued event(s) were abandoned (events.abandoned)");
        return KW_ERR_TIMEOUT;
    }
    return KW_OK;
}

void Engine::on_event(Event &&ev) {
    counters_.received.fetch_add(1, std::memory_order_relaxed);
    auto it = counters_.per_event.find(ev.name);
    if (it != counters_.per_event.end()) it->second.fetch_add(1, std::memory_order_relaxed);
    pending_.push_back(std::move(ev));
    if (pending_.size() == 1)
        event_active(flush_ev_.get(), EV_READ, 0);
    else if (pending_.size() >= kMaxPending)
        flush();
}

void Engine::on_flush(evutil_socket_t, short, void *arg) {
    static_cast<Engine *>(arg)->flush();
}

void Engine::flush() {
    if (pending_.empty()) return;
    size_t dropped = dispatcher_->push(pending_);
    if (dropped == 0) return;
    // Live events only for now: nothing tracked is lost by dropping them here.
    int64_t before = counters_.dropped.fetch_add(static_cast<int64_t>(dropped));
    if (before == 0 || (before / 100000) != ((before + static_cast<int64_t>(dropped)) / 100000))
        log(KW_LOG_WARN,
            "dispatch queue full (dispatch.queue_size=" + std::to_string(config_.queue_size) +
                "): " + std::to_string(before + static_cast<int64_t>(dropped)) +
                " live event(s) dropped so far; handlers are too slow: raise "
                "workers or make handlers faster");
}

void Engine::handle(Event &ev) {
    for (auto &h : handlers_) {
        if (!h.filter.matches(ev.name, ev.db, ev.key)) continue;
        int rc;
        try {
            rc = h.fn(&ev, h.opaque);
        } catch (...) {
            // A C++ handler may throw; nothing crosses back into the engine.
            rc = KW_RESULT_RETRY;
        }
        counters_.delivered.fetch_add(1, std::memory_order_relaxed);
        // The handler's result is where acks, retries and dead letters of tracked items
        // attach; for live (untracked) events it is counted.
        if (rc != KW_RESULT_ACK) {
            counters_.handler_errors.fetch_add(1, std::memory_order_relaxed);
            if (rc == KW_RESULT_RETRY)
                counters_.handler_retries.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

void Engine::on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) {
    conn_state_.store(state, std::memory_order_relaxed);
    if (state == KW_CONN_READY) {
        if (ever_ready_) reconnects_.fetch_add(1, std::memory_order_relaxed);
        ever_ready_ = true;
    }
    if (state_cb_) state_cb_(sub.endpoint().c_str(), state, detail.c_str(), state_opaque_);
}

void Engine::on_started(Subscriber &, int status, const std::string &message) {
    std::lock_guard<std::mutex> lock(start_mu_);
    start_done_ = true;
    start_status_ = status;
    start_message_ = message;
    start_cv_.notify_all();
}

void Engine::log(kw_log_level level, const std::string &message) {
    if (log_cb_) {
        log_cb_(level, message.c_str(), log_opaque_);
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

int Engine::stat(const std::string &name, int64_t *value) const {
    auto load = [](const std::atomic<int64_t> &a) { return a.load(std::memory_order_relaxed); };
    if (name == "events.received")
        *value = load(counters_.received);
    else if (name == "events.delivered")
        *value = load(counters_.delivered);
    else if (name == "events.dropped")
        *value = load(counters_.dropped);
    else if (name == "events.abandoned")
        *value = load(counters_.abandoned);
    else if (name == "handler.errors")
        *value = load(counters_.handler_errors);
    else if (name == "handler.retries")
        *value = load(counters_.handler_retries);
    else if (name == "conn.reconnects")
        *value = load(reconnects_);
    else if (name == "conn.state")
        *value = conn_state_.load(std::memory_order_relaxed);
    else if (name == "dispatch.queued")
        *value = static_cast<int64_t>(dispatcher_->queued());
    else if (name.rfind("events.received.", 0) == 0) {
        auto it = counters_.per_event.find(name.substr(16));
        *value = it == counters_.per_event.end() ? 0 : load(it->second);
    } else {
        return KW_ERR_INVALID_ARG;
    }
    return KW_OK;
}

std::string Engine::stats_json() const {
    std::string out = "{";
    auto add = [&](const std::string &name) {
        int64_t v = 0;
        stat(name, &v);
        out += (out.size() > 1 ? "," : "") + ("\"" + name + "\":" + std::to_string(v));
    };
    for (const char *n :
         {"events.received", "events.delivered", "events.dropped", "events.abandoned",
          "handler.errors", "handler.retries", "conn.reconnects", "conn.state", "dispatch.queued"})
        add(n);
    for (auto &kv : counters_.per_event) add("events.received." + kv.first);
    return out + "}";
}

}  // namespace keywatch
