#include "cli/daemon/dashboard_api.h"

#include <chrono>
#include <memory>
#include <set>
#include <utility>

#include "cli/daemon/queue_gauges.h"
#include "cli/daemon/readiness.h"
#include "cli/daemon/stats_view.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::json;

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The dead letters' client's connect and reply timeouts (the engine's may be many seconds).
constexpr const char *kApiRedisTimeout = "2s";

const char *const kEndpoints[] = {
    "GET /api/v1/",
    "GET /api/v1/nodes",
    "GET /api/v1/queues",
    "GET /api/v1/queues/<queue>",
    "GET /api/v1/queues/<queue>/dead?limit=N&cursor=ENTRY",
    "POST /api/v1/queues/<queue>/dead/replay",
    "POST /api/v1/queues/<queue>/dead/purge",
    "GET /api/v1/handlers",
    "GET /api/v1/config",
};

// "queues/a/b/dead/replay" -> the queue "a/b" and the rest "dead/replay" (a queue name may
// hold '/'; the endpoints' own words are matched from the end).
bool split_queue_path(const std::string &path, std::string *queue, std::string *rest) {
    static const std::string kQueues = "queues/";
    if (path.compare(0, kQueues.size(), kQueues) != 0 || path.size() == kQueues.size())
        return false;
    std::string tail = path.substr(kQueues.size());
    *rest = "";
    for (const char *suffix : {"/dead/replay", "/dead/purge", "/dead"}) {
        const std::string s = suffix;
        if (tail.size() > s.size() && tail.compare(tail.size() - s.size(), s.size(), s) == 0) {
            *rest = s.substr(1);
            tail.resize(tail.size() - s.size());
            break;
        }
    }
    *queue = tail;
    return true;
}

}  // namespace

HttpResponse json_response(const Json &body, int status) {
    HttpResponse r;
    r.status = status;
    r.content_type = "application/json";
    r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    return r;
}

HttpResponse json_error(int status, const std::string &message) {
    return json_response({{"error", message}}, status);
}

DashboardApi::DashboardApi(Context ctx) : ctx_(std::move(ctx)) {}

DashboardApi::~DashboardApi() {
    if (client_) kw_client_free(client_);
}

HttpResponse DashboardApi::handle(const HttpRequest &req) {
    const size_t prefix = std::string(kPrefix).size();  // "/api/v1" (no '/') is the index
    const std::string path = req.path.size() > prefix ? req.path.substr(prefix) : "";
    const bool post = req.method == "POST";
    std::string queue, rest;
    if (split_queue_path(path, &queue, &rest)) {
        if (rest == "dead/replay" || rest == "dead/purge")
            return dead_action(queue, rest.substr(5), req);
        if (post) return json_error(405, "method not allowed: " + req.path + " takes GET");
        if (rest == "dead") return dead_list(queue, req);
        return this->queue(queue);
    }
    if (post) return json_error(405, "method not allowed: " + req.path + " takes GET");
    if (path.empty()) return index();
    if (path == "nodes") return nodes();
    if (path == "queues") return queues();
    if (path == "handlers") return handlers();
    if (path == "config") return json_response(ctx_.config);
    return json_error(404, "not found: " + req.path + "; GET /api/v1/ lists the endpoints");
}

HttpResponse DashboardApi::index() const {
    Json endpoints = Json::array();
    for (const char *e : kEndpoints) endpoints.push_back(e);
    return json_response({{"version", kw_version_string()},
                          {"admin", ctx_.admin},
                          {"now_ms", now_ms()},
                          {"endpoints", endpoints}});
}

HttpResponse DashboardApi::nodes() const {
    Json body = Json::parse(check_readiness(ctx_.engine).json);
    StatsView stats;
    if (stats.read(ctx_.engine))
        for (auto &node : body["nodes"]) node["stats"] = stats.of("node", node["node"]);
    body["now_ms"] = now_ms();
    return json_response(body);
}

