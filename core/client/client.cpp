#include "core/client/client.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <strings.h>
#include <set>
#include <tuple>

#include "core/redis/reply_error.h"
#include "core/queue/reply_ms.h"
#include "core/redis/reply_text.h"
#include "core/redis/slots.h"
#include "core/base/time_limit.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

bool is_error(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR;
}

int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

RouterOptions router_options(const Config &c) {
    RouterOptions o;
    o.seeds = c.effective_seeds();
    o.mode = c.mode;
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.command_timeout_ms = c.command_timeout_ms;
    return o;
}

Client::Client(Config config) : config_(std::move(config)), router_(router_options(config_)) {}

Client::~Client() = default;

int Client::fail(int status, const std::string &msg) {
    error_ = msg;
    return status;
}

int Client::routed(int status) {
    if (status != KW_OK) error_ = router_.error();
    return status;
}

ReplyPtr Client::routed(ReplyPtr reply) {
    if (!reply) error_ = router_.error();
    return reply;
}

int Client::connect() {
    return routed(router_.connect());
}

ReplyPtr Client::call(const Endpoint &node, const std::vector<std::string> &args) {
    return routed(router_.call(node, args));
}

ReplyPtr Client::exec(Call &call) {
    return routed(router_.exec(call));
}

int Client::finish(Call &c, ReplyPtr r) {
    if (!r) return router_.status();
    if (classify(r.get()) == ReplyError::NoPerm)
        return fail(KW_ERR_AUTH, scripts_permission_message(router_.url(c.node), config_.ns,
                                                            reply_to_string(r.get())));
    if (is_error(r.get()))
        return fail(KW_ERR_REDIS,
                    std::string(c.script->name) + " failed: " + reply_to_string(r.get()));
    return c.decode(r.get());
}

size_t Client::first_key_index(const std::vector<std::string> &args) {
    if (args.size() < 2) return 0;
    // Once per command of a plugin's pipeline: compared in place, nothing allocated.
    static const char *const scripts[] = {"EVAL",       "EVALSHA", "EVAL_RO",
                                          "EVALSHA_RO", "FCALL",   "FCALL_RO"};
    const std::string &cmd = args[0];
    bool script = false;
    for (const char *name : scripts)
        script = script ||
                 (cmd.size() == strlen(name) && strncasecmp(cmd.data(), name, cmd.size()) == 0);
    if (!script) return 1;
    if (args.size() < 4 || args[2].empty() || args[2] == "0") return 0;
    return 3;
}

int Client::command(std::vector<std::string> args, ReplyPtr *reply) {
    reply->reset();
    if (args.empty()) return fail(KW_ERR_INVALID_ARG, "command: no arguments");
    if (int rc = connect(); rc != KW_OK) return rc;
    size_t k = first_key_index(args);
    const std::string key = k ? args[k] : std::string();  // before args move
    *reply = command_for_key(key, std::move(args));
    return *reply ? KW_OK : router_.status();
}

void Client::commands(std::vector<std::vector<std::string>> &&cmds,
                      std::vector<ClusterRouter::Outcome> *out) {
    if (int rc = connect(); rc != KW_OK) {
        out->clear();
        out->resize(cmds.size());
        for (auto &o : *out) {
            o.status = rc;
            o.error = error_;
        }
        return;
    }
    static const std::string kNoKey;
    std::vector<Call> calls(cmds.size());
    std::vector<ClusterRouter::Call *> ptrs(cmds.size());
    for (size_t i = 0; i < cmds.size(); i++) {
        size_t k = first_key_index(cmds[i]);
        calls[i] = plain_call(k ? cmds[i][k] : kNoKey, std::move(cmds[i]));
        ptrs[i] = &calls[i];
    }
    router_.exec_all(ptrs, out);
}

Client::Call Client::plain_call(const std::string &key, std::vector<std::string> &&args) {
    Call c;
    c.script = nullptr;
    c.slot = router_.cluster() ? key_slot(key) : 0;  // before args move: key may be one
    c.node = router_.master_for_slot(c.slot);
    c.args = std::move(args);
    return c;
}

ReplyPtr Client::command_for_key(const std::string &key, std::vector<std::string> args) {
    if (args.empty()) {
        fail(KW_ERR_INVALID_ARG, "command_for_key: no command given");
        return nullptr;
    }
    if (connect() != KW_OK) return nullptr;
    Call c = plain_call(key, std::move(args));
    return exec(c);
}

const QueueKeys &Client::queue_keys(const std::string &name, const std::string &tag) {
    std::string id = name + "/" + tag;
    auto it = keys_cache_.find(id);
    if (it == keys_cache_.end())
        it = keys_cache_.emplace(id, QueueKeys::make(config_.ns, name, tag)).first;
    return it->second;
}

