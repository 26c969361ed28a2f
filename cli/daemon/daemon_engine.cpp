#include "cli/daemon/daemon_engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/child_processes.h"
#include "cli/daemon/config_reader.h"
#include "cli/exit_status.h"
#include "core/base/duration.h"

namespace keywatch::cli {
namespace {

struct FilterFree {
    void operator()(kw_filter_t *f) const { kw_filter_free(f); }
};
using FilterPtr = std::unique_ptr<kw_filter_t, FilterFree>;

// "keywatch.toml:12:1: [[handler]] \"hooks\": " for messages.
std::string where(const ConfigPlace &place, const std::string &name) {
    return (place.text.empty() ? "" : place.text + ": ") + "[[handler]] \"" + name + "\": ";
}

// Where a plugin's refusal points: the line of the option it names (quoted, as the host's
// "unknown option \"x\"" and the built-ins' "option \"x\": ..." do; the first named after
// the "plugin instance \"name\" (...): " the host begins with), else the [[handler]]
// header (an option that is missing has no line).
const ConfigPlace &refusal_place(const HandlerConfig &h, const std::string &message) {
    const ConfigPlace *best = &h.place;
    const size_t from = std::min(message.find("): "), message.size());
    size_t first = std::string::npos;
    for (size_t i = 0; i < h.options.size() && i < h.option_places.size(); i++) {
        const size_t at = message.find("\"" + h.options[i].first + "\"", from);
        if (at < first) {
            first = at;
            best = &h.option_places[i];
        }
    }
    return *best;
}

std::string conf_value(const kw_conf_t *conf, const char *name) {
    char buf[1024] = "";
    if (kw_conf_get(conf, name, buf, sizeof buf) != KW_OK) return "";
    return buf;
}

const char *state_text(kw_conn_state state) {
    switch (state) {
        case KW_CONN_DISCONNECTED:
            return "disconnected";
        case KW_CONN_CONNECTING:
            return "connecting";
        case KW_CONN_READY:
            return "connected and subscribed";
        case KW_CONN_BROKEN:
            return "connection lost";
    }
    return "unknown state";
}

}  // namespace

DaemonEngine::~DaemonEngine() {
    stop();
}

int DaemonEngine::build(const DaemonConfig &config, const Options &opts, std::string *err) {
    conf_.reset(kw_conf_new());
    if (!conf_) {
        *err = "out of memory";
        return kExitFailure;
    }
    char errstr[512] = "";
    for (size_t i = 0; i < config.engine.size(); i++) {
        const auto &[name, value] = config.engine[i];
        const std::string &text = name == "redis.url" && !opts.url.empty() ? opts.url : value;
        if (kw_conf_set(conf_.get(), name.c_str(), text.c_str(), errstr, sizeof errstr) != KW_OK) {
            const std::string place =
                i < config.engine_places.size() ? config.engine_places[i].text : config.path;
            *err = place + ": " + errstr;
            return kExitBadInput;
        }
    }
    if (!opts.url.empty() && config.engine_option("redis.url").empty() &&
        kw_conf_set(conf_.get(), "redis.url", opts.url.c_str(), errstr, sizeof errstr) != KW_OK) {
        *err = errstr;
        return kExitFailure;
    }
    kw_engine_t *engine = nullptr;
    if (kw_engine_new(conf_.get(), &engine, errstr, sizeof errstr) != KW_OK) {
        *err = config.path + ": " + errstr;
        return kExitBadInput;
    }
    engine_.reset(engine);
    private_server_ = opts.private_server;
    kw_engine_set_log_fields_cb(engine, &DaemonEngine::on_log, this);
    kw_engine_set_state_cb(engine, &DaemonEngine::on_state, this);

    handlers_ = config.handlers;
    if (handlers_.empty() && opts.print_default) {
        HandlerConfig print;
        print.plugin = "print";
        handlers_.push_back(print);
    }
    for (const HandlerConfig &h : handlers_)
        if (int rc = add_handler(h, err); rc != kExitOk) return rc;
    return kExitOk;
}

int DaemonEngine::add_handler(const HandlerConfig &h, std::string *err) {
    const std::string name = instance_name(h);
    FilterPtr filter(kw_filter_new());
    if (!filter) {
        *err = "out of memory";
        return kExitFailure;
    }
    char errstr[1024] = "";
    for (const auto &[key, value] : h.filter) {
        const bool bytes = key == "prefix" || key == "glob";
        const int rc =
            bytes ? kw_filter_set_bytes(filter.get(), key.c_str(), value.data(), value.size(),
                                        errstr, sizeof errstr)
                  : kw_filter_set(filter.get(), key.c_str(), value.c_str(), errstr, sizeof errstr);
        if (rc != KW_OK) {
            *err = where(h.place, name) + key + ": " + errstr;
            return kExitBadInput;
        }
    }
    std::vector<const char *> options;
    for (const auto &[key, value] : h.options) {
        options.push_back(key.c_str());
        options.push_back(value.c_str());
    }
    options.push_back(nullptr);
    if (kw_engine_add_plugin(engine_.get(), h.plugin.c_str(), name.c_str(), filter.get(),
                             options.data(), errstr, sizeof errstr) != KW_OK) {
        *err = where(refusal_place(h, errstr), name) + errstr;
        return kExitFailure;
    }
    names_.push_back(name);
    return kExitOk;
}

bool DaemonEngine::start(std::string *err) {
    const int rc = kw_engine_start(engine_.get());
    started_ = rc == KW_OK;
    return started_ || start_failed(rc, err);
}

bool DaemonEngine::check(std::string *err) {
    {
        std::lock_guard<std::mutex> lock(notes_mu_);
        checking_ = true;
    }
    const int rc = kw_engine_check(engine_.get());
    {
        std::lock_guard<std::mutex> lock(notes_mu_);
        checking_ = false;
    }
    return rc == KW_OK || start_failed(rc, err);
}

std::vector<std::string> DaemonEngine::check_notes() const {
    std::lock_guard<std::mutex> lock(notes_mu_);
    return notes_;
}

void DaemonEngine::on_log(kw_log_level level, const char *message, const char *const *fields,
                          void *opaque) {
    auto *self = static_cast<DaemonEngine *>(opaque);
    DaemonLog::on_engine_log(level, message, fields, self->log_);
    try {  // nothing may reach the engine's threads
        std::lock_guard<std::mutex> lock(self->notes_mu_);
        if (self->checking_ && level >= KW_LOG_INFO && message) self->notes_.push_back(message);
    } catch (...) {
    }
}

bool DaemonEngine::start_failed(int rc, std::string *err) const {
    std::string detail = kw_engine_last_error(engine_.get());
    if (detail.empty()) detail = kw_strerror(rc);
    *err = "cannot start on " + conf_value(conf_.get(), "redis.url") + ": " + detail + " (" +
           kw_err_name(rc) + ")";
    return false;
}

bool DaemonEngine::stop() {
    if (!engine_ || !started_) return true;
    started_ = false;
    int64_t timeout_ms = 0;
    parse_duration_ms(conf_value(conf_.get(), "stop.timeout"), &timeout_ms);
    // At the deadline, end the programs the handlers still run: kw_engine_stop waits for a
    // handler call still running then (its program ends, the call returns), and returns at
    // the deadline with the events held by a plugin (exec's programs) still out.
    std::mutex mu;
    std::condition_variable cv;
    bool stopped = false, timed_out = false;
    std::thread deadline([&] {
        std::unique_lock<std::mutex> lock(mu);
        if (cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return stopped; }) &&
            !timed_out)
            return;
        lock.unlock();
        if (size_t n = end_child_processes(kChildGraceMs, {private_server_}); n > 0)
            log_->write(KW_LOG_WARN, "stop.timeout passed: ended the " + std::to_string(n) +
                                         " program(s) the handlers were still running");
    });
    const int rc = kw_engine_stop(engine_.get(), -1);
    {
        std::lock_guard<std::mutex> lock(mu);
        stopped = true;
        timed_out = rc == KW_ERR_TIMEOUT;
    }
    cv.notify_one();
    deadline.join();
    return rc != KW_ERR_TIMEOUT;
}

