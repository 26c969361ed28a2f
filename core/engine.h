// Engine: the loop thread, the subscriber(s), the dispatcher and the handlers, glued.
// The C API's kw_engine_t wraps one. Thread-safety: add_handler/set_*_cb/start/stop are
// called by the owner, not concurrently with each other; stat()/stats_json()/last_error()
// from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dispatcher.h"
#include "core/event_loop.h"
#include "core/filter.h"
#include "core/subscriber.h"

namespace keywatch {

class Engine : private SubscriberSink {
  public:
    explicit Engine(Config config);
    ~Engine() override;
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    int add_handler(const Filter &filter, kw_handler_fn fn, void *opaque);
    void set_state_cb(kw_state_fn fn, void *opaque);
    void set_log_cb(kw_log_fn fn, void *opaque);

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
    struct Counters {
        std::atomic<int64_t> received{0}, delivered{0}, dropped{0}, abandoned{0}, handler_errors{0},
            handler_retries{0};
        std::map<std::string, std::atomic<int64_t>> per_event;  // fixed keys after start
    };

    // SubscriberSink (loop thread)
    void on_event(Event &&ev) override;
    void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) override;
    void on_started(Subscriber &sub, int status, const std::string &message) override;
    void log(kw_log_level level, const std::string &message) override;

    void handle(Event &ev);  // worker thread
    void flush();            // loop thread: pending batch -> dispatcher
    static void on_flush(evutil_socket_t, short, void *arg);
    void set_error(const std::string &msg);
    std::vector<std::string> subscribed_events() const;
    void teardown();

    Config config_;
    std::vector<Handler> handlers_;
    kw_state_fn state_cb_ = nullptr;
    void *state_opaque_ = nullptr;
    kw_log_fn log_cb_ = nullptr;
    void *log_opaque_ = nullptr;

    bool running_ = false;
    bool started_ = false;     // start() was called: an engine starts once
    bool ever_ready_ = false;  // loop thread
    std::atomic<int64_t> reconnects_{0};
    std::atomic<int> conn_state_{KW_CONN_DISCONNECTED};
    std::unique_ptr<EventLoop> loop_;
    std::unique_ptr<Dispatcher> dispatcher_;
    std::unique_ptr<Subscriber> subscriber_;
    EventPtr flush_ev_;
    std::vector<Event> pending_;  // loop thread: events read, not yet handed to workers
    Counters counters_;

    std::mutex start_mu_;
    std::condition_variable start_cv_;
    bool start_done_ = false;
    int start_status_ = 0;
    std::string start_message_;

    mutable std::mutex err_mu_;
    std::string last_error_;
};

}  // namespace keywatch
