#include "core/client.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/text.h"
#include "keywatch.h"

namespace keywatch {
namespace {

bool is_error(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR;
}

std::string text(const redisReply *r) {
    if (!r) return "(no reply)";
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        return std::string(r->str, r->len);
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return "(unexpected reply)";
}

// A byte string as JSON: a string if it is UTF-8, else <name>_b64.
void put_bytes(nlohmann::json &obj, const std::string &name, const std::string &bytes) {
    if (is_valid_utf8(bytes))
        obj[name] = bytes;
    else
        obj[name + "_b64"] = base64_encode(bytes);
}

}  // namespace

Client::Client(Config config) : config_(std::move(config)) {}

Client::~Client() {
    if (ctx_) redisFree(ctx_);
}

int Client::fail(int status, const std::string &msg) {
    error_ = msg;
    return status;
}

int Client::connect() {
    if (ctx_ && !ctx_->err) return KW_OK;
    if (ctx_) {
        redisFree(ctx_);
        ctx_ = nullptr;
    }
    RedisUrl url = config_.effective_url();
    timeval tv{static_cast<time_t>(config_.connect_timeout_ms / 1000),
               static_cast<suseconds_t>(config_.connect_timeout_ms % 1000) * 1000};
    ctx_ = url.is_unix() ? redisConnectUnixWithTimeout(url.unix_path.c_str(), tv)
                         : redisConnectWithTimeout(url.host.c_str(), url.port, tv);
    if (!ctx_ || ctx_->err) {
        std::string why = ctx_ ? ctx_->errstr : "out of memory";
        return fail(KW_ERR_CONNECT, "cannot connect to Redis at " + url.endpoint() + ": " + why +
                                        "; is redis-server running there? check redis.url");
    }
    timeval ct{static_cast<time_t>(config_.command_timeout_ms / 1000),
               static_cast<suseconds_t>(config_.command_timeout_ms % 1000) * 1000};
    redisSetTimeout(ctx_, ct);
    if (!url.password.empty()) {
        std::vector<std::string> auth = {"AUTH"};
        if (!url.user.empty()) auth.push_back(url.user);
        auth.push_back(url.password);
        ReplyPtr r = call(auth);
        if (!r) return call_status_;
        if (is_error(r.get())) return fail(KW_ERR_AUTH, auth_refused_message(url, text(r.get())));
    }
    if (url.db != 0) {
        ReplyPtr r = call({"SELECT", std::to_string(url.db)});
        if (!r) return call_status_;
        if (is_error(r.get()))
            return fail(KW_ERR_REDIS, "SELECT " + std::to_string(url.db) + " failed on " +
                                          url.endpoint() + ": " + text(r.get()));
    }
    return KW_OK;
}

ReplyPtr Client::call(const std::vector<std::string> &args) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    ReplyPtr r(static_cast<redisReply *>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) {
        call_status_ = KW_ERR_CONNECT;
        fail(KW_ERR_CONNECT, "lost the connection to Redis at " +
                                 config_.effective_url().endpoint() + ": " + ctx_->errstr);
        return nullptr;
    }
    if (r->type == REDIS_REPLY_ERROR && r->len >= 6 && memcmp(r->str, "NOAUTH", 6) == 0) {
        call_status_ = KW_ERR_AUTH;
        fail(KW_ERR_AUTH, password_required_message(config_.effective_url()));
        return nullptr;
    }
    return r;
}

QueueKeys Client::queue(const std::string &name) const {
    return QueueKeys::make(config_.ns, name, kStandaloneTag);
}

std::vector<std::string> Client::eval_args(const Script &s, bool by_sha, const QueueKeys &q,
                                           const std::string *key,
                                           const std::vector<std::string> &argv) const {
    std::vector<std::string> keys = q.keys();
    if (key) keys.push_back(*key);
    std::vector<std::string> args = {by_sha ? "EVALSHA" : "EVAL",
                                     by_sha ? script_sha1(s.body) : s.body,
                                     std::to_string(keys.size())};
    args.insert(args.end(), keys.begin(), keys.end());
    args.insert(args.end(), argv.begin(), argv.end());
    return args;
}

ReplyPtr Client::eval(const Script &s, const QueueKeys &q, const std::string *key,
                      const std::vector<std::string> &argv) {
    ReplyPtr r = call(eval_args(s, true, q, key, argv));
    if (r && is_error(r.get()) && r->len >= 8 && memcmp(r->str, "NOSCRIPT", 8) == 0)
        r = call(eval_args(s, false, q, key, argv));
    return r;
}

