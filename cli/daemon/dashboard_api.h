// The JSON API under /api/v1/ that the dashboard uses (docs/daemon.md lists every endpoint):
// nodes and readiness, queues (the figures of the queue gauges, which read them with
// kw_client_inspect_json as `keywatch inspect` does, and the engine's per-queue counters),
// a queue's lateness histogram, handlers (counters, duration histogram, plugin counters),
// the dead letters of a queue (paged by a cursor, payloads previewed), the config summary
// (secrets hidden), and with [http] admin = true the actions replay and purge (POST only).
// Errors are JSON: {"error": "..."} with 400 (a bad parameter, named), 403 (admin off),
// 404 (unknown queue or path), 405, 415 (a POST that is not JSON) or 503 (Redis).
// Thread-safety: handle() runs on the HTTP server's thread, one request at a time (its
// client is that thread's); the engine and the gauges must outlive this object.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli/daemon/http_server.h"
#include "keywatch.h"

namespace keywatch::cli {

class QueueGauges;
class StatsView;

class DashboardApi {
  public:
    static constexpr const char *kPrefix = "/api/v1/";

    struct Context {
        kw_engine_t *engine = nullptr;
        const kw_conf_t *conf = nullptr;  // the engine's: the dead letters' client uses it
        std::vector<std::string> handler_names;
        QueueGauges *gauges = nullptr;
        bool admin = false;
        nlohmann::json config;  // the config summary, secrets already hidden
    };

    explicit DashboardApi(Context ctx);
    ~DashboardApi();
    DashboardApi(const DashboardApi &) = delete;
    DashboardApi &operator=(const DashboardApi &) = delete;

    HttpResponse handle(const HttpRequest &req);

  private:
    HttpResponse index() const;
    HttpResponse nodes() const;
    HttpResponse queues() const;
    HttpResponse queue(const std::string &name) const;
    HttpResponse handlers() const;
    HttpResponse dead_list(const std::string &queue, const HttpRequest &req);
    HttpResponse dead_action(const std::string &queue, const std::string &action,
                             const HttpRequest &req);
    // The queue's figures and counters, or null when no queue of that name is known.
    nlohmann::json queue_json(const std::string &name, const StatsView &stats) const;
    std::vector<std::string> queue_names(const StatsView &stats) const;
    // The client of the dead-letter calls, opened on first use; null with *err.
    kw_client_t *client(std::string *err);

    Context ctx_;
    kw_client_t *client_ = nullptr;
};

// {"error": message} with status.
HttpResponse json_error(int status, const std::string &message);
HttpResponse json_response(const nlohmann::json &body, int status = 200);

}  // namespace keywatch::cli
