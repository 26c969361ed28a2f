#include "core/plugins/plugin_host.h"

#include "core/engine/hold.h"

#include <cstdlib>
#include <cstring>

#include "core/base/c_out.h"
#include "core/format/json_line.h"

namespace keywatch {
namespace {

// ---- reply trees: one malloc block, the hiredis reply's pointer in front of the nodes ----
constexpr size_t kReplyHeader = sizeof(kw_reply_t);  // keeps the nodes aligned

size_t count_nodes(const redisReply *r) {
    size_t n = 1;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++) n += count_nodes(r->element[i]);
    return n;
}

int type_of(const redisReply *r) {
    switch (r->type) {
        case REDIS_REPLY_STRING:
            return KW_REPLY_STRING;
        case REDIS_REPLY_INTEGER:
            return KW_REPLY_INTEGER;
        case REDIS_REPLY_ARRAY:
            return KW_REPLY_ARRAY;
        case REDIS_REPLY_STATUS:
            return KW_REPLY_STATUS;
        case REDIS_REPLY_ERROR:
            return KW_REPLY_ERROR;
        default:
            return KW_REPLY_NIL;
    }
}

// Fills node from r; an array's children go to the next free nodes, contiguous.
void fill(kw_reply_t *nodes, size_t at, size_t *next, const redisReply *r) {
    kw_reply_t &n = nodes[at];
    n = kw_reply_t();
    n.type = type_of(r);
    if (n.type == KW_REPLY_INTEGER) n.integer = r->integer;
    if (n.type == KW_REPLY_STRING || n.type == KW_REPLY_STATUS || n.type == KW_REPLY_ERROR) {
        n.str = r->str;
        n.len = r->len;
    }
    if (n.type != KW_REPLY_ARRAY) return;
    size_t first = *next;
    *next += r->elements;
    n.elements = r->elements;
    n.element = nodes + first;
    for (size_t i = 0; i < r->elements; i++) fill(nodes, first + i, next, r->element[i]);
}

kw_reply_t *make_tree(ReplyPtr raw) {
    size_t n = count_nodes(raw.get());
    char *block = static_cast<char *>(malloc(kReplyHeader + n * sizeof(kw_reply_t)));
    if (!block) return nullptr;
    auto *nodes = reinterpret_cast<kw_reply_t *>(block + kReplyHeader);
    size_t next = 1;
    fill(nodes, 0, &next, raw.get());
    redisReply *owned = raw.release();
    memcpy(block, &owned, sizeof owned);
    return nodes;
}

void reply_free(kw_reply_t *reply) {
    if (!reply) return;
    char *block = reinterpret_cast<char *>(reply) - kReplyHeader;
    redisReply *owned;
    memcpy(&owned, block, sizeof owned);
    freeReplyObject(owned);
    free(block);
}

// ---- host functions ----
void host_log(const kw_plugin_host_t *host, int level, const char *message) {
    try {
        PluginContext::of(host).log(static_cast<kw_log_level>(level), message ? message : "");
    } catch (...) {
    }
}

const char *config_get(const kw_plugin_config_t *config, const char *name) {
    if (!config || !name) return nullptr;
    auto *c = const_cast<kw_plugin_config_t *>(config);
    try {
        if (c->in_init) c->asked.insert(name);  // init: the loading thread only
    } catch (...) {
    }
    for (const auto &nv : c->options)
        if (nv.first == name) return nv.second.c_str();
    return nullptr;
}

void counter_add(const kw_plugin_host_t *host, const char *name, int64_t delta) {
    if (!name) return;
    try {
        PluginContext::of(host).add(name, delta);
    } catch (...) {
    }
}

// A command's arguments as the client takes them (argvlen NULL: C strings).
std::vector<std::string> arg_strings(int argc, const char *const *argv, const size_t *argvlen) {
    std::vector<std::string> args;
    args.reserve(static_cast<size_t>(argc));
    for (int i = 0; i < argc; i++)
        args.emplace_back(argv[i], argvlen ? argvlen[i] : strlen(argv[i]));
    return args;
}

int host_redis(const kw_plugin_host_t *host, int argc, const char *const *argv,
               const size_t *argvlen, kw_reply_t **reply, char *err, size_t err_size) {
    if (reply) *reply = nullptr;
    if (!host || argc <= 0 || !argv || !reply) {
        write_err(err, err_size, "redis: argc must be > 0 and argv and reply not NULL");
        return KW_ERR_INVALID_ARG;
    }
    try {
        std::vector<std::string> args = arg_strings(argc, argv, argvlen);
        ReplyPtr raw;
        std::string msg;
        int rc = PluginContext::of(host).redis().command(std::move(args), &raw, &msg);
        if (rc != KW_OK) {
            write_err(err, err_size, msg);
            return rc;
        }
        *reply = make_tree(std::move(raw));
        if (!*reply) {
            write_err(err, err_size, "out of memory");
            return KW_ERR_NOMEM;
        }
        return KW_OK;
    } catch (const std::bad_alloc &) {
        write_err(err, err_size, "out of memory");
        return KW_ERR_NOMEM;
    } catch (const std::exception &e) {
        write_err(err, err_size, e.what());
        return KW_ERR_INTERNAL;
    }
}

// Commands per redis_pipeline call: bounds the replies held at once.
constexpr size_t kMaxPipeline = 65536;

// The commands as the pool takes them; an invalid one gets KW_ERR_INVALID_ARG and is left
// out (at: the index of each one kept).
std::vector<std::vector<std::string>> pipeline_args(size_t n, const kw_redis_command_t *commands,
                                                    int *statuses, std::vector<size_t> *at) {
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(n);
    for (size_t i = 0; i < n; i++) {
        const kw_redis_command_t &c = commands[i];
        bool ok = c.argc > 0 && c.argv;
        for (int j = 0; ok && j < c.argc; j++) ok = c.argv[j] != nullptr;
        if (!ok) {
            statuses[i] = KW_ERR_INVALID_ARG;
            continue;
        }
        cmds.push_back(arg_strings(c.argc, c.argv, c.argvlen));
        at->push_back(i);
    }
    return cmds;
}

int host_redis_pipeline(const kw_plugin_host_t *host, size_t n, const kw_redis_command_t *commands,
                        kw_reply_t **replies, int *statuses, char *err, size_t err_size) {
    if (!host || n > kMaxPipeline || (n > 0 && (!commands || !replies || !statuses))) {
        write_err(err, err_size,
                  "redis_pipeline: n must be at most " + std::to_string(kMaxPipeline) +
                      " and commands, replies and statuses not NULL");
        return KW_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        replies[i] = nullptr;
        statuses[i] = KW_OK;
    }
    try {
        std::vector<size_t> at;
        auto cmds = pipeline_args(n, commands, statuses, &at);
        std::vector<ClusterRouter::Outcome> outcomes;
        if (!cmds.empty()) PluginContext::of(host).redis().commands(std::move(cmds), &outcomes);
        std::vector<std::string> why(n);
        for (size_t j = 0; j < at.size(); j++) {
            const size_t i = at[j];
            ClusterRouter::Outcome &o = outcomes[j];
            if (o.reply) {
                replies[i] = make_tree(std::move(o.reply));
                if (!replies[i]) statuses[i] = KW_ERR_NOMEM;
            } else {
                statuses[i] = o.status != KW_OK ? o.status : KW_ERR_INTERNAL;
                why[i] = o.error;
            }
        }
        size_t failed = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (statuses[i] != KW_OK && failed++ == 0) first = i;
        if (failed == 0) return KW_OK;
        const std::string what = statuses[first] == KW_ERR_INVALID_ARG
                                     ? "argc <= 0 or a NULL argument"
                                 : statuses[first] == KW_ERR_NOMEM ? "out of memory"
                                                                   : why[first];
        write_err(err, err_size,
                  "redis_pipeline: " + std::to_string(failed) + " of " + std::to_string(n) +
                      " commands failed; command " + std::to_string(first) + ": " + what);
        return statuses[first];
    } catch (const std::bad_alloc &) {
        write_err(err, err_size, "out of memory");
    } catch (const std::exception &e) {
        write_err(err, err_size, e.what());
    }
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) reply_free(replies[i]);
        replies[i] = nullptr;
        statuses[i] = KW_ERR_INTERNAL;
    }
    return KW_ERR_INTERNAL;
}

