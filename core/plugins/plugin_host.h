// Plugin host: keywatch's side of the plugin ABI. One PluginContext per plugin instance
// holds its name, counters, log sink and access to Redis, and the host table
// (kw_plugin_host_t) that the plugin calls back through. PluginEvent is what a plugin sees
// as kw_plugin_event_t during one handle() or handle_batch() call. RedisPool runs the host's
// "command routed by key" on a small pool of blocking Clients (core/client/client.h), one per
// concurrent caller. Thread-safety: PluginContext and RedisPool are thread-safe; a PluginEvent
// belongs to the worker handling it; PluginConfig is used by init on the loading thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/client/client.h"
#include "core/config/config.h"
#include "core/base/event.h"
#include "core/base/log_fields.h"
#include "keywatch_plugin.h"

struct kw_plugin_config {
    std::vector<std::pair<std::string, std::string>> options;
    std::set<std::string> asked;  // names init asked for
    bool in_init = true;          // after init: read-only, from any thread
};

struct kw_plugin_event {
    explicit kw_plugin_event(keywatch::Event &e) : ev(&e) {}
    keywatch::Event *ev;
    // Each built on first request (a plugin that reads the fields never pays for the
    // line), kept for the call.
    bool json_built = false, fields_built = false;
    bool held = false;                      // host->hold took the event over
    const std::string *instance = nullptr;  // the handling instance's name (reasons' prefix)
    std::string reason;                     // host->event_set_error's, for RETRY or REJECT
    std::string json;
    std::vector<std::pair<std::string, std::string>> fields;
};

namespace keywatch {
class Hold;
}
struct kw_plugin_hold {
    std::shared_ptr<keywatch::Hold> held;  // core/engine/hold.h: deferred completion
    std::string instance;                  // prefixes the reason, as for handle()'s err
};

namespace keywatch {

using PluginConfig = kw_plugin_config;
using PluginEvent = kw_plugin_event;
using LogSink = LogFn;

// The event a plugin's handle() is working on, on this thread, for the event_id field of
// the lines it logs meanwhile: set by PluginHandler::handle for the call's duration.
class CurrentEvent {
  public:
    explicit CurrentEvent(const Event &ev);
    ~CurrentEvent();
    CurrentEvent(const CurrentEvent &) = delete;
    CurrentEvent &operator=(const CurrentEvent &) = delete;
    static const Event *get();  // null outside a handle() call on this thread

  private:
    const Event *previous_;
};

class RedisPool {
  public:
    explicit RedisPool(Config config) : config_(std::move(config)) {}
    // Client::command on a client of the pool. KW_OK with *reply, or a status and *err.
    int command(std::vector<std::string> args, ReplyPtr *reply, std::string *err);
    // Client::commands on a client of the pool (one outcome per command).
    void commands(std::vector<std::vector<std::string>> &&cmds,
                  std::vector<ClusterRouter::Outcome> *out);

  private:
    std::unique_ptr<Client> take();
    void give_back(std::unique_ptr<Client> client);

    Config config_;
    std::mutex mu_;
    std::vector<std::unique_ptr<Client>> idle_;
};

class PluginContext {
  public:
    PluginContext(std::string instance, LogSink log, std::shared_ptr<RedisPool> redis);
    PluginContext(const PluginContext &) = delete;
    PluginContext &operator=(const PluginContext &) = delete;

    const kw_plugin_host_t *table() const { return &host_.table; }
    const std::string &instance() const { return instance_; }
    // A line prefixed "plugin <instance>: ", with the fields handler (the instance) and,
    // inside handle(), event_id.
    void log(kw_log_level level, const std::string &message) const;
    void add(const std::string &counter, int64_t delta);
    // The counter's value (0 when the plugin never counted it).
    int counter(const std::string &counter, int64_t *value) const;
    std::map<std::string, int64_t> counters() const;
    RedisPool &redis() { return *redis_; }
    // The instance's options: given to init, kept (so the values stay valid) until close.
    PluginConfig &config() { return config_; }
    // set_max_in_flight's limit (0: none). Set in init only, read after it.
    uint32_t max_in_flight() const { return max_in_flight_; }
    void set_max_in_flight(uint32_t n) { max_in_flight_ = n; }

    static PluginContext &of(const kw_plugin_host_t *host);
    // Tests only: the table says it is this size, as an older keywatch's would (its
    // members past it are then never used).
    void emulate_table_size(uint32_t size) { host_.table.size = size; }

  private:
    // Standard layout: the table first, so the host pointer leads back to the context.
    struct HostTable {
        kw_plugin_host_t table;
        PluginContext *context;
    };
    std::string instance_;
    LogSink log_;
    std::shared_ptr<RedisPool> redis_;
    mutable std::mutex mu_;
    std::map<std::string, int64_t> counters_;
    PluginConfig config_;
    uint32_t max_in_flight_ = 0;
    HostTable host_;
};

}  // namespace keywatch
