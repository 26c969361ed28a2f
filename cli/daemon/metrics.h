// The daemon's /metrics: every statistic of the engine (a kw_engine_stats snapshot) and
// the gauges read from Redis (queue_gauges.h) in the Prometheus text exposition format
// 0.0.4, under conventional names (keywatch_..._total counters, _seconds durations,
// histograms), with build info. Handlers are labelled by their instance names.
// Thread-safety: render() may be called from any thread (the HTTP thread).
#pragma once

#include <string>
#include <vector>

#include "keywatch.h"

namespace keywatch::cli {

class QueueGauges;

class Metrics {
  public:
    // handler_names[i]: the name of the handler registered i-th (the stats label it).
    // gauges may be null (no Redis-read gauges). Both must outlive this object.
    Metrics(kw_engine_t *engine, std::vector<std::string> handler_names, QueueGauges *gauges);
    // The whole exposition text.
    std::string render() const;
    static constexpr const char *kContentType = "text/plain; version=0.0.4; charset=utf-8";

  private:
    kw_engine_t *engine_;
    std::vector<std::string> handler_names_;
    QueueGauges *gauges_;
};

}  // namespace keywatch::cli
