#include "core/engine/subscriber.h"

#include <chrono>
#include <cstring>

#include "core/redis/channel.h"
#include "core/redis/keyspace_events.h"
#include "core/redis/reply_error.h"

namespace keywatch {
namespace {

int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

bool is_noauth(const redisReply *r) {
    return classify(r) == ReplyError::Auth;
}

}  // namespace

Subscriber::Subscriber(EventLoop &loop, RedisUrl url, Options opts, SubscriberSink *sink,
                       EventSink *events)
    : url_(std::move(url)),
      opts_(std::move(opts)),
      sink_(sink),
      events_(events),
      endpoint_(url_.endpoint()),
      cmd_(loop.base(), url_, "command", opts_.select_db),
      sub_(loop.base(), url_, "subscriber"),
      setup_timer_(loop.base(),
                   [this] {
                       lost({"timed out setting up " + endpoint_ +
                                 " (connected, but the setup commands - SELECT, permission "
                                 "checks, CONFIG GET, PSUBSCRIBE - got no answer within "
                                 "redis.connect_timeout): is the server paused or "
                                 "overloaded?",
                             false});
                   }),
      retry_timer_(loop.base(), [this] { connect_all(); }),
      health_timer_(loop.base(), [this] { heartbeat(); }),
      rng_(std::random_device{}()) {
    char id[17];
    snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(rng_()));
    hb_channel_ = heartbeat_channel(id);
}

void Subscriber::start() {
    down_ = false;
    connect_all();
}

void Subscriber::shutdown() {
    down_ = true;
    setup_timer_.cancel();
    retry_timer_.cancel();
    health_timer_.cancel();
    cmd_.close();
    sub_.close();
    set_state(KW_CONN_DISCONNECTED, "stopped");
}

void Subscriber::retry_now() {
    if (down_ || !retry_timer_.pending() || retry_after_permanent_) return;
    retry_timer_.cancel();
    connect_all();
}

void Subscriber::set_state(kw_conn_state s, const std::string &detail) {
    if (state_.load() == s) return;
    state_.store(s);
    sink_->on_state(*this, s, detail);
}

void Subscriber::connect_all() {
    if (down_) return;
    set_state(KW_CONN_CONNECTING, "connecting to " + endpoint_);
    setup_timer_.arm(opts_.connect_timeout_ms);
    auto on_lost = [this](const RedisConn::Failure &f) { lost(f); };
    cmd_.connect(
        opts_.connect_timeout_ms, [this] { check_permissions(); }, on_lost);
}

// What keywatch needs at start and a retry cannot bring: PUBLISH to its heartbeat channel
// and, when it sweeps, its queue scripts on its keys. Checked on the first connection only
// (a permission taken away later shows up as failing commands, which back off).
void Subscriber::check_permissions() {
    if (started_once_) {
        check_notify_config();
        return;
    }
    cmd_.command({"PUBLISH", hb_channel_, "0"}, [this](redisReply *r) {
        const ReplyError kind = classify(r);
        if (kind == ReplyError::NoPerm) {
            lost({permission_message(url_, "PUBLISH to keywatch's heartbeat channel",
                                     reply_to_string(r), channel_grant()),
                  true, KW_ERR_AUTH});
            return;
        }
        if (kind == ReplyError::Auth) {
            lost({password_required_message(url_), true, KW_ERR_AUTH});
            return;
        }
        check_scripts();
    });
}

std::string Subscriber::channel_grant() const {
    return "+publish +psubscribe +subscribe " + opts_.channel_rules +
           " (or allchannels for all of them)";
}

void Subscriber::check_scripts() {
    if (!opts_.check_scripts) {
        check_notify_config();
        return;
    }
    // A script that touches nothing: the ACL still checks the command and every key
    // declared (Redis 7.0 assumes scripts read and write their keys). EVAL caches it, so
    // the EVALSHA (what the sweeper sends) finds it.
    static const char *kNoop = "return 0";
    static const char *kNoopSha = "06d3d9b2060dd51343d5f19f0e531f15c507e3d1";  // SHA1(kNoop)
    auto args_for = [this](const char *cmd, const char *script) {
        std::vector<std::string> args = {cmd, script, std::to_string(opts_.script_keys.size())};
        args.insert(args.end(), opts_.script_keys.begin(), opts_.script_keys.end());
        return args;
    };
    auto refused = [this](redisReply *r) {
        if (classify(r) != ReplyError::NoPerm) return false;
        lost({scripts_permission_message(url_, opts_.ns, reply_to_string(r)), true, KW_ERR_AUTH});
        return true;
    };
    cmd_.command(args_for("EVAL", kNoop), [this, args_for, refused](redisReply *r) {
        if (refused(r)) return;
        cmd_.command(args_for("EVALSHA", kNoopSha), [this, refused](redisReply *r2) {
            if (!refused(r2)) check_notify_config();
        });
    });
}

