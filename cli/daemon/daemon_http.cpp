#include "cli/daemon/daemon_http.h"

#include <utility>

#include "cli/daemon/daemon_routes.h"
#include "cli/daemon/http_server.h"
#include "cli/daemon/metrics.h"
#include "cli/daemon/queue_gauges.h"

namespace keywatch::cli {

struct DaemonHttp::Impl {
    HttpServer server;  // first to stop: no route runs once it has
    std::unique_ptr<QueueGauges> gauges;
    std::unique_ptr<Metrics> metrics;
};

DaemonHttp::DaemonHttp() : impl_(std::make_unique<Impl>()) {}

DaemonHttp::~DaemonHttp() {
    stop();
}

bool DaemonHttp::start(const DaemonConfig &config, kw_engine_t *engine,
                       const kw_conf_t *engine_conf, std::vector<std::string> handler_names,
                       DaemonLog *log, std::string *err) {
    impl_->gauges = std::make_unique<QueueGauges>(
        engine_conf, config.metrics.queue_interval_ms,
        [log](kw_log_level level, const std::string &message) {
            log->write(level, message, {{"component", "queue_gauges"}});
        });
    impl_->metrics =
        std::make_unique<Metrics>(engine, std::move(handler_names), impl_->gauges.get());
    HttpServer::Options opts;
    opts.listen = config.http.listen;
    opts.token = config.http.token;
    if (!impl_->server.start(opts, daemon_routes(impl_->metrics.get(), engine), err)) {
        *err = "[http] listen: " + *err;
        return false;
    }
    if (impl_->server.beyond_loopback() && config.http.token.empty())
        log->write(KW_LOG_WARN,
                   "the HTTP endpoints listen beyond loopback without a token: anyone who can "
                   "reach this address can read /metrics; set [http] token, or listen on "
                   "127.0.0.1",
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