int host_set_max_in_flight(const kw_plugin_host_t *host, uint32_t n) {
    if (!host) return KW_ERR_INVALID_ARG;
    PluginContext &c = PluginContext::of(host);
    if (!c.config().in_init) return KW_ERR_STATE;  // init runs on this (the loading) thread
    c.set_max_in_flight(n);
    return KW_OK;
}

void event_set_error(const kw_plugin_event_t *ev, const char *reason) {
    if (!ev) return;
    try {
        const_cast<kw_plugin_event_t *>(ev)->reason = reason ? reason : "";  // the worker's own
    } catch (...) {
    }
}

const Event &E(const kw_plugin_event_t *ev) {
    return *ev->ev;
}

const char *event_name(const kw_plugin_event_t *ev) {
    return ev ? E(ev).name.c_str() : "";
}
const void *event_key(const kw_plugin_event_t *ev, size_t *len) {
    if (len) *len = ev ? E(ev).key.size() : 0;
    return ev ? E(ev).key.data() : nullptr;
}
const void *event_value(const kw_plugin_event_t *ev, size_t *len) {
    bool has = ev && E(ev).has_value;
    if (len) *len = has ? E(ev).value.size() : 0;
    return has ? E(ev).value.data() : nullptr;
}
const char *event_id_of(const kw_plugin_event_t *ev) {
    try {
        return ev ? keywatch::event_id(E(ev)).c_str() : "";
    } catch (...) {
        return "";
    }
}
const char *event_queue(const kw_plugin_event_t *ev) {
    return ev ? E(ev).queue.c_str() : "";
}
int64_t event_deadline_ms(const kw_plugin_event_t *ev) {
    return ev ? E(ev).deadline_ms : 0;
}
int64_t event_ts_ms(const kw_plugin_event_t *ev) {
    return ev ? E(ev).ts_ms : 0;
}
int event_attempt(const kw_plugin_event_t *ev) {
    return ev ? E(ev).attempt : 0;
}
int event_db(const kw_plugin_event_t *ev) {
    return ev ? E(ev).db : -1;
}
int event_source(const kw_plugin_event_t *ev) {
    return ev ? E(ev).source : KW_SOURCE_NOTIFICATION;
}

