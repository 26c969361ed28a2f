// Test helpers: a real redis-server per test (keywatch::RedisProcess on a free loopback port
// with a private directory, stopped by pid afterwards), its blocking client for set-up
// (RedisProcess::Connection, kept open so SELECT sticks), collectors for events, state
// changes and log lines, and an RAII wrapper around a kw_engine_t. Redis is never mocked.
//
// Thread-safety: the collectors are filled from keywatch threads and read from the test
// thread; each guards its data with a mutex and signals a condition variable.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/base/clock.h"
#include "embedded/redis_process.h"
#include "keywatch.h"
#include "tests/wait.h"

namespace kwtest {

// Printable form of a binary key for failure messages.
inline std::string printable(const std::string &bytes, size_t max = 80) {
    std::string out;
    for (size_t i = 0; i < bytes.size() && i < max; i++) {
        unsigned char c = static_cast<unsigned char>(bytes[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    if (bytes.size() > max) out += "...(" + std::to_string(bytes.size()) + " bytes)";
    return out;
}

// A blocking connection that stays open, for writing test data (binary safe; SELECT sticks):
// RedisClient(host, port, password), command({...}) -> the reply as text.
using RedisClient = keywatch::RedisProcess::Connection;

// Writes key with a TTL of ttl_ms, then touches it (EXISTS) until Redis reports it gone:
// the lookup of an overdue key deletes it and publishes `expired` at once, instead of
// waiting for the active expire cycle. Returns false if the key never went away.
inline bool set_and_expire(RedisClient &c, const std::string &key, int ttl_ms = 50) {
    if (c.command({"SET", key, "v", "PX", std::to_string(ttl_ms)}) != "OK") return false;
    return wait_until([&] { return c.command({"EXISTS", key}) == "0"; });
}

// A one-shot gate a handler can wait on; open() releases every waiter. Thread-safe.
class Gate {
  public:
    void open() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            open_ = true;
        }
        cv_.notify_all();
    }
    // Waits until opened or timeout; true if opened.
    bool wait(milliseconds timeout = milliseconds(30000)) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, timeout, [&] { return open_; });
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
};

// One event as a handler saw it, copied out of the kw_event_t.
struct Event {
    std::string name;
    std::string key;
    int db = -1;
    std::string id;
    std::string node;
    int attempt = 0;
    kw_source source = KW_SOURCE_NOTIFICATION;
    int64_t ts_ms = 0;
    int64_t deadline_ms = 0;
    bool has_value = false;
    std::string value;
};

// Collects the events a handler receives. Pass EventSink::handler with the sink as opaque.
// Optional hook: runs inside the handler (on the worker thread) before the event is
// recorded; decide (if set) chooses the handler's result, else KW_RESULT_ACK. Set both
// before the engine starts.
class EventSink {
  public:
    std::function<void(const Event &)> hook;
    std::function<int(const Event &)> decide;

    static int handler(kw_event_t *ev, void *opaque) {
        auto *self = static_cast<EventSink *>(opaque);
        Event e;
        const char *name = kw_event_name(ev);
        e.name = name ? name : "";
        size_t len = 0;
        const void *key = kw_event_key(ev, &len);
        if (key) e.key.assign(static_cast<const char *>(key), len);
        size_t vlen = 0;
        const void *value = kw_event_value(ev, &vlen);
        e.has_value = value != nullptr;
        if (value) e.value.assign(static_cast<const char *>(value), vlen);
        e.db = kw_event_db(ev);
        const char *id = kw_event_id(ev);
        e.id = id ? id : "";
        const char *node = kw_event_node(ev);
        e.node = node ? node : "";
        e.attempt = kw_event_attempt(ev);
        e.source = kw_event_source(ev);
        e.ts_ms = kw_event_ts_ms(ev);
        e.deadline_ms = kw_event_deadline_ms(ev);
        self->in_handler_++;
        if (self->hook) self->hook(e);
        int result = self->decide ? self->decide(e) : KW_RESULT_ACK;
        {
            std::lock_guard<std::mutex> lock(self->mu_);
            self->events_.push_back(e);
        }
        self->cv_.notify_all();
        self->in_handler_--;
        return result;
    }

