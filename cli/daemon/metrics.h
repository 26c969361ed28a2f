// The daemon's /metrics: every statistic of the engine (a kw_engine_stats snapshot) and
// the gauges read from Redis (queue_gauges.h) in the Prometheus text exposition format
// 0.0.4, under conventional names (keywatch_..._total counters, _seconds durations,
// histograms), with build info. Handlers are labelled by their instance names.
// kMetricMap (metrics.cpp) is the one table saying which statistic becomes which metric;
// docs/metrics.md lists the result.
// Thread-safety: render() may be called from any thread (the HTTP thread); the table
// functions are pure.
#pragma once

#include <string>
#include <vector>

#include "keywatch.h"

namespace keywatch::cli {

class QueueGauges;

// How a statistic's value becomes the metric's.
enum class MetricTransform {
    None,
    ReadyToUp,        // a kw_conn_state: 1 when KW_CONN_READY, else 0
    MillisToSeconds,  // a gauge in ms: divided by 1000
    PermilleToRatio,  // a gauge in thousandths: divided by 1000
};

// One row of the mapping: statistics row (as kw_stats_name spells it, with its <label>
// placeholder) -> metric family. Several rows may share a family when each adds a
// different value of an extra label (handler results). metric == nullptr: the row is left
// out (an engine-wide total of a labelled family exported beside it; `help` says which).
struct MetricMapping {
    const char *row;
    const char *metric;
    const char *extra_label;  // "" or the extra label's name ("result")
    const char *extra_value;  // its value for this row ("acked")
    const char *help;         // the family's HELP when rows share it; "" = the row's own help
    MetricTransform transform;
};

// The mapping of `row`, or nullptr for a row the table does not know (a statistic added
// to the engine after this table: it is exported under a name derived from the row's).
const MetricMapping *metric_mapping(const std::string &row);
// The whole table, in its order.
const std::vector<MetricMapping> &metric_map();

// Label value escaped for the exposition format (\\, \", \n; invalid UTF-8 bytes as
// U+FFFD).
std::string escape_label_value(const std::string &value);

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
