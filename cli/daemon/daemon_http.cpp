#include "cli/daemon/daemon_http.h"

#include <utility>

#include "cli/daemon/config_reader.h"
#include "cli/daemon/daemon_routes.h"
#include "cli/daemon/http_server.h"
#include "cli/daemon/metrics.h"
#include "cli/daemon/queue_gauges.h"
#include "cli/redact_url.h"

namespace keywatch::cli {
namespace {

// GET /api/v1/config: what the daemon runs, secrets hidden as `run --check` and the log
// hide them (secret_key's names, passwords in URLs).
nlohmann::json config_summary(const DaemonConfig &config, const std::vector<std::string> &lines) {
    nlohmann::json engine = nlohmann::json::object();
    for (const auto &[name, value] : config.engine) {
        engine[name] = name == "redis.url" ? redact_url_list(value)
                       : secret_key(name)  ? "***"
                                           : value;
    }
    return {{"config", config.path},
            {"summary", lines},
            {"engine", engine},
            {"http",
             {{"listen", config.http.listen},
              {"token", !config.http.token.empty()},
              {"admin", config.http.admin}}},
            {"log",
             {{"format", config.log.format == LogFormat::Json ? "json" : "text"},
              {"level", DaemonLog::level_name(config.log.level)},
              {"file", config.log.file}}},
            {"metrics", {{"queue_interval_ms", config.metrics.queue_interval_ms}}}};
}

}  // namespace

struct DaemonHttp::Impl {
    HttpServer server;  // first to stop: no route runs once it has
    std::unique_ptr<QueueGauges> gauges;
    std::unique_ptr<Metrics> metrics;
    std::unique_ptr<DashboardApi> api;
};

DaemonHttp::DaemonHttp() : impl_(std::make_unique<Impl>()) {}

DaemonHttp::~DaemonHttp() {
    stop();
}

bool DaemonHttp::start(const DaemonConfig &config, kw_engine_t *engine,
                       const kw_conf_t *engine_conf, std::vector<std::string> handler_names,
                       DaemonLog *log, std::string *err, const std::vector<std::string> &summary) {
    impl_->gauges = std::make_unique<QueueGauges>(
        engine_conf, config.metrics.queue_interval_ms,
        [log](kw_log_level level, const std::string &message) {
            log->write(level, message, {{"component", "queue_gauges"}});
        });
    impl_->metrics = std::make_unique<Metrics>(engine, handler_names, impl_->gauges.get());
    DashboardApi::Context api;
    api.engine = engine;
    api.conf = engine_conf;
    api.handler_names = std::move(handler_names);
    api.gauges = impl_->gauges.get();
    api.admin = config.http.admin;
    api.config = config_summary(config, summary);
    impl_->api = std::make_unique<DashboardApi>(std::move(api));
    HttpServer::Options opts;
    opts.listen = config.http.listen;
    opts.token = config.http.token;
    if (!impl_->server.start(opts, daemon_routes(impl_->metrics.get(), engine, impl_->api.get()),
                             err)) {
        *err = "[http] listen: " + *err;
        return false;
    }
    if (impl_->server.beyond_loopback() && config.http.token.empty())
        log->write(KW_LOG_WARN,
                   "the HTTP endpoints listen beyond loopback without a token: anyone who can "
                   "reach this address can read /metrics and the JSON API under /api/v1/, "
                   "dead letters' payloads included; set [http] token, or listen on 127.0.0.1",
                   {{"address", impl_->server.address()}});
    return true;
}

void DaemonHttp::start_gauges() {
    if (impl_->gauges) impl_->gauges->start();
}

void DaemonHttp::stop() {
    impl_->server.stop();
    if (impl_->gauges) impl_->gauges->stop();
}

std::string DaemonHttp::address() const {
    return impl_->server.address();
}

}  // namespace keywatch::cli
