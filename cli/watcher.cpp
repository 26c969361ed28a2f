#include "cli/watcher.h"

#include <string>
#include <utility>

#include "cli/conn_state.h"
#include "cli/redis_target.h"

namespace keywatch::cli {
namespace {

struct ConfFree {
    void operator()(kw_conf_t *c) const { kw_conf_free(c); }
};
struct FilterFree {
    void operator()(kw_filter_t *f) const { kw_filter_free(f); }
};

// One conf_set, with the command-line option named in the message.
bool set_conf(kw_conf_t *conf, const char *name, const std::string &value, const char *option,
              std::string *err) {
    char errstr[512] = "";
    if (kw_conf_set(conf, name, value.c_str(), errstr, sizeof errstr) == KW_OK) return true;
    std::string why = errstr;
    // The library names its option; the message names the command line's instead.
    const std::string prefix = std::string(name) + ": ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    *err = std::string(option) + ": " + why;
    return false;
}

// Text options ("events", "db") go through kw_filter_set, key bytes ("prefix", "glob")
// through kw_filter_set_bytes.
bool set_filter(kw_filter_t *filter, const char *name, const std::string &value, bool bytes,
                const char *option, std::string *err) {
    char errstr[512] = "";
    const int rc =
        bytes ? kw_filter_set_bytes(filter, name, value.data(), value.size(), errstr, sizeof errstr)
              : kw_filter_set(filter, name, value.c_str(), errstr, sizeof errstr);
    if (rc == KW_OK) return true;
    *err = std::string(option) + ": " + errstr;
    return false;
}

using ConfPtr = std::unique_ptr<kw_conf_t, ConfFree>;
using FilterPtr = std::unique_ptr<kw_filter_t, FilterFree>;

ConfPtr make_conf(const WatchOptions &o, std::string *err) {
    ConfPtr conf(kw_conf_new());
    if (!conf) {
        *err = "out of memory";
        return nullptr;
    }
    if (!set_conf(conf.get(), "redis.url", o.url, "--redis", err) ||
        !set_conf(conf.get(), "workers", std::to_string(o.workers), "--workers", err) ||
        !set_conf(conf.get(), "notify.enable", o.notify_enable ? "true" : "false",
                  "--notify-enable", err) ||
        (!o.connect_timeout.empty() && !set_conf(conf.get(), "redis.connect_timeout",
                                                 o.connect_timeout, "--connect-timeout", err)) ||
        (!o.ns.empty() && !set_conf(conf.get(), "namespace", o.ns, "--namespace", err)) ||
        // track.enable=false (--observe): the engine claims nothing, tracked keys and tasks
        // stay in Redis for the engines that serve them.
        !set_conf(conf.get(), "track.enable", o.track ? "true" : "false", "--observe", err) ||
        (!o.queues.empty() && !set_conf(conf.get(), "queues", o.queues, "--queues", err)) ||
        (!o.adopt_rules.empty() &&
         !set_conf(conf.get(), "adopt.rules", o.adopt_rules, "--adopt", err)))
        return nullptr;
    for (const auto &nv : o.conf) {
        const std::string option = "--conf " + nv.first;
        if (!set_conf(conf.get(), nv.first.c_str(), nv.second, option.c_str(), err)) return nullptr;
    }
    return conf;
}

FilterPtr make_filter(const WatchOptions &o, std::string *err) {
    FilterPtr filter(kw_filter_new());
    if (!filter) {
        *err = "out of memory";
        return nullptr;
    }
    if (!set_filter(filter.get(), "events", o.events, false, "--events", err) ||
        !set_filter(filter.get(), "db", std::to_string(o.db), false, "--db", err) ||
        (!o.prefix.empty() &&
         !set_filter(filter.get(), "prefix", o.prefix, true, "--prefix", err)) ||
        (!o.glob.empty() && !set_filter(filter.get(), "glob", o.glob, true, "--glob", err)))
        return nullptr;
    return filter;
}

// What the command line adds to the engine's own advice (which names library options).
// Only for a server that cannot be reached: a refused password or ACL permission
// (KW_ERR_AUTH) or a missing db (KW_ERR_REDIS) is not solved by another server.
const char *start_hint(int status) {
    switch (status) {
        case KW_ERR_CONNECT:
            return "or leave out --redis to let keywatch start a private redis-server";
        case KW_ERR_TIMEOUT:
            return "check the address, or raise --connect-timeout";
        default:
            return nullptr;
    }
}

// kw_engine_new's refusal of options that are fine alone but not together; a message
// about the adopt rules names --adopt when they came from it.
bool new_engine(const WatchOptions &o, const kw_conf_t *conf, kw_engine_t **engine,
                std::string *err) {
    char errstr[512] = "";
    if (kw_engine_new(conf, engine, errstr, sizeof errstr) == KW_OK) return true;
    *err = errstr;
    if (!o.adopt_rules.empty() && err->rfind("adopt.rules: ", 0) == 0)
        err->replace(0, 11, "--adopt");
    return false;
}

}  // namespace

bool Watcher::check(const WatchOptions &o, std::string *err) {
    WatchOptions probe = o;
    if (probe.url.empty()) probe.url = "redis://127.0.0.1:6379";
    ConfPtr conf = make_conf(probe, err);
    kw_engine_t *engine = nullptr;
    if (!conf || !make_filter(probe, err) || !new_engine(probe, conf.get(), &engine, err))
        return false;
    kw_engine_free(engine);  // made only to check the options together: it never connected
    return true;
}

Watcher::~Watcher() {
    stop();
}

bool Watcher::configure(const WatchOptions &o, kw_handler_fn fn, void *opaque, std::string *err) {
    verbosity_ = o.verbosity;
    private_server_ = o.private_server;
    display_url_ = redact_url(o.url);
    // A private redis-server is no answer to a cluster that cannot be reached.
    cluster_url_ = o.url.find(',') != std::string::npos;
    for (const auto &nv : o.conf)
        if (nv.first == "redis.mode" && nv.second == "cluster") cluster_url_ = true;
    ConfPtr conf = make_conf(o, err);
    FilterPtr filter = conf ? make_filter(o, err) : nullptr;
    if (!filter) return false;
    // Tasks of every queue in `queues`, whatever their ids: the key filters are for keys.
    FilterPtr tasks;
    if (!o.queues.empty()) {
        tasks.reset(kw_filter_new());
        if (!tasks) {
            *err = "out of memory";
            return false;
        }
        if (!set_filter(tasks.get(), "events", "task", false, "--queues", err)) return false;
    }

    kw_engine_t *engine = nullptr;
    if (!new_engine(o, conf.get(), &engine, err)) return false;
    engine_.reset(engine);
    int status = kw_engine_add_handler(engine, filter.get(), fn, opaque, nullptr);
    if (status == KW_OK && tasks)
        status = kw_engine_add_handler(engine, tasks.get(), fn, opaque, nullptr);
    if (status == KW_OK) status = kw_engine_set_state_cb(engine, &Watcher::on_state, this);
    if (status == KW_OK) status = kw_engine_set_log_cb(engine, &Watcher::on_log, this);
    if (status != KW_OK) {
        *err = std::string("cannot set up the engine: ") + kw_engine_last_error(engine) + " (" +
               kw_err_name(status) + ")";
        return false;
    }
    return true;
}

bool Watcher::start(std::string *err) {
    const int rc = kw_engine_start(engine_.get());
    if (rc == KW_OK) {
        started_ = true;
        running_ = true;
        return true;
    }
    std::string detail = kw_engine_last_error(engine_.get());
    if (detail.empty()) detail = kw_strerror(rc);
    // The engine names its options; the command line has its own.
    for (const auto &[library, cli] :
         {std::pair<std::string, std::string>{"raise redis.connect_timeout",
                                              "raise --connect-timeout"},
          {"check redis.url", "check --redis"},
          {"the db in redis.url", "the db in --redis"}})
        if (size_t at = detail.find(library); at != std::string::npos)
            detail.replace(at, library.size(), cli);
    *err = "cannot watch " + display_url_ + ": " + detail + " (" + kw_err_name(rc) + ")";
    const char *hint = start_hint(rc);
    if (hint && detail.find("--connect-timeout") != std::string::npos) hint = nullptr;
    // A private redis-server is no answer to a TLS server (down or refusing) nor to TLS on
    // one side only: every TLS failure names TLS.
    const bool tls =
        display_url_.rfind("rediss://", 0) == 0 || detail.find("TLS") != std::string::npos;
    if (hint && !((private_server_ || cluster_url_ || tls) && rc == KW_ERR_CONNECT))
        *err += "; " + std::string(hint);
    return false;
}

void Watcher::stop() {
    if (!engine_ || !started_) return;
    started_ = false;
    running_ = false;
    if (kw_engine_stop(engine_.get(), -1) == KW_ERR_TIMEOUT)
        printer_->note("handlers were still running when stop.timeout passed");
}

int64_t Watcher::stat(const char *name) const {
    int64_t value = 0;
    if (!engine_ || kw_engine_stat(engine_.get(), name, &value) != KW_OK) return 0;
    return value;
}

void Watcher::on_state(const char *node, kw_conn_state state, const char *detail, void *opaque) {
    auto *self = static_cast<Watcher *>(opaque);
    try {
        std::string where = node ? node : "?";
        std::string why = detail && *detail ? std::string(" (") + detail + ")" : "";
        if (!self->running_) self->known_nodes_.insert(where);
        // Until start() has returned, failures are reported by start() itself.
        // One line per outage (the engine logs each failed attempt itself).
        if (state == KW_CONN_BROKEN && self->running_) {
            if (self->was_broken_) return;
            self->was_broken_ = true;
            self->printer_->note("lost the connection to " + where + why + "; reconnecting");
        } else if (state == KW_CONN_READY && self->running_ &&
                   self->known_nodes_.count(where) == 0) {
            self->known_nodes_.insert(where);
            self->was_broken_ = false;
            self->printer_->note("subscribed to new master " + where);
        } else if (state == KW_CONN_READY && self->was_broken_ && self->running_) {
            self->was_broken_ = false;
            self->printer_->note("reconnected to " + where + " and subscribed again");
        } else if (self->verbosity_ >= 1) {
            self->printer_->note(where + ": " + conn_state_name(state) + why);
        }
    } catch (...) {
        // Never let an exception reach the engine's loop thread.
    }
}

void Watcher::on_log(kw_log_level level, const char *message, void *opaque) {
    auto *self = static_cast<Watcher *>(opaque);
    const int min_level = self->verbosity_ >= 2   ? KW_LOG_DEBUG
                          : self->verbosity_ == 1 ? KW_LOG_INFO
                                                  : KW_LOG_WARN;
    if (level < min_level) return;
    static const char *const kNames[] = {"debug", "info", "warning", "error"};
    const char *name = level >= KW_LOG_DEBUG && level <= KW_LOG_ERROR ? kNames[level] : "log";
    try {
        std::string text = message ? message : "";
        // The engine names its option; say how to set it from the command line.
        if (text.find("notify.enable") != std::string::npos)
            text += " (on the command line: --notify-enable)";
        self->printer_->note(std::string(name) + ": " + text);
    } catch (...) {
    }
}

}  // namespace keywatch::cli