void Subscriber::check_notify_config() {
    const std::string need = opts_.notify_flags;
    if (!opts_.unknown_events.empty() && !started_once_) {
        std::string names;
        for (auto &e : opts_.unknown_events) names += (names.empty() ? "" : ", ") + e;
        log(KW_LOG_INFO,
            "cannot tell which notify-keyspace-events flag these events "
            "need: " +
                names + "; check that the server publishes them");
    }
    cmd_.command({"CONFIG", "GET", "notify-keyspace-events"}, [this, need](redisReply *r) {
        if (is_noauth(r)) {
            lost({password_required_message(url_), true, KW_ERR_AUTH});
            return;
        }
        std::string have;
        if (!notify_flags_from_reply(r, &have)) {
            log(KW_LOG_WARN, "cannot check notify-keyspace-events on " + endpoint_ +
                                 " (CONFIG GET answered: " + reply_to_string(r) +
                                 "); make sure it includes '" + need +
                                 "', or keyspace events will not arrive");
            connect_subscriber();
            return;
        }
        std::string missing = missing_notify_flags(have, need);
        if (missing.empty()) {
            connect_subscriber();
            return;
        }
        std::string wanted = have + missing;
        if (!opts_.notify_enable) {
            log(KW_LOG_WARN, "notify-keyspace-events on " + endpoint_ + " is '" + have +
                                 "' and lacks '" + missing +
                                 "': the events that need these flags will not arrive. Fix: "
                                 "CONFIG SET notify-keyspace-events " +
                                 wanted + " on the server, or set notify.enable=true");
            connect_subscriber();
            return;
        }
        if (opts_.dry_run) {
            log(KW_LOG_INFO, "notify-keyspace-events on " + endpoint_ + " is '" + have +
                                 "' and lacks '" + missing + "': start would set it to '" + wanted +
                                 "' (notify.enable); a check changes nothing");
            connect_subscriber();
            return;
        }
        cmd_.command({"CONFIG", "SET", "notify-keyspace-events", wanted}, [this, have, wanted](
                                                                              redisReply *set) {
            if (set->type == REDIS_REPLY_ERROR)
                log(KW_LOG_WARN,
                    "notify.enable: CONFIG SET "
                    "notify-keyspace-events " +
                        wanted + " on " + endpoint_ + " failed: " + reply_to_string(set) +
                        "; set it on the server yourself");
            else
                log(KW_LOG_INFO, "notify-keyspace-events on " + endpoint_ + " changed from '" +
                                     have + "' to '" + wanted + "' (notify.enable)");
            connect_subscriber();
        });
    });
}

void Subscriber::connect_subscriber() {
    sub_.set_push_handler([this](redisReply *r) { handle_push(r); });
    sub_.connect(
        opts_.connect_timeout_ms, [this] { subscribe(); },
        [this](const RedisConn::Failure &f) { lost(f); });
}

void Subscriber::subscribe() {
    // A pattern that names one channel (the tracked db's keyevents) is SUBSCRIBEd to.
    std::vector<std::string> patterns = {"PSUBSCRIBE"}, channels = {"SUBSCRIBE"};
    for (const std::string &p : opts_.event_patterns)
        (names_one_channel(p) ? channels : patterns).push_back(p);
    patterns.insert(patterns.end(), opts_.keyspace_patterns.begin(), opts_.keyspace_patterns.end());
    // One per pattern and channel, plus the heartbeat channel.
    confirmations_ = patterns.size() - 1 + channels.size();
    // The engines channel first, in the same write (trap T9): a claim that counts one
    // listener there (this engine) knows no other engine can hear its keys' notifications.
    bool engines_sent = true;
    if (!opts_.engines_channel.empty()) {
        confirmations_++;
        engines_sent = sub_.subscribe({"SUBSCRIBE", opts_.engines_channel});
    }
    // An engine serving only task queues needs no keyevent channel, only the heartbeat.
    bool patterns_sent = engines_sent && (patterns.size() == 1 || sub_.subscribe(patterns)) &&
                         (channels.size() == 1 || sub_.subscribe(channels));
    if (!patterns_sent || !sub_.subscribe({"SUBSCRIBE", hb_channel_}))
        lost({"cannot send PSUBSCRIBE to " + endpoint_, false});
}

