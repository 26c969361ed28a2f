#include "cli/daemon/daemon_routes.h"

#include "cli/daemon/readiness.h"

namespace keywatch::cli {

std::map<std::string, HttpRoute> daemon_routes(const Metrics *metrics, kw_engine_t *engine) {
    std::map<std::string, HttpRoute> routes;
    routes["/metrics"] = {[metrics] {
                              HttpResponse r;
                              r.content_type = Metrics::kContentType;
                              r.body = metrics->render();
                              return r;
                          },
                          false};
    routes["/healthz"] = {[] {
                              HttpResponse r;
                              r.body = "ok\n";
                              return r;
                          },
                          true};
    routes["/readyz"] = {[engine] {
                             Readiness ready = check_readiness(engine);
                             HttpResponse r;
                             r.status = ready.ready ? 200 : 503;
                             r.content_type = "application/json";
                             r.body = ready.json + "\n";
                             return r;
                         },
                         false};
    return routes;
}

}  // namespace keywatch::cli
