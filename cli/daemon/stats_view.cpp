#include "cli/daemon/stats_view.h"

#include <cmath>
#include <memory>

namespace keywatch::cli {
namespace {

nlohmann::json histogram(const kw_stats_t *s, size_t i) {
    const double *bounds = nullptr;
    const uint64_t *counts = nullptr;
    const size_t n = kw_stats_buckets(s, i, &bounds, &counts);
    nlohmann::json buckets = nlohmann::json::array();
    for (size_t k = 0; k < n; k++) {
        if (std::isinf(bounds[k]))
            buckets.push_back({"+Inf", counts[k]});
        else
            buckets.push_back({bounds[k], counts[k]});
    }
    return {{"count", kw_stats_value(s, i)}, {"sum", kw_stats_sum(s, i)}, {"buckets", buckets}};
}

// "queue.acked.<queue>" -> "queue.acked"; "plugin.<counter>" -> "plugin".
std::string row_without_label(const std::string &row) {
    const size_t open = row.find(".<");
    return open == std::string::npos ? row : row.substr(0, open);
}

}  // namespace

bool StatsView::read(kw_engine_t *engine) {
    kw_stats_t *raw = nullptr;
    if (!engine || kw_engine_stats(engine, &raw) != KW_OK) return false;
    std::unique_ptr<kw_stats_t, void (*)(kw_stats_t *)> s(raw, &kw_stats_free);
    for (size_t i = 0; i < kw_stats_count(s.get()); i++) {
        const std::string row = kw_stats_name(s.get(), i);
        const std::string label = kw_stats_label_name(s.get(), i);
        nlohmann::json value = kw_stats_type(s.get(), i) == KW_STAT_HISTOGRAM
                                   ? histogram(s.get(), i)
                                   : nlohmann::json(kw_stats_value(s.get(), i));
        if (label.empty())
            totals[row] = std::move(value);
        else
            labelled[label][kw_stats_label_value(s.get(), i)][row_without_label(row)] =
                std::move(value);
    }
    return true;
}

nlohmann::json StatsView::of(const std::string &label, const std::string &value) const {
    auto by_label = labelled.find(label);
    if (by_label == labelled.end()) return nlohmann::json::object();
    auto it = by_label->second.find(value);
    return it == by_label->second.end() ? nlohmann::json::object() : it->second;
}

}  // namespace keywatch::cli
