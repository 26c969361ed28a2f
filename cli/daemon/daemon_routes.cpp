#include "cli/daemon/daemon_routes.h"

#include "cli/daemon/dashboard_ui.h"
#include "cli/daemon/readiness.h"

namespace keywatch::cli {

std::map<std::string, HttpRoute> daemon_routes(const Metrics *metrics, kw_engine_t *engine,
                                               DashboardApi *api) {
    std::map<std::string, HttpRoute> routes;
    routes["/metrics"] = {[metrics](const HttpRequest &) {
                              HttpResponse r;
                              r.content_type = Metrics::kContentType;
                              r.body = metrics->render();
                              return r;
                          },
                          false};
    routes["/healthz"] = {[](const HttpRequest &) {
                              HttpResponse r;
                              r.body = "ok\n";
                              return r;
                          },
                          true};
    routes["/readyz"] = {[engine](const HttpRequest &) {
                             Readiness ready = check_readiness(engine);
                             HttpResponse r;
                             r.status = ready.ready ? 200 : 503;
                             r.content_type = "application/json";
                             r.body = ready.json + "\n";
                             return r;
                         },
                         false};
    if (api) {
        routes[DashboardApi::kPrefix] = {[api](const HttpRequest &req) { return api->handle(req); },
                                         false, true, true, true};
        add_dashboard_routes(&routes);
    }
    return routes;
}

}  // namespace keywatch::cli
