// The engine of `keywatch run`, built from a DaemonConfig through the C API: the engine
// options in file order (redis.url replaced by the private server's with --embedded), one
// plugin instance per [[handler]] with its filter and options (or the `print` plugin when
// asked for and none is configured), the log and state callbacks into the DaemonLog.
// Also says, for `run --check`, what it would do.
// Not thread-safe: the daemon's main thread owns it (callbacks run on engine threads).
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/daemon/daemon_config.h"
#include "cli/daemon/daemon_log.h"
#include "keywatch.h"

namespace keywatch::cli {

class DaemonEngine {
  public:
    struct Options {
        std::string url;             // "" = the config's [redis] url
        bool print_default = false;  // no [[handler]]: one instance of the print plugin
        pid_t private_server = 0;    // --embedded's redis-server: not a handler's program
    };

    explicit DaemonEngine(DaemonLog *log) : log_(log) {}
    ~DaemonEngine();
    DaemonEngine(const DaemonEngine &) = delete;
    DaemonEngine &operator=(const DaemonEngine &) = delete;

    // Builds the configuration and the engine, loads every plugin. Returns an exit status
    // (cli/exit_status.h): kExitOk; kExitBadInput (a value the engine refuses) or
    // kExitFailure (a plugin that cannot be loaded or refuses its options), with *err
    // naming the [[handler]] (file:line) and what to do.
    int build(const DaemonConfig &config, const Options &opts, std::string *err);
    // Connects and subscribes. False with *err (what failed and what to do).
    bool start(std::string *err);
    // For --check: connects and subscribes as start() would, with the same checks and
    // errors, then disconnects; no handler runs, nothing is claimed and nothing is written
    // to Redis (kw_engine_check). The engine cannot start afterwards.
    bool check(std::string *err);
    // What the engine said during check() (info and above, in order, e.g. the
    // notify-keyspace-events flags start would set): for the report.
    std::vector<std::string> check_notes() const;
    // Stops with stop.timeout. The processes the handlers started (the exec plugin's
    // programs) that still run at the deadline are ended (SIGTERM to their process groups,
    // SIGKILL after kChildGraceMs: cli/child_processes.h), so that stop.timeout bounds the
    // stop with running programs too. False when handlers were still running at the
    // deadline. Idempotent.
    bool stop();

    kw_engine_t *engine() const { return engine_.get(); }
    // The configuration the engine was built from (for clients of the same Redis).
    const kw_conf_t *conf() const { return conf_.get(); }
    // Handler i's instance name (the metrics' handler label), in registration order.
    const std::vector<std::string> &handler_names() const { return names_; }
    // What the engine will do, one line each: Redis target (password hidden), mode,
    // handlers with their filters and options. For --check and the start-up log the options'
    // values too (those of names with secret/password/token/auth hidden); without
    // option_values (the HTTP API's /api/v1/config) their names only: a value may hold a
    // key under any name (a webhook's headers, an exec argv, a URL's query).
    std::vector<std::string> describe(bool option_values = true) const;
    // The nodes the engine subscribed to (after start or check).
    std::vector<std::string> nodes() const;

  private:
    int add_handler(const HandlerConfig &handler, std::string *err);
    // *err for kw_engine_start's or kw_engine_check's failure rc; false.
    bool start_failed(int rc, std::string *err) const;
    static void on_state(const char *node, kw_conn_state state, const char *detail, void *opaque);
    // Into the DaemonLog, and into notes_ while check() runs (engine threads).
    static void on_log(kw_log_level level, const char *message, const char *const *fields,
                       void *opaque);

    struct EngineFree {
        void operator()(kw_engine_t *e) const { kw_engine_free(e); }
    };
    struct ConfFree {
        void operator()(kw_conf_t *c) const { kw_conf_free(c); }
    };

    DaemonLog *log_;
    // Before engine_: its threads log through on_log until it is freed.
    mutable std::mutex notes_mu_;
    bool checking_ = false;  // under notes_mu_
    std::vector<std::string> notes_;
    std::unique_ptr<kw_conf_t, ConfFree> conf_;
    std::unique_ptr<kw_engine_t, EngineFree> engine_;
    std::vector<HandlerConfig> handlers_;  // as registered (print added when defaulted)
    std::vector<std::string> names_;
    pid_t private_server_ = 0;
    bool started_ = false;
};

}  // namespace keywatch::cli