    std::vector<Event> events() const {
        std::lock_guard<std::mutex> lock(mu_);
        return events_;
    }
    size_t size() const {
        std::lock_guard<std::mutex> lock(mu_);
        return events_.size();
    }
    int in_handler() const { return in_handler_.load(); }

    // Waits until an event with this name and key (and db, if >= 0) was received.
    bool wait_for(const std::string &name, const std::string &key, int db = -1,
                  milliseconds timeout = kWait) {
        return wait(
            [&](const Event &e) {
                return e.name == name && e.key == key && (db < 0 || e.db == db);
            },
            timeout);
    }
    bool wait(const std::function<bool(const Event &)> &match, milliseconds timeout = kWait) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, timeout,
                            [&] { return std::any_of(events_.begin(), events_.end(), match); });
    }
    bool wait_count(size_t n, milliseconds timeout = kWait) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n; });
    }
    size_t count(const std::string &name, const std::string &key) const {
        std::lock_guard<std::mutex> lock(mu_);
        return std::count_if(events_.begin(), events_.end(),
                             [&](const Event &e) { return e.name == name && e.key == key; });
    }
    // "name key db" lines, for failure messages.
    std::string describe() const {
        std::lock_guard<std::mutex> lock(mu_);
        std::string out;
        for (const auto &e : events_)
            out += "  " + e.name + " " + printable(e.key) + " db=" + std::to_string(e.db) + "\n";
        return out.empty() ? "  (no events)\n" : out;
    }

  private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Event> events_;
    std::atomic<int> in_handler_{0};
};

// Records what the state callback reports.
class StateLog {
  public:
    struct Change {
        std::string node;
        kw_conn_state state;
        std::string detail;
    };
    static void callback(const char *node, kw_conn_state state, const char *detail, void *opaque) {
        auto *self = static_cast<StateLog *>(opaque);
        {
            std::lock_guard<std::mutex> lock(self->mu_);
            self->changes_.push_back({node ? node : "", state, detail ? detail : ""});
        }
        self->cv_.notify_all();
    }
    std::vector<Change> changes() const {
        std::lock_guard<std::mutex> lock(mu_);
        return changes_;
    }
    size_t count(kw_conn_state s) const {
        std::lock_guard<std::mutex> lock(mu_);
        return std::count_if(changes_.begin(), changes_.end(),
                             [&](const Change &c) { return c.state == s; });
    }
    // Waits until `s` has been reported at least n times in total.
    bool wait_count(kw_conn_state s, size_t n, milliseconds timeout = kWait) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, timeout, [&] {
            return static_cast<size_t>(
                       std::count_if(changes_.begin(), changes_.end(),
                                     [&](const Change &c) { return c.state == s; })) >= n;
        });
    }
    // Waits until `node` has been reported in state `s` (at any time since the start).
    bool reached(const std::string &node, kw_conn_state s, milliseconds timeout = kWait) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, timeout, [&] {
            return std::any_of(changes_.begin(), changes_.end(),
                               [&](const Change &c) { return c.node == node && c.state == s; });
        });
    }
    std::string describe() const {
        std::lock_guard<std::mutex> lock(mu_);
        static const char *names[] = {"DISCONNECTED", "CONNECTING", "READY", "BROKEN"};
        std::string out;
        for (const auto &c : changes_) {
            int s = static_cast<int>(c.state);
            out += "  " + c.node + " " + (s >= 0 && s < 4 ? names[s] : "?") + " " + c.detail + "\n";
        }
        return out.empty() ? "  (no state changes)\n" : out;
    }

  private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Change> changes_;
};

