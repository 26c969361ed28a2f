#include "cli/daemon/daemon_http.h"

#include <map>
#include <utility>

#include "cli/daemon/http_server.h"
#include "cli/daemon/metrics.h"
#include "cli/daemon/queue_gauges.h"
#include "cli/daemon/readiness.h"

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
    Metrics *metrics = impl_->metrics.get();
    std::map<std::string, HttpRoute> routes;
    routes["/metrics"].handle = [metrics] {
        HttpResponse r;
        r.content_type = Metrics::kContentType;
        r.body = metrics->render();
        return r;
    };
    routes["/healthz"] =
        HttpRoute{[] {
                      return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
                  },
                  true};
    routes["/readyz"].handle = [engine] {
        const Readiness verdict = check_readiness(engine);
        return HttpResponse{verdict.ready ? 200 : 503, "application/json", verdict.json + "\n"};
    };
    HttpServer::Options opts;
    opts.listen = config.http.listen;
    opts.token = config.http.token;
    if (!impl_->server.start(opts, std::move(routes), err)) {
        *err = "[http] listen: " + *err;
        return false;
    }
    impl_->gauges->start();
    if (impl_->server.beyond_loopback() && config.http.token.empty())
        log->write(KW_LOG_WARN,
                   "the HTTP endpoints listen beyond loopback without a token: anyone who can "
                   "reach this address can read /metrics; set [http] token, or listen on "
                   "127.0.0.1",
                   {{"address", impl_->server.address()}});
    return true;
}

void DaemonHttp::stop() {
    impl_->server.stop();
    if (impl_->gauges) impl_->gauges->stop();
}

std::string DaemonHttp::address() const {
    return impl_->server.address();
}

}  // namespace keywatch::cli
