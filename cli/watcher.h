// A keywatch engine set up from command-line options through the C API only, with
// messages that name the option at fault: one handler for Redis events and tracked keys,
// and one for the tasks of the queues it serves. Used by `watch` and `demo`.
// Not thread-safe: the main thread owns it (the handler runs on the engine's workers).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/event_printer.h"
#include "keywatch.h"

namespace keywatch::cli {

struct WatchOptions {
    std::string url;  // redis.url
    std::string events = "expired";
    std::string prefix;           // empty: any key
    std::string glob;             // empty: any key
    int db = -1;                  // -1: any
    int workers = 1;              // one worker keeps the lines in arrival order
    bool notify_enable = false;   // notify.enable
    std::string connect_timeout;  // empty: the library's default
    int verbosity = 0;            // 1: info logs and state changes, 2: debug logs
    bool private_server = false;  // url is the CLI's own redis-server
    std::string ns;               // namespace; empty: the library's default
    bool track = true;            // track.enable: claim tracked keys that come due
    std::string queues;           // comma-separated task queues to serve (event "task")
    std::string adopt_rules;      // adopt.rules text (--adopt); empty: none
    // More library options (--conf NAME=VALUE), applied last.
    std::vector<std::pair<std::string, std::string>> conf;
};

class Watcher {
  public:
    explicit Watcher(EventPrinter *printer) : printer_(printer) {}
    ~Watcher();
    Watcher(const Watcher &) = delete;
    Watcher &operator=(const Watcher &) = delete;

    // Builds the configuration, the filters and the engine and registers fn for both the
    // events the options select and, with queues, their tasks. False with *err (naming the
    // command-line option) when an option is refused.
    bool configure(const WatchOptions &opts, kw_handler_fn fn, void *opaque, std::string *err);
    // The checks of configure() without an engine, so that bad options are refused before
    // anything starts (an empty opts.url stands for the private server). False with *err.
    static bool check(const WatchOptions &opts, std::string *err);
    // Connects and subscribes (blocks up to the connect timeout). False with *err saying
    // what went wrong and what to do.
    bool start(std::string *err);
    // Stops the engine (stop.timeout for in-flight handlers). Idempotent.
    void stop();
    // A statistic (0 when unknown).
    int64_t stat(const char *name) const;

  private:
    static void on_state(const char *node, kw_conn_state state, const char *detail, void *opaque);
    static void on_log(kw_log_level level, const char *message, void *opaque);

    struct EngineFree {
        void operator()(kw_engine_t *e) const { kw_engine_free(e); }
    };

    EventPrinter *printer_;
    std::unique_ptr<kw_engine_t, EngineFree> engine_;
    std::string display_url_;
    bool private_server_ = false;
    bool cluster_url_ = false;  // several seeds or redis.mode=cluster: no private-server hint
    int verbosity_ = 0;
    bool started_ = false;
    std::atomic<bool> running_{false};  // read by on_state on the loop thread
    bool was_broken_ = false;           // loop thread only: a READY after BROKEN is a reconnect
    // Loop thread only: the nodes met while starting and every node subscribed since; a
    // READY from any other is a master promoted by a failover (or added), not a reconnect.
    std::set<std::string> known_nodes_;
};

}  // namespace keywatch::cli
