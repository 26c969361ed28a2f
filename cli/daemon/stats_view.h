// The engine's statistics (a kw_engine_stats snapshot) grouped for the dashboard's JSON API:
// unlabelled samples by name, labelled ones by their label (node, queue, handler, plugin)
// and label value, each under its row's name without the label ("queue.acked.<queue>" of
// queue "jobs" is queues["jobs"]["queue.acked"]). Histograms become {"count", "sum",
// "buckets": [[upper bound in seconds, cumulative count], ..., ["+Inf", count]]}, as
// kw_engine_stats_json writes them. Nothing is renamed here: the names are the statistics
// table's (include/keywatch.h), the one list.
// Thread-safety: read() may be called from any thread; a StatsView is plain data.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "keywatch.h"

namespace keywatch::cli {

struct StatsView {
    nlohmann::json totals = nlohmann::json::object();  // unlabelled: name -> value
    // label name ("node", "queue", "handler", "plugin", "event") -> value -> {row: value}
    std::map<std::string, std::map<std::string, nlohmann::json>> labelled;

    // Reads a snapshot; false when the engine's statistics cannot be read.
    bool read(kw_engine_t *engine);
    // labelled[label][value], or an empty object.
    nlohmann::json of(const std::string &label, const std::string &value) const;
};

}  // namespace keywatch::cli