// Records what the log callback reports.
class LogSink {
  public:
    struct Line {
        kw_log_level level;
        std::string message;
    };
    static void callback(kw_log_level level, const char *message, void *opaque) {
        auto *self = static_cast<LogSink *>(opaque);
        std::lock_guard<std::mutex> lock(self->mu_);
        self->lines_.push_back({level, message ? message : ""});
    }
    std::vector<Line> lines() const {
        std::lock_guard<std::mutex> lock(mu_);
        return lines_;
    }
    // The first line at `level` or above for which match holds; empty if none.
    std::string find(kw_log_level level,
                     const std::function<bool(const std::string &)> &match) const {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto &l : lines_)
            if (l.level >= level && match(l.message)) return l.message;
        return "";
    }
    std::string describe() const {
        std::lock_guard<std::mutex> lock(mu_);
        std::string out;
        for (const auto &l : lines_)
            out += "  [" + std::to_string(l.level) + "] " + l.message + "\n";
        return out.empty() ? "  (no log lines)\n" : out;
    }

  private:
    mutable std::mutex mu_;
    std::vector<Line> lines_;
};

// Records what the structured log callback (kw_log_fields_fn) reports.
class FieldsLog {
  public:
    struct Line {
        kw_log_level level;
        std::string message;
        std::map<std::string, std::string> fields;
        size_t field_count = 0;  // name/value pairs as passed (a name twice would show)
    };
    static void callback(kw_log_level level, const char *message, const char *const *fields,
                         void *opaque) {
        auto *self = static_cast<FieldsLog *>(opaque);
        Line line{level, message ? message : "", {}, 0};
        for (size_t i = 0; fields && fields[i]; i += 2) {
            line.fields[fields[i]] = fields[i + 1] ? fields[i + 1] : "(null)";
            line.field_count++;
        }
        std::lock_guard<std::mutex> lock(self->mu_);
        self->lines_.push_back(std::move(line));
    }
    std::vector<Line> lines() const {
        std::lock_guard<std::mutex> lock(mu_);
        return lines_;
    }
    // The first line whose message contains `part`; false if none.
    bool find(const std::string &part, Line *out) const {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto &l : lines_)
            if (l.message.find(part) != std::string::npos) {
                *out = l;
                return true;
            }
        return false;
    }
    std::string describe() const {
        std::lock_guard<std::mutex> lock(mu_);
        std::string out;
        for (const auto &l : lines_) {
            out += "  [" + std::to_string(l.level) + "] " + l.message;
            for (const auto &f : l.fields) out += " " + f.first + "=" + f.second;
            out += "\n";
        }
        return out.empty() ? "  (no log lines)\n" : out;
    }

  private:
    mutable std::mutex mu_;
    std::vector<Line> lines_;
};

using keywatch::wall_ms;  // the local wall clock (core/base/clock.h)

inline bool contains(const std::string &haystack, const std::string &needle) {
    return haystack.find(needle) != std::string::npos;
}