// The `keywatch watch` line (core/format/json_line.h), built once per event.
void build_json(kw_plugin_event_t *pe) {
    if (pe->json_built) return;
    pe->json = keywatch::event_json(*pe->ev);
    pe->json_built = true;
}

// The line's fields, same names and encoding, built once per event.
void build_fields(kw_plugin_event_t *pe) {
    if (pe->fields_built) return;
    pe->fields = event_fields(event_record(*pe->ev));
    pe->fields_built = true;
}

const char *event_json(const kw_plugin_event_t *ev, size_t *len) {
    if (len) *len = 0;
    if (!ev) return nullptr;
    try {
        auto *pe = const_cast<kw_plugin_event_t *>(ev);  // the worker's own wrapper
        build_json(pe);
        if (len) *len = pe->json.size();
        return pe->json.c_str();
    } catch (...) {
        return nullptr;
    }
}

int event_field(const kw_plugin_event_t *ev, size_t index, const char **name, const char **value,
                size_t *value_len) {
    if (!ev) return KW_ERR_INVALID_ARG;
    try {
        auto *pe = const_cast<kw_plugin_event_t *>(ev);
        build_fields(pe);
        if (index >= pe->fields.size()) return KW_ERR_NOT_FOUND;
        const auto &f = pe->fields[index];
        if (name) *name = f.first.c_str();
        if (value) *value = f.second.data();
        if (value_len) *value_len = f.second.size();
        return KW_OK;
    } catch (...) {
        return KW_ERR_NOMEM;
    }
}

kw_plugin_hold_t *host_hold(const kw_plugin_event_t *ev) {
    if (!ev) return nullptr;
    try {
        auto held = hold(*ev->ev);
        if (!held) return nullptr;
        const_cast<kw_plugin_event_t *>(ev)->held = true;
        return new kw_plugin_hold_t{std::move(held), ev->instance ? *ev->instance : ""};
    } catch (...) {
        return nullptr;
    }
}

