#include "core/plugins/plugin_set.h"

#include <set>

namespace keywatch {

bool valid_instance_name(const std::string &name) {
    if (name.empty() || name.size() > 64) return false;
    for (unsigned char c : name)
        if (!isalnum(c) && c != '_' && c != '-') return false;
    return true;
}

namespace {

std::string describe(const kw_plugin_descriptor_t *d, const std::string &instance,
                     const std::string &path) {
    return "plugin instance \"" + instance + "\" (" + d->name + " " +
           (d->version ? d->version : "?") + ", " + path + ")";
}

std::string joined(const std::set<std::string> &names) {
    std::string out;
    for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "none" : out;
}

}  // namespace

PluginHandler::PluginHandler(std::shared_ptr<PluginLibrary> library,
                             std::shared_ptr<PluginContext> context, void *state)
    : library_(std::move(library)),
      context_(std::move(context)),
      d_(library_->descriptor()),
      state_(state),
      serial_((d_->flags & KW_PLUGIN_SERIAL) != 0),
      // Never read past the plugin's descriptor: one built before handle_batch is shorter.
      batch_(KW_PLUGIN_HAS(d_->size, kw_plugin_descriptor_t, handle_batch) && d_->handle_batch &&
             KW_PLUGIN_HAS(context_->table()->size, kw_plugin_host_t, redis_pipeline)) {}

PluginHandler::~PluginHandler() {
    if (d_->close) d_->close(state_);
}

int PluginHandler::handle(Event &ev) {
    PluginEvent pe(ev);
    pe.instance = &name();
    char err[1024];
    err[0] = '\0';  // not the whole buffer: this runs once per event
    std::unique_lock<std::mutex> lock(serial_mu_, std::defer_lock);
    if (serial_) lock.lock();
    int rc;
    {
        CurrentEvent current(ev);  // the event_id of the lines the plugin logs meanwhile
        rc = d_->handle(state_, &pe, err, sizeof err);
    }
    if (lock.owns_lock()) lock.unlock();
    return settle(pe, rc, err, KW_OK, false);
}

void PluginHandler::handle_batch(Event *const *events, size_t n, int *results) {
    std::vector<PluginEvent> pes;
    pes.reserve(n);  // never moved: the plugin holds pointers to them during the call
    std::vector<const kw_plugin_event_t *> ptrs(n);
    for (size_t i = 0; i < n; i++) {
        pes.emplace_back(*events[i]);
        pes[i].instance = &name();
        ptrs[i] = &pes[i];
        results[i] = KW_PLUGIN_NO_RESULT;
    }
    char err[1024];
    err[0] = '\0';
    std::unique_lock<std::mutex> lock(serial_mu_, std::defer_lock);
    if (serial_) lock.lock();
    int status = d_->handle_batch(state_, ptrs.data(), n, results, err, sizeof err);
    if (lock.owns_lock()) lock.unlock();
    for (size_t i = 0; i < n; i++) results[i] = settle(pes[i], results[i], err, status, true);
}

int PluginHandler::settle(PluginEvent &pe, int rc, const char *err, int status, bool batch) const {
    Event &ev = *pe.ev;
    const std::string &why = pe.reason.empty() ? std::string(err) : pe.reason;
    // Only handle_batch's slots start at KW_PLUGIN_NO_RESULT; from handle, -1 is what it
    // always was, a value that is not a kw_result.
    if (batch && rc == KW_PLUGIN_NO_RESULT) {
        if (status != KW_OK)
            ev.error = name() + ": " +
                       (why.empty() ? "handle_batch failed (" + std::to_string(status) + ")" : why);
        else
            ev.error = name() + ": handle_batch gave this event no result (retried)";
        return KW_RESULT_RETRY;
    }
    if (rc == KW_RESULT_PENDING && !pe.held) {
        ev.error = name() +
                   ": returned KW_RESULT_PENDING without taking the event with "
                   "host->hold (retried)";
        return KW_RESULT_RETRY;
    }
    if (rc != KW_RESULT_ACK && rc != KW_RESULT_RETRY && rc != KW_RESULT_REJECT &&
        rc != KW_RESULT_PENDING) {
        ev.error = name() + ": returned " + std::to_string(rc) + ", not a kw_result (rejected)";
        return KW_RESULT_REJECT;
    }
    if (rc != KW_RESULT_ACK && rc != KW_RESULT_PENDING && !why.empty())
        ev.error = name() + ": " + why;
    return rc;
}

PluginSet::PluginSet(Config config, LogSink log)
    : redis_(std::make_shared<RedisPool>(std::move(config))), log_(std::move(log)) {}

int PluginSet::init(const PluginSpec &spec, const std::shared_ptr<PluginLibrary> &lib,
                    const std::string &instance, std::shared_ptr<PluginContext> *context,
                    void **state, std::string *err) {
    const kw_plugin_descriptor_t *d = lib->descriptor();
    const std::string who = describe(d, instance, lib->path());
    auto ctx = std::make_shared<PluginContext>(instance, log_, redis_);
    if (host_table_size_) ctx->emulate_table_size(host_table_size_);
    PluginConfig &config = ctx->config();
    std::set<std::string> given;
    for (const auto &nv : spec.options) {
        if (!given.insert(nv.first).second) {
            *err = who + ": option \"" + nv.first + "\" is given twice: give it once";
            return KW_ERR_BAD_VALUE;
        }
        config.options.push_back(nv);
    }
    *state = nullptr;
    if (d->init) {
        char msg[1024] = "";
        int rc = d->init(ctx->table(), &config, state, msg, sizeof msg);
        if (rc != KW_OK) {
            *err = who + ": init failed: " + (msg[0] ? msg : "(the plugin gave no reason)");
            return rc < 0 ? rc : KW_ERR_BAD_VALUE;
        }
    }
    config.in_init = false;
    for (const auto &nv : spec.options) {
        if (config.asked.count(nv.first)) continue;
        if (d->close) d->close(*state);
        *err = who + ": unknown option \"" + nv.first +
               "\" (the options it reads: " + joined(config.asked) +
               "): remove it or correct its name";
        return KW_ERR_INVALID_ARG;
    }
    *context = std::move(ctx);
    return KW_OK;
}

int PluginSet::add(Engine &engine, const PluginSpec &spec, std::string *err) {
    std::shared_ptr<PluginLibrary> lib;
    if (int rc = open_plugin(spec.plugin, &lib, err); rc != KW_OK) return rc;
    const kw_plugin_descriptor_t *d = lib->descriptor();
    std::string instance = spec.instance.empty() ? d->name : spec.instance;
    if (!valid_instance_name(instance)) {
        *err = "plugin \"" + lib->path() + "\": instance name \"" + instance +
               "\" is not valid: use " + kInstanceNameRule;
        return KW_ERR_INVALID_ARG;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (instances_.count(instance)) {
            *err = "plugin \"" + lib->path() + "\": an instance named \"" + instance +
                   "\" is already loaded (from " + paths_[instance] +
                   "): give this one another instance name";
            return KW_ERR_INVALID_ARG;
        }
    }
    std::shared_ptr<PluginContext> ctx;
    void *state = nullptr;
    if (int rc = init(spec, lib, instance, &ctx, &state, err); rc != KW_OK) return rc;
    // From here the handler owns the instance: a refusal below closes it.
    auto handler = std::make_unique<PluginHandler>(lib, ctx, state);
    if (int rc = engine.add_handler(spec.filter, std::move(handler)); rc != KW_OK) {
        *err = describe(d, instance, lib->path()) + ": " + engine.last_error();
        return rc;
    }
    std::lock_guard<std::mutex> lock(mu_);
    instances_[instance] = ctx;
    paths_[instance] = lib->path();
    ctx->log(KW_LOG_INFO, std::string("loaded ") + d->name + " " + (d->version ? d->version : "") +
                              " from " + lib->path());
    return KW_OK;
}

int PluginSet::stat(const std::string &name, int64_t *value) const {
    static const std::string prefix = "plugin.";
    if (name.compare(0, prefix.size(), prefix) != 0) return KW_ERR_INVALID_ARG;
    size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos) return KW_ERR_INVALID_ARG;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = instances_.find(name.substr(prefix.size(), dot - prefix.size()));
    if (it == instances_.end()) return KW_ERR_INVALID_ARG;
    return it->second->counter(name.substr(dot + 1), value);
}

void PluginSet::append_stats(std::vector<StatSample> *out) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto &[instance, context] : instances_)
        for (const auto &[counter, value] : context->counters())
            out->push_back({StatId::PLUGIN_COUNTER, instance + "." + counter, value, {}});
}

}  // namespace keywatch
