// The queue gauges of /metrics (due, due now, in flight, dead letters, oldest overdue per
// queue), read from Redis by a thread of their own with kw_client_inspect_json every
// MetricsConfig::queue_interval_ms, never per scrape: a scrape reads the figures cached
// here. A failed or incomplete read keeps the last figures, counts an error and is logged
// once (and once more when reads succeed again), so a Redis outage neither floods the log
// nor empties the gauges; the time of the last good read is published beside them.
// Thread-safety: start/stop from one thread; figures() from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/inspect_table.h"
#include "keywatch.h"

namespace keywatch::cli {

class QueueGauges {
  public:
    using LogFn = std::function<void(kw_log_level level, const std::string &message)>;

    struct Figures {
        std::vector<QueueFigures> queues;  // as of the last good read
        int64_t read_ms = 0;               // wall clock of the last good read; 0 = none yet
        int64_t errors = 0;                // failed or incomplete reads so far
    };

    // conf: the engine's configuration (copied; the client connects with its redis.*
    // options). log receives the failure and recovery lines (may be empty).
    QueueGauges(const kw_conf_t *conf, int64_t interval_ms, LogFn log);
    ~QueueGauges();  // stops
    QueueGauges(const QueueGauges &) = delete;
    QueueGauges &operator=(const QueueGauges &) = delete;

    // Starts the reading thread: a first read at once, then one per interval.
    void start();
    // Stops and joins the thread (waits for a read in progress, bounded by the client's
    // redis timeouts). Idempotent.
    void stop();
    Figures figures() const;

  private:
    void run();
    bool read(std::string *err);  // one read; false with *err
    void note(bool ok, const std::string &err);

    kw_conf_t *conf_;
    int64_t interval_ms_;
    LogFn log_;
    kw_client_t *client_ = nullptr;  // the thread's own; reopened after a failure
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    bool failing_ = false;  // the last read failed (logged once)
    Figures figures_;
    std::thread thread_;
};

}  // namespace keywatch::cli
