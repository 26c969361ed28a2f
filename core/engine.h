// Engine: lifecycle, configuration and handlers: it owns the loop thread, the dispatcher
// (workers running the handlers) and the Fanout (nodes and topology), and stays off the
// path of each event, which runs node by node (docs/life-of-an-expiry.md). The C API's
// kw_engine_t wraps one. Thread-safety: add_handler/set_*_cb/start/stop
// are called by the owner, not concurrently with each other; stat()/stats_json()/
// last_error() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dispatcher.h"
#include "core/engine_counters.h"
#include "core/event_loop.h"
#include "core/fanout.h"
#include "core/filter.h"
#include "core/subscriber.h"
#include "core/sweeper.h"

namespace keywatch {

class Engine : private SubscriberSink {
  public:
    explicit Engine(Config config);
    ~Engine() override;
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    int add_handler(const Filter &filter, kw_handler_fn fn, void *opaque);
    int set_state_cb(kw_state_fn fn, void *opaque);
    int set_log_cb(kw_log_fn fn, void *opaque);

    int start();
    int stop(int64_t timeout_ms);

    int stat(const std::string &name, int64_t *value) const;
    std::string stats_json() const;

    // Last error message: set by start() and stop().
    std::string last_error() const;

  private:
    struct Handler {
        Filter filter;
        kw_handler_fn fn;
        void *opaque;
    };
    // SubscriberSink (loop thread)
    void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) override;
    void on_started(Subscriber &sub, int status, const std::string &message) override;
    // SubscriberSink; any thread
    void log(kw_log_level level, const std::string &message) override;

    int plan_queues(Sweeper::Options *opts, std::string *err) const;
    void handle(Event &ev);    // worker thread
    void drain_completions();  // loop thread
    void renew();              // loop thread, every lease/3
    int64_t renew_interval_ms() const;
    static void on_completions(evutil_socket_t, short, void *arg);
    void set_error(const std::string &msg);
    std::vector<std::string> subscribed_events() const;
    void teardown();

    Config config_;
    std::string owner_;  // this engine's name in claims: random per engine
    std::vector<Handler> handlers_;
    kw_state_fn state_cb_ = nullptr;
    void *state_opaque_ = nullptr;
    kw_log_fn log_cb_ = nullptr;
    void *log_opaque_ = nullptr;

    bool running_ = false;
    bool started_ = false;              // start() was called: an engine starts once
    std::set<std::string> ever_ready_;  // loop thread: nodes that were READY once
    std::atomic<int64_t> reconnects_{0};
    std::atomic<int> conn_state_{KW_CONN_DISCONNECTED};
    std::atomic<int64_t> nodes_{0};
    std::unique_ptr<EventLoop> loop_;
    std::unique_ptr<Dispatcher> dispatcher_;
    std::unique_ptr<Fanout> fanout_;
    std::unique_ptr<Timer> renew_timer_;  // loop thread: lease renewals of queued items
    bool queues_ = false;                 // the engine serves queues (has sweepers)
    EventPtr completion_ev_;
    EngineCounters counters_;
    SweeperCounters sweeper_counters_;

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
};

}  // namespace keywatch