std::vector<std::string> DashboardApi::queue_names(const StatsView &stats) const {
    std::set<std::string> names;
    if (ctx_.gauges)
        for (const auto &q : ctx_.gauges->figures().queues) names.insert(q.queue);
    if (auto it = stats.labelled.find("queue"); it != stats.labelled.end())
        for (const auto &[name, rows] : it->second) names.insert(name);
    return {names.begin(), names.end()};
}

Json DashboardApi::queue_json(const std::string &name, const StatsView &stats) const {
    Json q = {{"queue", name}};
    bool known = false;
    if (ctx_.gauges)
        for (const auto &f : ctx_.gauges->figures().queues)
            if (f.queue == name) {
                q.update({{"due", f.due},
                          {"due_now", f.due_now},
                          {"inflight", f.inflight},
                          {"dead", f.dead},
                          {"oldest_overdue_ms", f.oldest_overdue_ms}});
                known = true;
            }
    Json counters = stats.of("queue", name);
    if (!counters.empty()) known = true;
    Json lateness = counters.contains("expiry.lateness") ? counters["expiry.lateness"] : Json();
    counters.erase("expiry.lateness");
    q["stats"] = counters;
    q["lateness"] = lateness;
    return known ? q : Json();
}

HttpResponse DashboardApi::queues() const {
    StatsView stats;
    stats.read(ctx_.engine);
    Json list = Json::array();
    for (const std::string &name : queue_names(stats)) {
        Json q = queue_json(name, stats);
        q.erase("lateness");  // per queue: GET /api/v1/queues/<queue>
        list.push_back(std::move(q));
    }
    const QueueGauges::Figures f = ctx_.gauges ? ctx_.gauges->figures() : QueueGauges::Figures{};
    return json_response({{"now_ms", now_ms()},
                          {"read_ms", f.read_ms},
                          {"read_errors", f.errors},
                          {"stats", stats.totals},
                          {"queues", list}});
}

HttpResponse DashboardApi::queue(const std::string &name) const {
    StatsView stats;
    stats.read(ctx_.engine);
    Json q = queue_json(name, stats);
    if (q.is_null())
        return json_error(404, "unknown queue '" + name +
                                   "': GET /api/v1/queues lists the queues this daemon knows");
    q["now_ms"] = now_ms();
    return json_response(q);
}

HttpResponse DashboardApi::handlers() const {
    StatsView stats;
    stats.read(ctx_.engine);
    Json list = Json::array();
    for (size_t i = 0; i < ctx_.handler_names.size(); i++)
        list.push_back({{"index", i},
                        {"name", ctx_.handler_names[i]},
                        {"stats", stats.of("handler", std::to_string(i))}});
    Json plugins = Json::array();
    if (auto it = stats.labelled.find("plugin"); it != stats.labelled.end())
        for (const auto &[label, rows] : it->second) {
            const size_t dot = label.find('.');  // "<instance>.<counter>"
            plugins.push_back({{"instance", label.substr(0, dot)},
                               {"counter", dot == std::string::npos ? "" : label.substr(dot + 1)},
                               {"value", rows.value("plugin", Json(0))}});
        }
    return json_response({{"now_ms", now_ms()}, {"handlers", list}, {"plugins", plugins}});
}

kw_client_t *DashboardApi::client(std::string *err) {
    if (client_) return client_;
    char errstr[256] = "";
    // Short waits: the HTTP thread also answers /healthz, /readyz and /metrics.
    std::unique_ptr<kw_conf_t, void (*)(kw_conf_t *)> conf(kw_conf_dup(ctx_.conf), &kw_conf_free);
    for (const char *name : {"redis.connect_timeout", "redis.command_timeout"})
        if (conf) kw_conf_set(conf.get(), name, kApiRedisTimeout, errstr, sizeof errstr);
    if (!conf || kw_client_new(conf.get(), &client_, errstr, sizeof errstr) != KW_OK) {
        client_ = nullptr;
        *err = std::string("cannot connect to Redis: ") + errstr;
    }
    return client_;
}

}  // namespace keywatch::cli