int host_complete(kw_plugin_hold_t *hold, int result, const char *reason, int64_t delay_ms) {
    if (!hold) return KW_ERR_INVALID_ARG;
    int rc;
    try {
        // Like handle()'s err: "<instance>: <reason>" (no reason: none).
        std::string why = reason && *reason ? reason : "";
        if (!why.empty() && !hold->instance.empty()) why = hold->instance + ": " + why;
        rc = hold->held->complete(result, std::move(why), delay_ms);
    } catch (...) {
        rc = KW_ERR_INTERNAL;
    }
    delete hold;
    return rc;
}

}  // namespace

std::unique_ptr<Client> RedisPool::take() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!idle_.empty()) {
            std::unique_ptr<Client> client = std::move(idle_.back());
            idle_.pop_back();
            return client;
        }
    }
    return std::make_unique<Client>(config_);
}

void RedisPool::give_back(std::unique_ptr<Client> client) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(client));
}

int RedisPool::command(std::vector<std::string> args, ReplyPtr *reply, std::string *err) {
    std::unique_ptr<Client> client = take();
    int rc = client->command(std::move(args), reply);
    if (rc != KW_OK) *err = client->last_error();
    give_back(std::move(client));
    return rc;
}

void RedisPool::commands(std::vector<std::vector<std::string>> &&cmds,
                         std::vector<ClusterRouter::Outcome> *out) {
    std::unique_ptr<Client> client = take();
    client->commands(std::move(cmds), out);
    give_back(std::move(client));
}

PluginContext::PluginContext(std::string instance, LogSink log, std::shared_ptr<RedisPool> redis)
    : instance_(std::move(instance)), log_(std::move(log)), redis_(std::move(redis)) {
    kw_plugin_host_t &t = host_.table;
    t = kw_plugin_host_t();
    t.size = sizeof(kw_plugin_host_t);
    t.abi_version = KW_PLUGIN_ABI_VERSION;
    t.keywatch_version = KW_VERSION_STRING;
    t.instance = instance_.c_str();
    t.log = &host_log;
    t.config_get = &config_get;
    t.counter_add = &keywatch::counter_add;
    t.redis = &host_redis;
    t.reply_free = &keywatch::reply_free;
    t.event_name = &event_name;
    t.event_key = &event_key;
    t.event_value = &event_value;
    t.event_id = &event_id_of;
    t.event_queue = &event_queue;
    t.event_deadline_ms = &event_deadline_ms;
    t.event_ts_ms = &event_ts_ms;
    t.event_attempt = &event_attempt;
    t.event_db = &event_db;
    t.event_source = &event_source;
    t.event_json = &event_json;
    t.event_field = &event_field;
    t.hold = &host_hold;
    t.complete = &host_complete;
    t.event_set_error = &event_set_error;
    t.redis_pipeline = &host_redis_pipeline;
    t.set_max_in_flight = &host_set_max_in_flight;
    host_.context = this;
}

PluginContext &PluginContext::of(const kw_plugin_host_t *host) {
    return *reinterpret_cast<const HostTable *>(host)->context;
}

namespace {
thread_local const Event *current_event = nullptr;
}  // namespace

CurrentEvent::CurrentEvent(const Event &ev) : previous_(current_event) {
    current_event = &ev;
}

CurrentEvent::~CurrentEvent() {
    current_event = previous_;
}

const Event *CurrentEvent::get() {
    return current_event;
}

void PluginContext::log(kw_log_level level, const std::string &message) const {
    if (!log_) return;
    LogFields fields = {{"handler", instance_}};
    if (const Event *ev = CurrentEvent::get()) fields.emplace_back("event_id", event_id(*ev));
    log_(level, "plugin " + instance_ + ": " + message, fields);
}

void PluginContext::add(const std::string &name, int64_t delta) {
    std::lock_guard<std::mutex> lock(mu_);
    counters_[name] += delta;
}

int PluginContext::counter(const std::string &name, int64_t *value) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counters_.find(name);
    *value = it == counters_.end() ? 0 : it->second;
    return KW_OK;
}

std::map<std::string, int64_t> PluginContext::counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
}

}  // namespace keywatch
