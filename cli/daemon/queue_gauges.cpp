#include "cli/daemon/queue_gauges.h"

#include <nlohmann/json.hpp>

#include <chrono>

namespace keywatch::cli {
namespace {

int64_t now_wall_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Why an inspect document left queues out ("2 slots unread: 127.0.0.1:7001: ..."), or ""
// when it is complete.
std::string incomplete_reason(const std::string &json) {
    const auto j = nlohmann::json::parse(json);
    if (j.value("complete", true)) return "";
    std::string why = std::to_string(j.value("unread_slots", 0)) + " hash slots unread";
    if (j.contains("unreachable"))
        for (const auto &u : j.at("unreachable"))
            why += "; " + u.value("node", std::string("?")) + ": " +
                   u.value("error", std::string("unreachable"));
    return why;
}

}  // namespace

QueueGauges::QueueGauges(const kw_conf_t *conf, int64_t interval_ms, LogFn log)
    : conf_(kw_conf_dup(conf)),
      interval_ms_(interval_ms > 0 ? interval_ms : 1),
      log_(std::move(log)) {}

QueueGauges::~QueueGauges() {
    stop();
    kw_client_free(client_);
    kw_conf_free(conf_);
}

void QueueGauges::start() {
    if (thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = false;
    }
    thread_ = std::thread([this] { run(); });
}

void QueueGauges::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

QueueGauges::Figures QueueGauges::figures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return figures_;
}

void QueueGauges::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
        lock.unlock();
        std::string err;
        bool ok = read(&err);
        note(ok, err);
        lock.lock();
        cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stopping_; });
    }
}

bool QueueGauges::read(std::string *err) {
    if (!client_) {
        char errstr[512] = "";
        if (!conf_ || kw_client_new(conf_, &client_, errstr, sizeof errstr) != KW_OK) {
            *err = conf_ ? errstr : "out of memory";
            client_ = nullptr;
            return false;
        }
    }
    char *json = nullptr;
    int rc = kw_client_inspect_json(client_, &json);
    if (rc != KW_OK) {
        *err = kw_client_last_error(client_);
        return false;
    }
    std::string text(json);
    kw_free(json);
    std::vector<QueueFigures> queues;
    int64_t now_ms = 0;
    try {
        *err = incomplete_reason(text);
    } catch (const std::exception &e) {
        *err = std::string("unexpected inspect output from the library: ") + e.what();
    }
    if (!err->empty() || !parse_inspect_json(text, &queues, &now_ms, err)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    figures_.queues = std::move(queues);
    figures_.read_ms = now_wall_ms();
    return true;
}

void QueueGauges::note(bool ok, const std::string &err) {
    bool was_failing;
    {
        std::lock_guard<std::mutex> lock(mu_);
        was_failing = failing_;
        failing_ = !ok;
        if (!ok) figures_.errors++;
    }
    if (!log_ || ok == !was_failing) return;
    if (ok)
        log_(KW_LOG_INFO, "queue gauges: reading the queues' figures again");
    else
        log_(KW_LOG_WARN, "queue gauges: cannot read the queues' figures (" + err +
                              "); /metrics keeps the last figures read and the time of that "
                              "read (keywatch_queue_gauges_read_timestamp_seconds); retrying "
                              "every interval, logged again only when it works");
}

}  // namespace keywatch::cli