int Client::run(const Script &s, const QueueKeys &q, const std::string *key,
                const std::vector<std::string> &argv, Decode decode) {
    if (int rc = connect(); rc != KW_OK) return rc;
    if (pipelining_) {
        std::vector<std::string> args = eval_args(s, true, q, key, argv);
        std::vector<const char *> cargv;
        std::vector<size_t> lens;
        for (auto &a : args) {
            cargv.push_back(a.data());
            lens.push_back(a.size());
        }
        redisAppendCommandArgv(ctx_, static_cast<int>(cargv.size()), cargv.data(), lens.data());
        pipeline_.push_back({&s, q, key != nullptr, key ? *key : "", argv, std::move(decode)});
        return KW_OK;
    }
    ReplyPtr r = eval(s, q, key, argv);
    if (!r) return call_status_;
    if (is_error(r.get()))
        return fail(KW_ERR_REDIS, std::string(s.name) + " failed: " + text(r.get()));
    return decode(r.get());
}

int Client::check_key(const std::string &key) {
    if (key.empty())
        return fail(KW_ERR_INVALID_ARG, "the key is empty: give a key of 1 byte or more");
    if (static_cast<int64_t>(key.size()) > config_.key_limit)
        return fail(KW_ERR_TOO_LARGE, "the key is " + std::to_string(key.size()) +
                                          " bytes; limits.key_bytes is " +
                                          std::to_string(config_.key_limit) +
                                          ": use a shorter key or raise the limit");
    return KW_OK;
}

int Client::check_value(const std::string &value, const char *what) {
    if (static_cast<int64_t>(value.size()) > config_.value_limit)
        return fail(KW_ERR_TOO_LARGE,
                    std::string("the ") + what + " is " + std::to_string(value.size()) +
                        " bytes; limits.value_bytes is " + std::to_string(config_.value_limit) +
                        ": store less or raise the limit");
    return KW_OK;
}

int Client::check_queue(const std::string &name) {
    std::string err;
    if (!valid_queue_name(name, &err)) return fail(KW_ERR_INVALID_ARG, err);
    if (name == kKeysQueue)
        return fail(KW_ERR_INVALID_ARG,
                    "'keys' is the key-tracking queue: use kw_track for keys, and another "
                    "name for task queues");
    return KW_OK;
}