inline std::string lower(std::string s) {
    for (auto &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

inline bool icontains(const std::string &haystack, const std::string &needle) {
    return contains(lower(haystack), lower(needle));
}

// An engine with its configuration. Options that make faults show up quickly are set by
// default (short reconnect delays and health check); tests override what they need.
// Declare it after the sinks it delivers to, so that it is freed (and stopped) first.
class Engine {
  public:
    explicit Engine(const std::string &url) {
        conf_ = kw_conf_new();
        if (!conf_) throw std::runtime_error("kw_conf_new returned NULL");
        set("redis.url", url);
        set("redis.connect_timeout", "5s");
        set("reconnect.min", "50ms");
        set("reconnect.max", "500ms");
        set("health.interval", "200ms");
        set("health.timeout", "2s");
        set("stop.timeout", "5s");
    }
    ~Engine() {
        kw_engine_free(engine_);
        kw_conf_free(conf_);
    }
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Sets a configuration option; a failure is a test failure (with the errstr). The engine
    // is made from the configuration at the first get() or add(): an option set after that
    // would be silently unused, so it fails the test.
    void set(const std::string &name, const std::string &value) {
        if (engine_) {
            ADD_FAILURE() << "option " << name << " set after the engine was made (add() or "
                          << "get() makes it): set options first";
            return;
        }
        char err[512] = "";
        int rc = kw_conf_set(conf_, name.c_str(), value.c_str(), err, sizeof err);
        if (rc != KW_OK)
            ADD_FAILURE() << "kw_conf_set(" << name << ", " << value << ") = " << kw_err_name(rc)
                          << ": " << err;
    }

    // Creates the engine from the configuration (once).
    kw_engine_t *get() {
        if (!engine_) {
            char err[512] = "";
            int rc = kw_engine_new(conf_, &engine_, err, sizeof err);
            if (rc != KW_OK || !engine_)
                throw std::runtime_error(std::string("kw_engine_new failed: ") + kw_err_name(rc) +
                                         ": " + err);
        }
        return engine_;
    }

    // Registers sink for the events a filter built from name/value pairs selects.
    void add(EventSink *sink, const std::vector<std::pair<std::string, std::string>> &filter) {
        kw_filter_t *f = kw_filter_new();
        ASSERT_NE(f, nullptr);
        for (const auto &nv : filter) {
            char err[512] = "";
            int rc = kw_filter_set(f, nv.first.c_str(), nv.second.c_str(), err, sizeof err);
            EXPECT_EQ(rc, KW_OK) << "kw_filter_set(" << nv.first << ", " << nv.second
                                 << "): " << err;
        }
        int rc = kw_engine_add_handler(get(), f, &EventSink::handler, sink, nullptr);
        kw_filter_free(f);
        ASSERT_EQ(rc, KW_OK) << kw_err_name(rc) << ": " << kw_engine_last_error(get());
    }

    void watch_states(StateLog *log) {
        ASSERT_EQ(kw_engine_set_state_cb(get(), &StateLog::callback, log), KW_OK);
    }
    void watch_logs(LogSink *log) {
        ASSERT_EQ(kw_engine_set_log_cb(get(), &LogSink::callback, log), KW_OK);
    }
    void watch_log_fields(FieldsLog *log) {
        ASSERT_EQ(kw_engine_set_log_fields_cb(get(), &FieldsLog::callback, log), KW_OK);
    }

    int start() { return kw_engine_start(get()); }
    std::string last_error() { return kw_engine_last_error(get()); }

    // Waits until a statistic reaches `want` (kwtest::stat_reaches): the only way to read one.
    ::testing::AssertionResult stat_reaches(const std::string &name, StatWant want,
                                            int64_t *seen = nullptr, milliseconds timeout = kWait) {
        return kwtest::stat_reaches(get(), name, want, seen, timeout);
    }
    // "name=value, ..." of the statistics named, for failure messages only.
    std::string stats_text(const std::vector<std::string> &names) {
        return kwtest::stats_text(get(), names);
    }

    kw_conf_t *conf() { return conf_; }

  private:
    kw_conf_t *conf_ = nullptr;
    kw_engine_t *engine_ = nullptr;
};

// Base fixture: one private redis-server per test. Override options() to configure it.
class RedisTest : public ::testing::Test {
  protected:
    virtual keywatch::RedisProcess::Options options() { return {}; }

    void SetUp() override {
        redis_ = std::make_unique<keywatch::RedisProcess>(options());
        redis_->start();
    }
    void TearDown() override {
        if (HasFailure() && redis_)
            std::cerr << "redis-server log tail:\n" << redis_->log_tail(2000) << "\n";
        redis_.reset();  // stops the server by pid and removes its directory
    }

    keywatch::RedisProcess &redis() { return *redis_; }
    // A fresh set-up client on the server (authenticated if it has a password).
    std::unique_ptr<RedisClient> client(const std::string &password = "") {
        return std::make_unique<RedisClient>(redis_->host(), redis_->port(), password);
    }

    std::unique_ptr<keywatch::RedisProcess> redis_;
};

}  // namespace kwtest
