// The daemon's HTTP routes, in one place: /metrics (Metrics::render, Prometheus text),
// /healthz (200 "ok": the process is alive; open, no token needed) and /readyz (200 when
// check_readiness says ready, else 503; its JSON either way); with an api, the JSON API
// under /api/v1/ (DashboardApi) and the dashboard's pages (dashboard_ui.h). For
// HttpServer::start.
// Thread-safety: the routes run on the HTTP thread; metrics and engine must outlive the
// server.
#pragma once

#include <map>
#include <string>

#include "cli/daemon/dashboard_api.h"
#include "cli/daemon/http_server.h"
#include "cli/daemon/metrics.h"

namespace keywatch::cli {

std::map<std::string, HttpRoute> daemon_routes(const Metrics *metrics, kw_engine_t *engine,
                                               DashboardApi *api = nullptr);

}  // namespace keywatch::cli