const QueueKeys &Client::keys_queue(int slot) {
    // Every kw_client_track looks these up: by slot, without building a string.
    if (keys_queue_by_slot_.empty())
        keys_queue_by_slot_.assign(router_.cluster() ? kSlotCount : 1, nullptr);
    const QueueKeys *&k = keys_queue_by_slot_[static_cast<size_t>(router_.cluster() ? slot : 0)];
    if (!k)
        k = &queue_keys(kKeysQueue,
                        router_.cluster() ? SlotTags::instance().tag(slot) : kStandaloneTag);
    return *k;
}

Client::Call Client::script_call(const Script &s, const std::string &name, const std::string &tag,
                                 int slot, const std::string *key,
                                 std::vector<std::string> &&argv) {
    // (Only the standard tag of the slot is the cached `keys` queue: inspect and replay may
    // name queues found by a scan.)
    const bool keys =
        name == kKeysQueue &&
        (router_.cluster() ? tag == SlotTags::instance().tag(slot) : tag == kStandaloneTag);
    const QueueKeys &q = keys ? keys_queue(slot) : queue_keys(name, tag);
    Call c;
    size_t at =
        script_args(c, s, q, slot, key ? std::string_view(*key) : std::string_view(), argv.size());
    for (auto &a : argv) c.args[at++] = std::move(a);
    return c;
}

void Client::call_head(Call &c, const Script &s, int slot, size_t argc) {
    c.script = &s;
    c.slot = slot;
    c.node = router_.master_for_slot(slot);
    c.no_wait = false;
    c.args.resize(argc);
    c.args[0].assign("EVALSHA");
    c.args[1].assign(s.sha());
}

size_t Client::script_args(Call &c, const Script &s, const QueueKeys &q, int slot,
                           std::string_view key, size_t argc) {
    if (s.key_script) {
        call_head(c, s, slot, 6 + argc);
        c.args[2].assign("3");
        c.args[3].assign(q.due);
        c.args[4].assign(q.data);
        c.args[5].assign(key);
    } else {
        const std::vector<std::string> keys = q.keys();
        call_head(c, s, slot, 3 + keys.size() + argc);
        c.args[2].assign(std::to_string(keys.size()));
        for (size_t i = 0; i < keys.size(); i++) c.args[3 + i].assign(keys[i]);
    }
    return c.args.size() - argc;
}

int Client::run(const Script &s, const std::string &name, const std::string &id,
                const std::string *key, std::vector<std::string> &&argv, Decode decode, int slot) {
    if (int rc = connect(); rc != KW_OK) return rc;
    if (!router_.cluster())
        slot = 0;
    else if (slot < 0)
        slot = key_slot(id);
    Call c =
        script_call(s, name, router_.cluster() ? SlotTags::instance().tag(slot) : kStandaloneTag,
                    slot, key, std::move(argv));
    c.decode = std::move(decode);
    if (pipelining_) {
        queue_in_pipeline(std::move(c));
        return KW_OK;
    }
    return finish(c, exec(c));
}

void Client::queue_in_pipeline(Call &&c) {
    Call &slot = pipeline_slot();
    slot = std::move(c);
    send_queued(slot);
}

Client::Call &Client::pipeline_slot() {
    if (queued_ == pipeline_.size()) pipeline_.emplace_back();
    return pipeline_[queued_++];
}

void Client::send_queued(Call &c) {
    BlockingRedis *conn = c.node ? router_.node(*c.node) : nullptr;
    if (!conn) {
        c.node.reset();  // sent on its own at the end
        return;
    }
    argv_scratch_.clear();
    lens_scratch_.clear();
    for (auto &a : c.args) {
        argv_scratch_.push_back(a.data());
        lens_scratch_.push_back(a.size());
    }
    if (!conn->send_argv(static_cast<int>(argv_scratch_.size()), argv_scratch_.data(),
                         lens_scratch_.data()))
        c.node.reset();
}

void Client::trim_pipeline(size_t used) {
    // Enough for the usual pipeline; a rare large one's slots and large values are freed.
    constexpr size_t kKeptCalls = 1024, kKeptArgBytes = 1024;
    if (pipeline_.size() > kKeptCalls) {
        pipeline_.resize(kKeptCalls);
        pipeline_.shrink_to_fit();
    }
    for (size_t i = 0; i < std::min(used, pipeline_.size()); i++)
        for (std::string &a : pipeline_[i].args)
            if (a.capacity() > kKeptArgBytes) std::string().swap(a);
}

int Client::check_when(const char *what, int64_t at_ms, int64_t delay_ms) {
    const std::string verb(what);
    if (at_ms < 0 || delay_ms < 0)
        return fail(KW_ERR_INVALID_ARG, verb +
                                            ": at and delay must not be negative (a time in the "
                                            "past means now; use at=0 and a delay)");
    if (!time_within_max(at_ms))
        return fail(KW_ERR_INVALID_ARG, verb + ": at " + time_after_max(std::to_string(at_ms)) +
                                            "; nothing was written");
    if (!duration_within_max(delay_ms))
        return fail(KW_ERR_INVALID_ARG, verb + ": delay " +
                                            duration_after_max(std::to_string(delay_ms) + "ms") +
                                            "; nothing was written");
    return KW_OK;
}

