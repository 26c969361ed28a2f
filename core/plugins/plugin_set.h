// Plugin instances in an engine. PluginHandler is the Handler (core/engine/handler.h) adapter
// around one initialised instance of a loaded plugin; PluginSet loads instances for one
// engine (kw_engine_add_plugin), refuses bad ones precisely without changing the engine,
// and answers the "plugin.<instance>.<counter>" statistics (by name, and as the samples of
// the row plugin.<counter> in the engine's snapshots).
// Lifetime: a PluginHandler closes its instance and releases the library (dlclose when no
// other instance uses it) in its destructor, which the engine runs after its workers
// stopped: a plugin is never unloaded while a worker may call it.
// Thread-safety: PluginHandler::handle and handle_batch from workers (serialised for
// KW_PLUGIN_SERIAL); PluginSet::add by the engine's owner before start; PluginSet::stat and
// append_stats from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/filter.h"
#include "core/engine/handler.h"
#include "core/plugins/plugin_host.h"
#include "core/plugins/plugin_loader.h"

namespace keywatch {

// The names an instance may have (they name its statistics and log lines), and the rule in
// words for messages.
bool valid_instance_name(const std::string &name);
inline constexpr const char *kInstanceNameRule = "1 to 64 letters, digits, '_' or '-'";

class PluginHandler : public Handler {
  public:
    PluginHandler(std::shared_ptr<PluginLibrary> library, std::shared_ptr<PluginContext> context,
                  void *state);
    ~PluginHandler() override;
    int handle(Event &ev) override;
    // The plugin's handle_batch: only when batches(), that is when the plugin's descriptor
    // covers it and sets it and the host table has redis_pipeline.
    void handle_batch(Event *const *events, size_t n, int *results) override;
    const std::string &name() const override { return context_->instance(); }
    bool serial() const override { return serial_; }
    bool batches() const override { return batch_; }
    uint32_t max_in_flight() const override { return context_->max_in_flight(); }

  private:
    // The plugin's result for one event as the engine takes it (the reason, from
    // event_set_error, else err, into the event's error; invalid results rejected).
    // status: handle_batch's return (KW_OK for handle): an event left at
    // KW_PLUGIN_NO_RESULT is retried with err when the batch failed as a whole.
    int settle(PluginEvent &pe, int rc, const char *err, int status, bool batch) const;

    std::shared_ptr<PluginLibrary> library_;  // released last
    std::shared_ptr<PluginContext> context_;
    const kw_plugin_descriptor_t *d_;
    void *state_;
    bool serial_;
    bool batch_;            // handle_batch is called
    std::mutex serial_mu_;  // KW_PLUGIN_SERIAL: one handle or handle_batch call at a time
};

struct PluginSpec {
    std::string plugin;    // a path (with '/') or a name on the search path
    std::string instance;  // "" : the plugin's own name
    Filter filter;
    std::vector<std::pair<std::string, std::string>> options;
};

class PluginSet {
  public:
    PluginSet(Config config, LogSink log);
    // Loads spec.plugin, runs its init with the options and adds the instance to engine.
    // On any refusal the engine is left as it was; *err says why and what to do.
    int add(Engine &engine, const PluginSpec &spec, std::string *err);
    // "plugin.<instance>.<counter>": KW_OK with *value; KW_ERR_INVALID_ARG for any other
    // name or an unknown instance.
    int stat(const std::string &name, int64_t *value) const;
    // One sample of the row plugin.<counter> per counter an instance added to, labelled
    // "<instance>.<counter>", by instance and counter name (an engine's StatSource).
    void append_stats(std::vector<StatSample> *out) const;
    // Tests only (never reachable from the public API): the host tables of the instances
    // added from now on end at `size` bytes, as an older keywatch's (0: today's size).
    void emulate_host_table_size(uint32_t size) { host_table_size_ = size; }

  private:
    int init(const PluginSpec &spec, const std::shared_ptr<PluginLibrary> &lib,
             const std::string &instance, std::shared_ptr<PluginContext> *context, void **state,
             std::string *err);

    std::shared_ptr<RedisPool> redis_;
    LogSink log_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<PluginContext>> instances_;
    std::map<std::string, std::string> paths_;  // instance -> plugin file
    uint32_t host_table_size_ = 0;              // emulate_host_table_size
};

}  // namespace keywatch