std::vector<std::string> DaemonEngine::describe(bool option_values) const {
    std::vector<std::string> lines;
    lines.push_back("redis: " + conf_value(conf_.get(), "redis.url") + " (mode " +
                    conf_value(conf_.get(), "redis.mode") + ", namespace " +
                    conf_value(conf_.get(), "namespace") + ")");
    for (size_t i = 0; i < handlers_.size(); i++) {
        const HandlerConfig &h = handlers_[i];
        std::string line = "handler \"" + names_.at(i) + "\": plugin " + h.plugin;
        bool events = false;
        for (const auto &[key, value] : h.filter) {
            line +=
                ", " + key + " " + (key == "prefix" || key == "glob" ? "'" + value + "'" : value);
            events = events || key == "events";
        }
        if (!events) line += ", events expired (the default)";
        std::string opts;
        for (const auto &[key, value] : h.options)
            opts += (opts.empty() ? "" : ", ") + key +
                    (!option_values ? "" : "=" + (secret_key(key) ? "***" : value));
        if (!opts.empty()) line += "; options " + opts;
        lines.push_back(line);
    }
    return lines;
}

std::vector<std::string> DaemonEngine::nodes() const {
    std::vector<std::string> out;
    kw_stats_t *stats = nullptr;
    if (!engine_ || kw_engine_stats(engine_.get(), &stats) != KW_OK) return out;
    std::set<std::string> seen;
    for (size_t i = 0; i < kw_stats_count(stats); i++)
        if (std::string(kw_stats_label_name(stats, i)) == "node" &&
            seen.insert(kw_stats_label_value(stats, i)).second)
            out.push_back(kw_stats_label_value(stats, i));
    kw_stats_free(stats);
    return out;
}

void DaemonEngine::on_state(const char *node, kw_conn_state state, const char *detail,
                            void *opaque) {
    auto *self = static_cast<DaemonEngine *>(opaque);
    try {  // nothing may reach the engine's loop thread
        DaemonLog::Fields fields{{"node", node ? node : "?"}};
        if (detail && *detail) fields.emplace_back("detail", detail);
        const int level = state == KW_CONN_BROKEN  ? KW_LOG_WARN
                          : state == KW_CONN_READY ? KW_LOG_INFO
                                                   : KW_LOG_DEBUG;
        self->log_->write(level, state_text(state), fields);
    } catch (...) {
    }
}

}  // namespace keywatch::cli