int Client::fail_past_max(const char *what) {
    return fail(KW_ERR_INVALID_ARG, std::string(what) +
                                        ": the deadline is later than " KW_MAX_TIME_ISO
                                        " on Redis's clock, the latest keywatch accepts; nothing "
                                        "was written");
}

int Client::check_key(std::string_view key) {
    if (key.empty())
        return fail(KW_ERR_INVALID_ARG, "the key is empty: give a key of 1 byte or more");
    if (static_cast<int64_t>(key.size()) > config_.key_limit)
        return fail(KW_ERR_TOO_LARGE, "the key is " + std::to_string(key.size()) +
                                          " bytes; limits.key_bytes is " +
                                          std::to_string(config_.key_limit) +
                                          ": use a shorter key or raise the limit");
    return KW_OK;
}

int Client::check_value(std::string_view value, const char *what) {
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
                    "'keys' is the key-tracking queue: use kw_client_track for keys, and another "
                    "name for task queues");
    return KW_OK;
}

namespace {
const char *track_mode(int flags) {
    return (flags & KW_TRACK_NX) ? "NX" : (flags & KW_TRACK_XX) ? "XX" : "";
}
}  // namespace

int Client::track(std::string_view key, std::string_view value, int64_t ttl_ms, int flags,
                  int64_t *deadline) {
    if (int rc = check_key(key); rc != KW_OK) return rc;
    if (int rc = check_value(value, "value"); rc != KW_OK) return rc;
    if (ttl_ms <= 0)
        return fail(KW_ERR_INVALID_ARG,
                    "ttl " + std::to_string(ttl_ms) +
                        "ms is not positive: a tracked key needs a TTL > 0 "
                        "(use kw_client_untrack with delete to remove a key now)");
    if (!duration_within_max(ttl_ms))
        return fail(
            KW_ERR_INVALID_ARG,
            "ttl: " + duration_after_max(std::to_string(ttl_ms) + "ms") + "; nothing was written");
    if ((flags & KW_TRACK_NX) && (flags & KW_TRACK_XX))
        return fail(KW_ERR_INVALID_ARG, "KW_TRACK_NX and KW_TRACK_XX exclude each other");
    // The deadline on the key's server clock: the key gets it as PXAT and the queue as its
    // score, so both agree to the millisecond.
    if (int rc = connect(); rc != KW_OK) return rc;
    const int slot = router_.cluster() ? key_slot(key) : 0;
    int64_t now = 0;
    if (int rc = redis_now(router_.master_for_slot(slot), &now); rc != KW_OK) return rc;
    if (!duration_within_max(ttl_ms, now))
        return fail(KW_ERR_INVALID_ARG,
                    "ttl: " + duration_after_max(std::to_string(ttl_ms) + "ms (Redis clock)") +
                        "; nothing was written");
    // Without NX/XX and snapshot the script takes two arguments (its cheapest form), without
    // a snapshot two KEYS (scripts.h: due, the key, data). In a pipeline the call is built in
    // a kept slot: no allocation once warm.
    const bool plain = (flags & (KW_TRACK_NX | KW_TRACK_XX | KW_TRACK_SNAPSHOT)) == 0;
    const bool snapshot = (flags & KW_TRACK_SNAPSHOT) != 0;
    char at[24];
    const char *at_end = std::to_chars(at, at + sizeof at, now + ttl_ms).ptr;
    Call one;
    Call &c = pipelining_ ? pipeline_slot() : one;
    const QueueKeys &q = keys_queue(slot);
    call_head(c, scripts::kTrack, slot, (snapshot ? 6 : 5) + (plain ? 2 : 4));
    size_t i = 2;
    c.args[i++].assign(snapshot ? "3" : "2");
    c.args[i++].assign(q.due);
    c.args[i++].assign(key);
    if (snapshot) c.args[i++].assign(q.data);
    c.args[i++].assign(value);
    c.args[i++].assign(at, static_cast<size_t>(at_end - at));
    if (!plain) {
        c.args[i++].assign(track_mode(flags));
        c.args[i].assign(snapshot ? "1" : "0");
    }
    // One decoder per mode, each two pointers: held inside the std::function, not allocated.
    if (flags & KW_TRACK_NX)
        c.decode = [this, deadline](const redisReply *r) {
            return track_reply(r, KW_TRACK_NX, deadline);
        };
    else if (flags & KW_TRACK_XX)
        c.decode = [this, deadline](const redisReply *r) {
            return track_reply(r, KW_TRACK_XX, deadline);
        };
    else
        c.decode = [this, deadline](const redisReply *r) { return track_reply(r, 0, deadline); };
    if (pipelining_) {
        send_queued(c);
        return KW_OK;
    }
    return finish(c, exec(c));
}

