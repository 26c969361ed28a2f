// The daemon's HTTP side, wired: an HttpServer serving /metrics (Metrics over the engine's
// statistics and the QueueGauges read from Redis), /healthz (200 "ok", open without the
// token) and /readyz (check_readiness: 200, or 503 with a JSON body naming what is not
// ready), the JSON API under /api/v1/ and the dashboard at / (DashboardApi, dashboard_ui.h).
// Warns in the log when it listens beyond loopback without a token.
// Not thread-safe: start/stop from the daemon's main thread; routes run on the server's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/daemon/daemon_config.h"
#include "cli/daemon/daemon_log.h"
#include "keywatch.h"

namespace keywatch::cli {

class DaemonHttp {
  public:
    DaemonHttp();
    ~DaemonHttp();  // stops
    DaemonHttp(const DaemonHttp &) = delete;
    DaemonHttp &operator=(const DaemonHttp &) = delete;

    // Listens on config.http.listen. engine and log must outlive this object;
    // handler_names label the handlers' metrics; summary (DaemonEngine::describe) heads
    // the API's config summary. False with *err (the address and why) when it cannot
    // listen.
    bool start(const DaemonConfig &config, kw_engine_t *engine, const kw_conf_t *engine_conf,
               std::vector<std::string> handler_names, DaemonLog *log, std::string *err,
               const std::vector<std::string> &summary = {});
    // Starts reading the queue gauges (every [metrics] queue_interval, with a client of
    // engine_conf's redis options): once the engine has started, so that a start that
    // fails reports its one error, not also a gauge read that failed beside it.
    void start_gauges();
    // Stops serving. Idempotent.
    void stop();
    // The address bound ("127.0.0.1:9464").
    std::string address() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace keywatch::cli
