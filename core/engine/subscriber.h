// Subscriber: keywatch's presence on one Redis node. A command connection checks the
// server's notify-keyspace-events and publishes heartbeats; a subscriber connection
// PSUBSCRIBEs to the keyevent channels and hears the heartbeats: a PUBLISH that went
// through the server's pub/sub path proves more than a PING, which the server answers
// without it (and which hiredis 0.14 lost on subscribed connections). Any failure
// drops both connections and reconnects with capped exponential backoff and jitter;
// retry_now() ends that wait when another connection to the node succeeded.
// Loop thread only, except state(), which any thread may read.
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/backoff.h"
#include "core/base/event.h"
#include "core/redis/event_loop.h"
#include "core/base/log_fields.h"
#include "core/redis/redis_conn.h"

namespace keywatch {

class Subscriber;

// Where a Subscriber's events go: the claim intake of its node (see node_intake.h), so that an
// event never leaves the node it was heard on. Called on the loop thread.
class EventSink {
  public:
    virtual ~EventSink() = default;
    virtual void on_event(Event &&ev) = 0;
};

// What a Subscriber reports to its owner about its node: state, start, log, keyspace
// messages. Called on the loop thread.
class SubscriberSink {
  public:
    virtual ~SubscriberSink() = default;
    virtual void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) = 0;
    // The outcome of the first connection attempt: KW_OK once subscribed, else the error.
    // After a failed first attempt the subscriber stays down.
    virtual void on_started(Subscriber &sub, int status, const std::string &message) = 0;
    // A log line; fields name the node it is about (log_fields.h).
    virtual void log(kw_log_level level, const std::string &message, const LogFields &fields) = 0;
    // A message on one of Options::keyspace_patterns: `event` happened to `key`.
    virtual void on_keyspace(Subscriber &, const std::string &key, const std::string &event) {
        (void)key;
        (void)event;
    }
};

class Subscriber {
  public:
    // The settings (the fields without a default here) come from Config through
    // subscriber_options() (core/engine/config_slices.h); the others are wiring the engine and
    // Fanout add.
    struct Options {
        int64_t connect_timeout_ms;
        Backoff reconnect;
        int64_t health_interval_ms;
        int64_t health_timeout_ms;
        bool notify_enable;
        // The keyevent channel patterns to PSUBSCRIBE (the plan's keyevent_patterns); one
        // without a glob character names one channel, which it SUBSCRIBEs to.
        std::vector<std::string> event_patterns;
        // Events name their node with this string, which must outlive every event (the
        // engine interns it); null: the subscriber's own endpoint string.
        const std::string *node_name = nullptr;
        // A failed first attempt is retried like any lost connection (cluster masters:
        // the others work meanwhile). on_started still reports the first outcome.
        bool retry_from_start = false;
        // Keyspace channel patterns to hear too (the sweeper's due keys in a cluster).
        std::vector<std::string> keyspace_patterns;
        // The engines channel (engines_channel(), channel.h) to subscribe to before the
        // patterns, in the same write (an engine serving tracked keys); empty: none.
        std::string engines_channel;
        // From the engine's plan (core/engine/plan.h): the notify-keyspace-events flags the
        // events and patterns need, the events the event table lacks (said once, as their
        // flags are unknown) and the channel rules that grant the subscriptions.
        std::string notify_flags = "E";
        std::vector<std::string> unknown_events;
        std::string channel_rules;
        // SELECT the URL's db on the command connection, so that a db the server does not
        // have fails the start instead of the queue connection later (standalone only:
        // a cluster has db 0 alone).
        bool select_db = false;
        // Before the first subscription, check that the ACL user may run the queue
        // scripts (EVAL/EVALSHA) on these keys (empty: on no key): a NOPERM then fails
        // the start, naming the rule that grants it. check_scripts = the engine sweeps.
        bool check_scripts = false;
        // A dry run (kw_engine_check): with notify_enable, say what CONFIG SET would change
        // instead of changing it. Nothing is written to the server.
        bool dry_run = false;
        std::vector<std::string> script_keys;
        std::string ns;  // the namespace, for the rule in that message
    };

    Subscriber(EventLoop &loop, RedisUrl url, Options opts, SubscriberSink *sink,
               EventSink *events);
    Subscriber(const Subscriber &) = delete;
    Subscriber &operator=(const Subscriber &) = delete;

    void start();
    void shutdown();  // close both connections; no callback follows
    // Evidence that the node is back (another connection to it succeeded): a reconnect
    // waiting out its backoff after a failure that was not permanent starts now.
    void retry_now();

    const std::string &endpoint() const { return endpoint_; }
    kw_conn_state state() const { return state_.load(std::memory_order_relaxed); }
    // The channel it publishes its heartbeats on, subscribed on every connection after
    // the engines channel and the patterns (set at construction; any thread).
    const std::string &own_channel() const { return hb_channel_; }

  private:
    void connect_all();
    void check_permissions();
    void check_scripts();
    // The ACL rule (after "ACL SETUSER user") that grants every channel keywatch uses.
    std::string channel_grant() const;
    void check_notify_config();
    void connect_subscriber();
    void subscribe();
    void handle_push(redisReply *r);
    void become_ready();
    void lost(const RedisConn::Failure &f);
    void heartbeat();
    void set_state(kw_conn_state s, const std::string &detail);
    // A line to the sink, with this node's name as its `node` field.
    void log(kw_log_level level, const std::string &message);

    RedisUrl url_;
    Options opts_;
    SubscriberSink *sink_;
    EventSink *events_;
    std::string endpoint_;
    std::string hb_channel_;
    RedisConn cmd_, sub_;
    Timer setup_timer_, retry_timer_, health_timer_;
    std::atomic<kw_conn_state> state_{KW_CONN_DISCONNECTED};
    bool started_once_ = false;           // the first attempt's outcome was reported
    bool down_ = true;                    // shut down or failed at start: no reconnects
    size_t confirmations_ = 0;            // (p)subscribe confirmations still expected
    int attempt_ = 0;                     // reconnect attempts since the last ready
    bool retry_after_permanent_ = false;  // the reconnect waiting follows a permanent failure
    uint64_t hb_sent_ = 0;
    int64_t last_hb_ms_ = 0;
    std::mt19937_64 rng_;
};

}  // namespace keywatch