int Client::track_reply(const redisReply *r, int flags, int64_t *deadline) {
    // The deadline written, as text; a refusal as a negative integer.
    if (r->type == REDIS_REPLY_STRING) {
        int64_t at = 0;
        if (!reply_ms(r, &at)) return fail(KW_ERR_INTERNAL, "track: bad reply");
        if (deadline) *deadline = at;
        return KW_OK;
    }
    // An integer is a refusal: past the maximum, or NX/XX not met (the script returns no
    // other integer).
    if (r->type != REDIS_REPLY_INTEGER || r->integer >= 0)
        return fail(KW_ERR_INTERNAL, "track: bad reply");
    if (r->integer == scripts::kPastMax) return fail_past_max("track");
    return fail(KW_ERR_CONDITION, std::string("track ") + track_mode(flags) + ": the key " +
                                      ((flags & KW_TRACK_NX) ? "exists" : "does not exist") +
                                      "; nothing was written");
}

int Client::untrack(const std::string &key, bool delete_key) {
    if (int rc = check_key(key); rc != KW_OK) return rc;
    return run(scripts::kUntrack, kKeysQueue, key, &key, {delete_key ? "1" : "0"},
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
    // One queue (`keys`), strict: today's refusals, nothing written.
    return run(scripts::kAdopt, kKeysQueue, key, &key,
               {(flags & KW_TRACK_SNAPSHOT) ? "1" : "0", "1", "1"},
               [this, deadline](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "adopt: bad reply");
                   if (r->integer == -2)
                       return fail(KW_ERR_NOT_FOUND, "adopt: no such key; nothing to track");
                   if (r->integer == -1)
                       return fail(KW_ERR_INVALID_ARG,
                                   "adopt: the key has no TTL; give it one (EXPIRE) or use "
                                   "kw_client_track");
                   if (r->integer == scripts::kPastMax)
                       return fail(KW_ERR_INVALID_ARG,
                                   "adopt: the key expires after " KW_MAX_TIME_ISO
                                   ", the latest deadline keywatch accepts; nothing was written");
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
    if (int rc = check_when("schedule", at_ms, delay_ms); rc != KW_OK) return rc;
    return run(scripts::kSchedule, qname, id, nullptr,
               {id, payload, std::to_string(at_ms), std::to_string(delay_ms),
                (flags & KW_SCHEDULE_NX) ? "NX" : ""},
               [this, at_out](const redisReply *r) {
                   if (r->type != REDIS_REPLY_INTEGER)
                       return fail(KW_ERR_INTERNAL, "schedule: bad reply");
                   if (r->integer == scripts::kPastMax) return fail_past_max("schedule");
                   if (r->integer < 0)
                       return fail(KW_ERR_CONDITION,
                                   "schedule NX: a task with this id exists; nothing was written");
                   if (at_out) *at_out = r->integer;
                   return static_cast<int>(KW_OK);
               });
}

int Client::cancel(const std::string &qname, const std::string &id) {
    if (int rc = check_queue(qname); rc != KW_OK) return rc;
    return run(scripts::kCancel, qname, id, nullptr, {id}, [this](const redisReply *r) {
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
    if (int rc = check_when("reschedule", at_ms, delay_ms); rc != KW_OK) return rc;
    return run(
        scripts::kReschedule, qname, id, nullptr,
        {id, std::to_string(at_ms), std::to_string(delay_ms)}, [this, at_out](const redisReply *r) {
            if (r->type != REDIS_REPLY_INTEGER)
                return fail(KW_ERR_INTERNAL, "reschedule: bad reply");
            if (r->integer == scripts::kPastMax) return fail_past_max("reschedule");
            if (r->integer == -2)
                return fail(KW_ERR_IN_FLIGHT, "reschedule: the task is being handled right now");
            if (r->integer == -1) return fail(KW_ERR_NOT_FOUND, "reschedule: no such task");
            if (at_out) *at_out = r->integer;
            return static_cast<int>(KW_OK);
        });
}

namespace {
// How long a measured clock offset is trusted.
constexpr int64_t kClockResyncMs = 1000;
}  // namespace

int Client::sync_clock(const Endpoint &node) {
    int64_t before = steady_ms();
    ReplyPtr r = call(node, {"TIME"});
    int64_t after = steady_ms();
    if (!r) return router_.status();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return fail(KW_ERR_REDIS,
                    "TIME on " + node.str() + " answered " + reply_to_string(r.get()));
    int64_t redis_ms = std::atoll(reply_to_string(r->element[0]).c_str()) * 1000 +
                       std::atoll(reply_to_string(r->element[1]).c_str()) / 1000;
    clocks_[node] = {redis_ms - (before + after) / 2, after};
    return KW_OK;
}

int Client::redis_now(const std::optional<Endpoint> &node, int64_t *now_ms) {
    if (!node) {
        if (int rc = routed(router_.refresh_topology()); rc != KW_OK) return rc;
        return fail(KW_ERR_REDIS, "no master serves this key's slot now (is the cluster down?)");
    }
    auto it = clocks_.find(*node);
    int64_t local = steady_ms();
    if (!pipelining_ && (it == clocks_.end() || local - it->second.synced_at > kClockResyncMs)) {
        if (int rc = sync_clock(*node); rc != KW_OK) return rc;
        it = clocks_.find(*node);
    }
    if (it == clocks_.end()) {
        // A node first met inside a pipeline (cluster): its clock cannot be asked now.
        return fail(KW_ERR_STATE, "no clock offset for " + node->str() +
                                      " inside a pipeline: end the pipeline and retry");
    }
    *now_ms = local + it->second.offset_ms;
    return KW_OK;
}

int Client::pipeline_begin() {
    if (pipelining_) return fail(KW_ERR_STATE, "a pipeline is already open");
    if (int rc = connect(); rc != KW_OK) return rc;
    // Commands are queued from here on: measure the clocks now.
    for (auto &node : router_.masters()) {
        auto it = clocks_.find(node);
        if (it == clocks_.end() || steady_ms() - it->second.synced_at > kClockResyncMs)
            if (int rc = sync_clock(node); rc != KW_OK) return rc;
    }
    pipelining_ = true;
    queued_ = 0;
    return KW_OK;
}

int Client::pipeline_end(std::vector<int> *statuses, std::vector<std::string> *errors) {
    if (!pipelining_)
        return fail(KW_ERR_STATE, "no pipeline is open: call kw_client_pipeline_begin");
    pipelining_ = false;
    const size_t n = queued_;
    queued_ = 0;
    int first = KW_OK;
    std::string first_error;
    statuses->assign(n, KW_OK);
    if (errors) errors->assign(n, std::string());
    auto note = [&](size_t i, int rc) {
        (*statuses)[i] = rc;
        if (rc != KW_OK && errors) (*errors)[i] = error_;
        if (rc != KW_OK && first == KW_OK) {
            first = rc;
            first_error = error_;
        }
    };
    // Every node got its share as it was queued; the connections share one event_base, so
    // waiting for the first reply sends to all masters at once and they work in parallel.
    std::vector<size_t> again;  // redirected, NOSCRIPT or not sent: one by one afterwards
    for (size_t i = 0; i < n; i++) {
        Call &c = pipeline_[i];
        BlockingRedis *conn = c.node ? router_.connection(*c.node) : nullptr;
        if (!conn) {
            again.push_back(i);
            continue;
        }
        ReplyPtr r = conn->receive(router_.options().command_timeout_ms);
        if (!r) {
            note(i, fail(KW_ERR_CONNECT, "lost the connection to " + c.node->str() +
                                             " in a pipeline: " + conn->error()));
            continue;
        }
        const ReplyError kind = classify(r.get());
        if (kind == ReplyError::NoScript || kind == ReplyError::Moved || kind == ReplyError::Ask ||
            kind == ReplyError::TryAgain || kind == ReplyError::ClusterDown ||
            kind == ReplyError::Loading) {
            again.push_back(i);
            continue;
        }
        note(i, finish(c, std::move(r)));
    }
    for (size_t i : again) note(i, finish(pipeline_[i], exec(pipeline_[i])));
    trim_pipeline(n);
    if (first != KW_OK) error_ = first_error;
    return first;
}

std::vector<Client::QueueRef> Client::find_queues(const std::string &part,
                                                  const std::string &only_name,
                                                  std::map<std::string, std::string> *unreachable) {
    std::vector<QueueRef> out;
    std::set<std::string> seen;
    std::string match = queue_key_glob(config_.ns, only_name.empty() ? "*" : only_name, part);
    for (auto &node : router_.masters()) {
        const std::string endpoint = node.str();
        if (unreachable && unreachable->count(endpoint)) continue;
        std::string cursor = "0";
        do {
            ReplyPtr r = call(node, {"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                if (unreachable)
                    (*unreachable)[endpoint] =
                        r ? "SCAN answered " + reply_to_string(r.get()) : std::string(error_);
                break;
            }
            cursor = reply_to_string(r->element[0]);
            for (size_t i = 0; i < r->element[1]->elements; i++) {
                std::string name, tag;
                if (parse_queue_key(config_.ns, reply_to_string(r->element[1]->element[i]), part,
                                    &name, &tag) &&
                    seen.insert(endpoint + "/" + name + "/" + tag).second)
                    out.push_back({node, name, tag});
            }
        } while (cursor != "0");
    }
    return out;
}

const std::vector<Client::QueueRef> &Client::dead_streams(const std::string &queue) {
    constexpr int64_t kDeadStreamsTtl = 5000;
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (dead_streams_.size() >= 64 && !dead_streams_.count(queue)) dead_streams_.clear();
    FoundStreams &found = dead_streams_[queue];
    if (found.refs.empty() || now - found.at_ms > kDeadStreamsTtl) {
        found.refs = find_queues("dead", queue);
        found.at_ms = now;
    }
    return found.refs;
}

Client::Call Client::queue_call(const Script &s, const QueueRef &ref,
                                const std::vector<std::string> &argv) {
    Call c =
        script_call(s, ref.name, ref.tag, router_.cluster() ? key_slot("{" + ref.tag + "}") : 0,
                    nullptr, std::vector<std::string>(argv));
    c.node = ref.node;
    return c;
}

void QueueFigures::add(const QueueFigures &o) {
    due += o.due;
    due_now += o.due_now;
    inflight += o.inflight;
    dead += o.dead;
    oldest_overdue_ms = std::max(oldest_overdue_ms, o.oldest_overdue_ms);
}

int Client::inspect(Inspection *out) {
    if (int rc = connect(); rc != KW_OK) return rc;
    // Every queue instance that holds anything: due or in-flight items, dead letters. A
    // master that cannot be read is named below instead of silently left out.
    std::map<std::string, std::string> unreachable;  // endpoint -> why
    std::map<std::string, QueueRef> found;
    // (`leases`: a batch claimed alone has no in-flight entries.)
    for (const char *part : {"due", "inflight", "leases", "dead"})
        for (auto &ref : find_queues(part, "", &unreachable))
            found.emplace(ref.node.str() + "/" + ref.name + "/" + ref.tag, ref);
    std::vector<QueueRef> refs;
    for (auto &kv : found) refs.push_back(kv.second);
    std::map<std::string, std::map<std::string, QueueFigures>> per_node;
    int64_t now = 0;
    if (int rc = read_figures(refs, &unreachable, &per_node, &now); rc != KW_OK) return rc;
    for (auto &node : router_.masters()) {
        if (now != 0 || unreachable.count(node.str())) continue;
        ReplyPtr t = call(node, {"TIME"});
        if (t && t->type == REDIS_REPLY_ARRAY && t->elements == 2)
            now = std::atoll(reply_to_string(t->element[0]).c_str()) * 1000 +
                  std::atoll(reply_to_string(t->element[1]).c_str()) / 1000;
    }
    Inspection result;
    result.now_ms = now;
    result.cluster = router_.cluster();
    unread_nodes(unreachable, &result);
    // The totals hold what was read in full: nothing of a master that failed half-way.
    std::map<std::string, QueueFigures> per_queue;
    per_queue[kKeysQueue];
    for (auto &q : config_.queues) per_queue[q];
    for (auto &n : router_.masters()) {
        const std::string endpoint = n.str();
        const bool read = unreachable.count(endpoint) == 0;
        NodeFigures node{endpoint, read, {}};
        for (auto &kv : per_node[endpoint]) {
            if (!read) break;
            node.queues.push_back(kv.second);
            node.queues.back().queue = kv.first;
            per_queue[kv.first].add(kv.second);
        }
        result.nodes.push_back(std::move(node));
    }
    for (auto &kv : per_queue) {
        result.queues.push_back(kv.second);
        result.queues.back().queue = kv.first;
    }
    *out = std::move(result);
    return KW_OK;
}

int Client::read_figures(const std::vector<QueueRef> &refs,
                         std::map<std::string, std::string> *unreachable,
                         std::map<std::string, std::map<std::string, QueueFigures>> *per_node,
                         int64_t *now) {
    for (const QueueRef &ref : refs) {
        const std::string endpoint = ref.node.str();
        if (unreachable->count(endpoint)) continue;
        Call c = queue_call(scripts::batch::kInspect, ref, {});
        // inspect's KEYS: the five queue keys, then leases.
        const QueueKeys &keys = queue_keys(ref.name, ref.tag);
        c.args[2] = "6";
        c.args.push_back(keys.leases);
        // Its keys may stay on a node after their slot was deleted (DELSLOTS): no master
        // serves it, nothing can read it, and unread_nodes counts it with the unassigned.
        if (router_.cluster() && !router_.master_for_slot(c.slot)) continue;
        c.no_wait = true;
        ReplyPtr r = exec(c);
        if (!r && router_.status() == KW_ERR_AUTH) return router_.status();
        if (!r) {
            // Refused (CLUSTERDOWN: the cluster is down as this master sees it) or not
            // reached: the master's share is left out and named.
            (*unreachable)[c.node ? c.node->str() : endpoint] = error_;
            continue;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 7 ||
            r->element[6]->type != REDIS_REPLY_ARRAY)
            return fail(KW_ERR_REDIS,
                        "inspect failed on " + endpoint + ": " + reply_to_string(r.get()));
        *now = r->element[0]->integer;
        // In flight: version-1 items, and the items of each live batch (its key's ZCARD).
        int64_t inflight = r->element[5]->integer;
        for (size_t i = 0; i < r->element[6]->elements; i++) {
            const std::string batch =
                keys.batch_of_member(reply_to_string(r->element[6]->element[i]));
            if (batch.empty()) continue;
            Call z = c;
            z.script = nullptr;
            z.args = {"ZCARD", batch};
            ReplyPtr n = exec(z);
            if (!n) {
                (*unreachable)[c.node ? c.node->str() : endpoint] = error_;
                break;
            }
            if (n->type == REDIS_REPLY_INTEGER) inflight += n->integer;
        }
        if (unreachable->count(c.node ? c.node->str() : endpoint)) continue;
        QueueFigures f{ref.name, r->element[1]->integer, r->element[2]->integer,
                       inflight, r->element[3]->integer, r->element[4]->integer};
        (*per_node)[endpoint][ref.name].add(f);
    }
    return KW_OK;
}

void Client::unread_nodes(const std::map<std::string, std::string> &unreachable,
                          Inspection *out) const {
    // What could not be read: masters that did not answer, and (cluster) shards whose
    // master failed with no replica promoted, whose slots no master serves.
    for (auto &kv : unreachable) {
        int64_t slots = 16384;
        if (router_.cluster()) {
            const int idx = router_.topology().find(kv.first);
            slots = 0;
            for (int16_t o : router_.topology().slot_owner) slots += o == idx;
        }
        out->unread_slots += slots;
        out->unreachable.push_back({kv.first, slots, kv.second});
    }
    if (!router_.cluster()) return;
    for (auto &d : router_.topology().down)
        out->unreachable.push_back(
            {d.master.endpoint(), static_cast<int64_t>(d.slots),
             "the cluster marks this master failed and no replica took over"});
    out->unassigned = router_.topology().unassigned();
    out->unread_slots += static_cast<int64_t>(router_.topology().uncovered());
}

namespace {

// One XRANGE entry ([id, [field, value, ...]]) as a DeadLetter.
DeadLetter dead_letter(const redisReply *e, const std::string &slot_tag) {
    DeadLetter d;
    d.entry = reply_to_string(e->element[0]);
    d.slot_tag = slot_tag;
    const redisReply *f = e->element[1];
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
        std::string name = reply_to_string(f->element[j]),
                    value = reply_to_string(f->element[j + 1]);
        if (name == "attempts")
            d.attempts = std::stoll(value);
        else if (name == "deadline")
            d.deadline_ms = std::stoll(value);
        else if (name == "failed_ms")
            d.failed_ms = std::stoll(value);
        else if (name == "id")
            d.id = std::move(value);
        else if (name == "error")
            d.error = std::move(value);
        else if (name == "payload")
            d.has_payload = true, d.payload = std::move(value);
        else
            d.other.emplace_back(std::move(name), std::move(value));
    }
    return d;
}

}  // namespace

namespace {

// Where a dead letter sorts: its entry id, then (a cluster's streams share ids) its slot tag.
struct DeadOrder {
    long long ms = 0, seq = 0;
    std::string tag;
    bool operator<(const DeadOrder &o) const {
        return std::tie(ms, seq, tag) < std::tie(o.ms, o.seq, o.tag);
    }
};

// "<ms>-<seq>" or "<ms>-<seq>@<tag>" (a page's cursor); false for other text.
bool parse_dead_order(const std::string &text, DeadOrder *out) {
    const size_t at = text.find('@'), dash = text.find('-');
    const std::string entry = text.substr(0, at);
    auto digits = [](const std::string &s) {
        return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == s.npos;
    };
    if (dash == std::string::npos || dash > entry.size() || !digits(entry.substr(0, dash)) ||
        !digits(entry.substr(dash + 1)))
        return false;
    out->ms = std::stoll(entry.substr(0, dash));
    out->seq = std::stoll(entry.substr(dash + 1));
    out->tag = at == std::string::npos ? "" : text.substr(at + 1);
    return true;
}

DeadOrder order_of(const DeadLetter &d) {
    DeadOrder o;
    parse_dead_order(d.entry, &o);
    o.tag = d.slot_tag;
    return o;
}

// The streams of qname an entry (a cursor, or "" for all) names, and the bare entry id for
// the scripts; KW_ERR_INVALID_ARG for text that is not a cursor.
struct DeadTarget {
    std::string id;   // "<ms>-<seq>", or "" for every entry
    std::string tag;  // "" for every slot's stream
};
bool dead_target(const std::string &entry, DeadTarget *out) {
    if (entry.empty()) return true;
    DeadOrder o;
    if (!parse_dead_order(entry, &o)) return false;
    out->id = std::to_string(o.ms) + "-" + std::to_string(o.seq);
    out->tag = o.tag;
    return true;
}

std::string bad_entry(const std::string &entry) {
    return "'" + entry +
           "' is not a dead letter's entry: <ms>-<seq>, on a cluster followed by @<slot tag> "
           "(its cursor in the list)";
}

}  // namespace

std::string dead_letter_cursor(const DeadLetter &d) {
    return d.slot_tag.empty() ? d.entry : d.entry + "@" + d.slot_tag;
}

int Client::dead_list(const std::string &qname, size_t limit, std::vector<DeadLetter> *out,
                      const std::string &after) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    DeadOrder from;
    if (!after.empty() && !parse_dead_order(after, &from))
        return fail(KW_ERR_INVALID_ARG, "'" + after +
                                            "' is not a page's cursor: <ms>-<seq>, on a cluster "
                                            "followed by @<slot tag>");
    if (int rc = connect(); rc != KW_OK) return rc;
    limit = std::max<size_t>(limit, 1);
    // From the cursor's id on (inclusive: another slot's stream may hold the same id).
    const std::string start =
        after.empty() ? "-" : std::to_string(from.ms) + "-" + std::to_string(from.seq);
    std::vector<DeadLetter> entries;
    const std::vector<QueueRef> refs = dead_streams(qname);  // a copy: a failure drops them
    for (auto &ref : refs) {
        ReplyPtr r = call(ref.node, {"XRANGE", QueueKeys::make(config_.ns, qname, ref.tag).dead,
                                     start, "+", "COUNT", std::to_string(limit + 1)});
        if (!r || r->type != REDIS_REPLY_ARRAY) dead_streams_.erase(qname);  // found again next
        if (!r) return router_.status();
        if (r->type != REDIS_REPLY_ARRAY)
            return fail(KW_ERR_REDIS, "XRANGE failed: " + reply_to_string(r.get()));
        for (size_t i = 0; i < r->elements; i++) {
            DeadLetter d = dead_letter(r->element[i], router_.cluster() ? ref.tag : std::string());
            if (after.empty() || from < order_of(d)) entries.push_back(std::move(d));
        }
    }
    // Oldest first across every slot's stream.
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto &a, const auto &b) { return order_of(a) < order_of(b); });
    if (entries.size() > limit) entries.resize(limit);
    *out = std::move(entries);
    return KW_OK;
}

int Client::dead_replay(const std::string &qname, const std::string &entry, size_t limit,
                        int64_t *count) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    DeadTarget target;
    if (!dead_target(entry, &target)) return fail(KW_ERR_INVALID_ARG, bad_entry(entry));
    if (int rc = connect(); rc != KW_OK) return rc;
    auto refs = find_queues("dead", qname);
    if (refs.empty())
        return fail(KW_ERR_NOT_FOUND, "queue '" + qname +
                                          "' has no dead letters (unknown queue, or none yet): "
                                          "see keywatch inspect");
    int64_t total = 0;
    size_t left = std::max<size_t>(limit, 1);
    for (auto &ref : refs) {
        if (entry.empty() && left == 0) break;
        if (!target.tag.empty() && ref.tag != target.tag) continue;
        Call c = queue_call(scripts::kReplay, ref,
                            {target.id, std::to_string(left), qname == kKeysQueue ? "1" : "0"});
        ReplyPtr r = exec(c);
        if (!r) return router_.status();
        if (r->type != REDIS_REPLY_INTEGER)
            return fail(KW_ERR_REDIS, "replay failed: " + reply_to_string(r.get()));
        if (r->integer < 0) continue;  // not in this slot's stream
        total += r->integer;
        left -= std::min<size_t>(left, static_cast<size_t>(r->integer));
        if (!entry.empty()) break;
    }
    if (!entry.empty() && total == 0) return fail(KW_ERR_NOT_FOUND, "no dead letter " + entry);
    if (count) *count = total;
    return KW_OK;
}

int Client::dead_purge(const std::string &qname, const std::string &entry, int64_t *count) {
    std::string err;
    if (!valid_queue_name(qname, &err)) return fail(KW_ERR_INVALID_ARG, err);
    DeadTarget target;
    if (!dead_target(entry, &target)) return fail(KW_ERR_INVALID_ARG, bad_entry(entry));
    if (int rc = connect(); rc != KW_OK) return rc;
    int64_t total = 0;
    for (auto &ref : find_queues("dead", qname)) {
        if (!target.tag.empty() && ref.tag != target.tag) continue;
        Call c = queue_call(scripts::kPurge, ref, {target.id});
        ReplyPtr r = exec(c);
        if (!r) return router_.status();
        if (r->type != REDIS_REPLY_INTEGER)
            return fail(KW_ERR_REDIS, "purge failed: " + reply_to_string(r.get()));
        total += r->integer;
    }
    if (!entry.empty() && total == 0) return fail(KW_ERR_NOT_FOUND, "no dead letter " + entry);
    if (count) *count = total;
    return KW_OK;
}

}  // namespace keywatch