int Client::track(const std::string &key, const std::string &value, int64_t ttl_ms, int flags,
                  int64_t *deadline) {
    if (int rc = check_key(key); rc != KW_OK) return rc;
    if (int rc = check_value(value, "value"); rc != KW_OK) return rc;
    if (ttl_ms <= 0)
        return fail(KW_ERR_INVALID_ARG, "ttl " + std::to_string(ttl_ms) +
                                            "ms is not positive: a tracked key needs a TTL > 0 "
                                            "(use kw_untrack with delete to remove a key now)");
    if ((flags & KW_TRACK_NX) && (flags & KW_TRACK_XX))
        return fail(KW_ERR_INVALID_ARG, "KW_TRACK_NX and KW_TRACK_XX exclude each other");
    std::string mode = (flags & KW_TRACK_NX) ? "NX" : (flags & KW_TRACK_XX) ? "XX" : "";
    return run(scripts::kTrack, queue(kKeysQueue), &key,
               {value, std::to_string(ttl_ms), mode, (flags & KW_TRACK_SNAPSHOT) ? "1" : "0"},
               [this, deadline, mode](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "track: bad reply");
                   if (r->integer < 0)
                       return fail(KW_ERR_CONDITION,
                                   "track " + mode + ": the key " +
                                       (mode == "NX" ? "exists" : "does not exist") +
                                       "; nothing was written");
                   if (deadline) *deadline = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

int Client::untrack(const std::string &key, bool delete_key) {
    if (int rc = check_key(key); rc != KW_OK) return rc;
    return run(scripts::kUntrack, queue(kKeysQueue), &key, {delete_key ? "1" : "0"},
               [this](const redisReply *r) {
                   if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
                       return fail(KW_ERR_INTERNAL, "untrack: bad reply");
                   if (r->element[0]->integer == 0 && r->element[1]->integer == 0)
                       return fail(KW_ERR_NOT_FOUND, "the key was not tracked");
                   return static_cast<int>(KW_OK);
               });
}

int Client::adopt(const std::string &key, int flags, int64_t *deadline) {
    if (int rc = check_key(key); rc != KW_OK) return rc;
    return run(scripts::kAdopt, queue(kKeysQueue), &key, {(flags & KW_TRACK_SNAPSHOT) ? "1" : "0"},
               [this, deadline](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "adopt: bad reply");
                   if (r->integer == -2)
                       return fail(KW_ERR_NOT_FOUND, "adopt: no such key; nothing to track");
                   if (r->integer == -1)
                       return fail(KW_ERR_INVALID_ARG,
                                   "adopt: the key has no TTL; give it one (EXPIRE) or use "
                                   "kw_track");
                   if (r->integer == -3)
                       return fail(KW_ERR_INVALID_ARG,
                                   "adopt: a snapshot needs a string key; adopt it without "
                                   "KW_TRACK_SNAPSHOT");
                   if (deadline) *deadline = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

int Client::schedule(const std::string &qname, const std::string &id, const std::string &payload,
                     int64_t at_ms, int64_t delay_ms, int flags, int64_t *at_out) {
    if (int rc = check_queue(qname); rc != KW_OK) return rc;
    if (int rc = check_key(id); rc != KW_OK) return rc;
    if (int rc = check_value(payload, "payload"); rc != KW_OK) return rc;
    if (at_ms < 0 || delay_ms < 0)
        return fail(KW_ERR_INVALID_ARG,
                    "schedule: at and delay must not be negative (a time "
                    "in the past means now; use at=0 and a delay)");
    return run(scripts::kSchedule, queue(qname), nullptr,
               {id, payload, std::to_string(at_ms), std::to_string(delay_ms),
                (flags & KW_SCHEDULE_NX) ? "NX" : ""},
               [this, at_out](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "schedule: bad reply");
                   if (r->integer < 0)
                       return fail(KW_ERR_CONDITION,
                                   "schedule NX: a task with this id exists; nothing was written");
                   if (at_out) *at_out = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

int Client::cancel(const std::string &qname, const std::string &id) {
    if (int rc = check_queue(qname); rc != KW_OK) return rc;
    return run(scripts::kCancel, queue(qname), nullptr, {id}, [this](const redisReply *r) {
        if (r->type != REDIS_REPLY_INTEGER) return fail(KW_ERR_INTERNAL, "cancel: bad reply");
        if (r->integer == -2)
            return fail(KW_ERR_IN_FLIGHT, "cancel: the task is being handled right now");
        if (r->integer == 0) return fail(KW_ERR_NOT_FOUND, "cancel: no such task");
        return static_cast<int>(KW_OK);
    });
}

int Client::reschedule(const std::string &qname, const std::string &id, int64_t at_ms,
                       int64_t delay_ms, int64_t *at_out) {
    if (int rc = check_queue(qname); rc != KW_OK) return rc;
    if (at_ms < 0 || delay_ms < 0)
        return fail(KW_ERR_INVALID_ARG, "reschedule: at and delay must not be negative");
    return run(
        scripts::kReschedule, queue(qname), nullptr,
        {id, std::to_string(at_ms), std::to_string(delay_ms)}, [this, at_out](const redisReply *r) {
            if (r->type != REDIS_REPLY_INTEGER)
                return fail(KW_ERR_INTERNAL, "reschedule: bad reply");
            if (r->integer == -2)
                return fail(KW_ERR_IN_FLIGHT, "reschedule: the task is being handled right now");
            if (r->integer == -1) return fail(KW_ERR_NOT_FOUND, "reschedule: no such task");
            if (at_out) *at_out = r->integer;
            return static_cast<int>(KW_OK);
        });
}

int Client::pipeline_begin() {
    if (pipelining_) return fail(KW_ERR_STATE, "a pipeline is already open");
    if (int rc = connect(); rc != KW_OK) return rc;
    pipelining_ = true;
    pipeline_.clear();
    return KW_OK;
}

int Client::pipeline_end(std::vector<int> *statuses) {
    if (!pipelining_)
        return fail(KW_ERR_STATE, "no pipeline is open: call kw_client_pipeline_begin");
    pipelining_ = false;
    std::vector<Pending> pending;
    pending.swap(pipeline_);
    int first = KW_OK;
    std::string first_error;
    statuses->clear();
    std::vector<size_t> noscript;
    for (size_t i = 0; i < pending.size(); i++) {
        void *raw = nullptr;
        int rc;
        if (ctx_->err || redisGetReply(ctx_, &raw) != REDIS_OK) {
            rc = fail(KW_ERR_CONNECT,
                      std::string("lost the connection in a pipeline: ") + ctx_->errstr);
        } else {
            ReplyPtr r(static_cast<redisReply *>(raw));
            if (is_error(r.get()) && r->len >= 8 && memcmp(r->str, "NOSCRIPT", 8) == 0) {
                noscript.push_back(i);
                rc = KW_OK;  // re-run below
            } else if (is_error(r.get())) {
                rc = fail(KW_ERR_REDIS,
                          std::string(pending[i].script->name) + " failed: " + text(r.get()));
            } else {
                rc = pending[i].decode(r.get());
            }
        }
        statuses->push_back(rc);
        if (rc != KW_OK && first == KW_OK) {
            first = rc;
            first_error = error_;
        }
    }
    // After a restart or failover the script cache is empty: the first EVAL loads it.
    for (size_t i : noscript) {
        Pending &p = pending[i];
        int rc = run(*p.script, p.q, p.has_key ? &p.key : nullptr, p.argv, p.decode);
        (*statuses)[i] = rc;
        if (rc != KW_OK && first == KW_OK) {
            first = rc;
            first_error = error_;
        }
    }
    if (first != KW_OK) error_ = first_error;
    return first;
}

std::vector<std::string> Client::known_queues() {
    std::set<std::string> names;
    std::string cursor = "0";
    std::string match = config_.ns + ":*:{*}:*";
    do {
        ReplyPtr r = call({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
        cursor = text(r->element[0]);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            std::string k = text(r->element[1]->element[i]);
            std::string rest = k.substr(config_.ns.size() + 1);
            size_t brace = rest.find(":{");
            if (brace != std::string::npos) names.insert(rest.substr(0, brace));
        }
    } while (cursor != "0");
    names.insert(kKeysQueue);
    for (auto &q : config_.queues) names.insert(q);
    return {names.begin(), names.end()};
}

int Client::inspect_json(std::string *json) {
    if (int rc = connect(); rc != KW_OK) return rc;
    nlohmann::json out;
    out["queues"] = nlohmann::json::array();
    for (auto &name : known_queues()) {
        ReplyPtr r = eval(scripts::kInspect, queue(name), nullptr, {});
        if (!r) return call_status_;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 6)
            return fail(KW_ERR_REDIS, "inspect failed: " + text(r.get()));
        out["now_ms"] = r->element[0]->integer;
        out["queues"].push_back({{"queue", name},
                                 {"due", r->element[1]->integer},
                                 {"due_now", r->element[2]->integer},
                                 {"inflight", r->element[3]->integer},
                                 {"dead", r->element[4]->integer},
                                 {"oldest_overdue_ms", r->element[5]->integer}});
    }
    *json = out.dump();
    return KW_OK;
}

int Client::dead_list_json(const std::string &qname, size_t limit, std::string *json) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    if (int rc = connect(); rc != KW_OK) return rc;
    ReplyPtr r = call({"XRANGE", queue(qname).dead, "-", "+", "COUNT",
                       std::to_string(std::max<size_t>(limit, 1))});
    if (!r) return call_status_;
    if (r->type != REDIS_REPLY_ARRAY) return fail(KW_ERR_REDIS, "XRANGE failed: " + text(r.get()));
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        nlohmann::json item;
        item["entry"] = text(e->element[0]);
        const redisReply *f = e->element[1];
        for (size_t j = 0; j + 1 < f->elements; j += 2) {
            std::string name = text(f->element[j]), value = text(f->element[j + 1]);
            if (name == "attempts" || name == "deadline" || name == "failed_ms")
                item[name] = std::stoll(value);
            else
                put_bytes(item, name, value);
        }
        out.push_back(item);
    }
    *json = out.dump();
    return KW_OK;
}

int Client::dead_replay(const std::string &qname, const std::string &entry, size_t limit,
                        int64_t *count) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    if (int rc = connect(); rc != KW_OK) return rc;
    QueueKeys q = queue(qname);
    ReplyPtr exists = call({"EXISTS", q.dead});
    if (!exists) return call_status_;
    if (exists->integer == 0)
        return fail(KW_ERR_NOT_FOUND, "queue '" + qname +
                                          "' has no dead letters (unknown queue, or none yet): "
                                          "see keywatch inspect");
    return run(scripts::kReplay, q, nullptr, {entry, std::to_string(std::max<size_t>(limit, 1))},
               [this, count, entry](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "replay: bad reply");
                   if (r->integer < 0) return fail(KW_ERR_NOT_FOUND, "no dead letter " + entry);
                   if (count) *count = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

int Client::dead_purge(const std::string &qname, const std::string &entry, int64_t *count) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    return run(scripts::kPurge, queue(qname), nullptr, {entry},
               [this, count, entry](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "purge: bad reply");
                   if (!entry.empty() && r->integer == 0)
                       return fail(KW_ERR_NOT_FOUND, "no dead letter " + entry);
                   if (count) *count = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

}  // namespace keywatch