void Subscriber::handle_push(redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        const ReplyError kind = classify(r);
        if (kind == ReplyError::NoPerm) {
            lost({permission_message(url_, "subscribe to keywatch's channels", reply_to_string(r),
                                     channel_grant()),
                  true, KW_ERR_AUTH});
        } else if (kind == ReplyError::Auth) {
            lost({password_required_message(url_), true, KW_ERR_AUTH});
        } else {
            lost({"Redis at " + endpoint_ + " refused PSUBSCRIBE: " + reply_to_string(r), false});
        }
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
    const redisReply *kind = r->element[0];
    if (kind->type != REDIS_REPLY_STRING) return;
    std::string_view k(kind->str, kind->len);
    // A keyevent of a pattern (pmessage) or of a channel (message); any other message is a
    // heartbeat.
    const bool pattern = k == "pmessage" && r->elements == 4;
    const redisReply *ch = r->element[pattern ? 2 : 1], *payload = r->element[pattern ? 3 : 2];
    ParsedChannel pc;
    if ((pattern || (k == "message" && r->elements == 3)) && ch->type == REDIS_REPLY_STRING &&
        payload->type == REDIS_REPLY_STRING &&
        parse_channel(std::string_view(ch->str, ch->len), &pc)) {
        if (pc.kind == ChannelKind::Keyspace) {
            sink_->on_keyspace(*this, std::string(pc.rest),
                               std::string(payload->str, payload->len));
            return;
        }
        Event ev;
        ev.name.assign(pc.rest.data(), pc.rest.size());
        ev.key.assign(payload->str, payload->len);
        ev.db = pc.db;  // ts_ms: stamped by the intake, once per read
        ev.node = opts_.node_name ? opts_.node_name : &endpoint_;
        events_->on_event(std::move(ev));
        return;
    }
    if (k == "message") {
        last_hb_ms_ = steady_ms();
        return;
    }
    if ((k == "psubscribe" || k == "subscribe") && confirmations_ > 0) {
        if (--confirmations_ == 0) become_ready();
    }
}

void Subscriber::become_ready() {
    setup_timer_.cancel();
    attempt_ = 0;
    last_hb_ms_ = steady_ms();
    health_timer_.arm(opts_.health_interval_ms);
    set_state(KW_CONN_READY, "subscribed to " + std::to_string(opts_.event_patterns.size()) +
                                 " keyevent channel pattern(s) on " + endpoint_);
    if (!started_once_) {
        started_once_ = true;
        sink_->on_started(*this, KW_OK, "");
    }
}

void Subscriber::lost(const RedisConn::Failure &f) {
    if (down_) return;
    setup_timer_.cancel();
    health_timer_.cancel();
    cmd_.close();
    sub_.close();
    if (!started_once_) {
        // The first attempt decides kw_engine_start's result. A standalone engine stops
        // us then; a cluster master (retry_from_start) keeps trying like any lost node.
        started_once_ = true;
        bool timeout = f.message.find("timed out") != std::string::npos;
        int status = f.permanent ? (f.status ? f.status : KW_ERR_AUTH)
                     : timeout   ? KW_ERR_TIMEOUT
                                 : KW_ERR_CONNECT;
        if (!opts_.retry_from_start) {
            down_ = true;
            set_state(KW_CONN_DISCONNECTED, f.message);
            sink_->on_started(*this, status, f.message);
            return;
        }
        sink_->on_started(*this, status, f.message);
    }
    set_state(KW_CONN_BROKEN, f.message);
    retry_after_permanent_ = f.permanent;
    // Jittered, so a fleet of watchers does not reconnect in lockstep after a restart.
    int64_t delay = opts_.reconnect.jittered(attempt_++, rng_());
    log(f.permanent ? KW_LOG_ERROR : KW_LOG_WARN,
        f.message + "; reconnecting in " + std::to_string(delay) + "ms");
    retry_timer_.arm(delay);
}

void Subscriber::heartbeat() {
    if (down_ || state_.load() != KW_CONN_READY) return;
    int64_t silent = steady_ms() - last_hb_ms_;
    if (silent > opts_.health_timeout_ms) {
        lost({"no heartbeat from " + endpoint_ + " for " + std::to_string(silent) +
                  "ms (health.timeout): the server or the network is stuck",
              false});
        return;
    }
    cmd_.command({"PUBLISH", hb_channel_, std::to_string(++hb_sent_)}, [](redisReply *) {});
    health_timer_.arm(opts_.health_interval_ms);
}

void Subscriber::log(kw_log_level level, const std::string &message) {
    sink_->log(level, message, {{"node", opts_.node_name ? *opts_.node_name : endpoint_}});
}

}  // namespace keywatch
