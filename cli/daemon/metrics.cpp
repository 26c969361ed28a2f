#include "cli/daemon/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <cctype>
#include <map>
#include <memory>

#include "cli/daemon/queue_gauges.h"
#include "cli/utf8.h"

namespace keywatch::cli {
namespace {

using T = MetricTransform;

// Every statistics row and the metric it becomes. Counters end in _total, durations are in
// seconds. HELP is the row's help in the statistics table, unless it reads wrong outside
// the table ("of those", registration indexes) or the family is shared: then it is here.
// Rows left out (metric nullptr) are engine-wide totals of a labelled family exported.
const std::vector<MetricMapping> kMetricMap = {
    {"events.received", "keywatch_events_received_total", "", "", "", T::None},
    {"events.received.<event>", "keywatch_notifications_received_total", "", "",
     "keyspace notifications read from Redis, per event name", T::None},
    {"events.delivered", nullptr, "", "", "covered by keywatch_handler_calls_total", T::None},
    {"events.dropped", "keywatch_events_dropped_total", "", "", "", T::None},
    {"events.abandoned", "keywatch_events_abandoned_total", "", "", "", T::None},
    {"events.suppressed", "keywatch_events_suppressed_total", "", "", "", T::None},
    {"events.unrouted", "keywatch_events_unrouted_total", "", "", "", T::None},
    {"handler.errors", nullptr, "", "", "covered by keywatch_handler_errors_total", T::None},
    {"handler.retries", nullptr, "", "", "covered by keywatch_handler_events_total", T::None},
    {"handler.calls.<handler>", "keywatch_handler_calls_total", "", "",
     "calls of one handler that returned", T::None},
    {"handler.errors.<handler>", "keywatch_handler_errors_total", "", "",
     "calls of one handler that returned RETRY or REJECT or an unknown code", T::None},
    {"handler.acked.<handler>", "keywatch_handler_events_total", "result", "acked",
     "events one handler finished, by result (acked, retried, rejected), returned or "
     "completed through a hold",
     T::None},
    {"handler.retried.<handler>", "keywatch_handler_events_total", "result", "retried", "",
     T::None},
    {"handler.rejected.<handler>", "keywatch_handler_events_total", "result", "rejected", "",
     T::None},
    {"handler.pending.<handler>", "keywatch_handler_holds_total", "", "", "", T::None},
    {"handler.duration.<handler>", "keywatch_handler_duration_seconds", "", "", "", T::None},
    {"handler.batches.<handler>", "keywatch_handler_batches_total", "", "",
     "calls into one handler (a batch of events or one event); events per call = "
     "keywatch_handler_calls_total / keywatch_handler_batches_total",
     T::None},
    {"handler.waiting.<handler>", "keywatch_handler_waiting", "", "", "", T::None},
    {"conn.reconnects", nullptr, "", "", "covered by keywatch_reconnects_total", T::None},
    {"conn.state", "keywatch_connection_state", "", "",
     "state of the subscriber connections, the worst over all nodes: 0 disconnected, "
     "1 connecting, 2 ready, 3 broken",
     T::None},
    {"conn.nodes", "keywatch_nodes", "", "", "", T::None},
    {"node.state.<node>", "keywatch_node_up", "", "",
     "1 when the engine is connected and subscribed to the node, else 0", T::ReadyToUp},
    {"node.reconnects.<node>", "keywatch_reconnects_total", "", "", "", T::None},
    {"node.received.<node>", "keywatch_node_notifications_received_total", "", "", "", T::None},
    {"node.sweeping.<node>", "keywatch_node_sweeping", "", "", "", T::None},
    {"topology.refreshes", "keywatch_topology_refreshes_total", "", "", "", T::None},
    {"conn.slots_uncovered", "keywatch_cluster_slots_uncovered", "", "", "", T::None},
    {"dispatch.queued", "keywatch_dispatch_queued", "", "", "", T::None},
    {"items.claimed", "keywatch_items_claimed_total", "", "", "", T::None},
    {"items.acked", "keywatch_items_acked_total", "", "", "claimed items acknowledged", T::None},
    {"items.retried", "keywatch_items_retried_total", "", "", "claimed items scheduled for a retry",
     T::None},
    {"items.dead", "keywatch_items_dead_total", "", "",
     "claimed items moved to the dead-letter stream", T::None},
    {"items.lease_expired", "keywatch_items_lease_expired_total", "", "", "", T::None},
    {"items.unhandled", "keywatch_items_unhandled_total", "", "", "", T::None},
    {"items.late_acks", "keywatch_items_late_acks_total", "", "", "", T::None},
    {"items.released", "keywatch_items_released_total", "", "", "", T::None},
    {"queue.claimed.<queue>", "keywatch_queue_items_claimed_total", "", "", "", T::None},
    {"queue.acked.<queue>", "keywatch_queue_items_acked_total", "", "", "", T::None},
    {"queue.retried.<queue>", "keywatch_queue_items_retried_total", "", "", "", T::None},
    {"queue.rejected.<queue>", "keywatch_queue_items_rejected_total", "", "", "", T::None},
    {"queue.dead.<queue>", "keywatch_queue_items_dead_total", "", "", "", T::None},
    {"queue.lease_expired.<queue>", "keywatch_queue_items_lease_expired_total", "", "", "",
     T::None},
    {"expiry.lateness.<queue>", "keywatch_expiry_lateness_seconds", "", "", "", T::None},
    {"sweep.calls", "keywatch_sweep_calls_total", "", "", "", T::None},
    {"lateness.max_ms", "keywatch_expiry_lateness_max_seconds", "", "",
     "largest handler start minus deadline seen (tracked keys and tasks), in seconds",
     T::MillisToSeconds},
    {"adopt.adopted", "keywatch_adopt_keys_total", "result", "adopted",
     "keys adoption tracked (adopted), whose deadline it moved (rescheduled) or untracked "
     "because their TTL was removed (untracked)",
     T::None},
    {"adopt.rescheduled", "keywatch_adopt_keys_total", "result", "rescheduled", "", T::None},
    {"adopt.untracked", "keywatch_adopt_keys_total", "result", "untracked", "", T::None},
    {"adopt.late", "keywatch_adopt_late_total", "", "", "", T::None},
    {"adopt.dropped", "keywatch_adopt_dropped_total", "", "", "", T::None},
    {"adopt.parked", "keywatch_adopt_parked", "", "", "", T::None},
    {"adopt.resent", "keywatch_adopt_resent_total", "", "", "", T::None},
    {"catchup.scanning.<node>", "keywatch_catchup_scanning", "", "", "", T::None},
    {"catchup.progress.<node>", "keywatch_catchup_progress_ratio", "", "",
     "how far the catch-up scan for adopt rules of one node is, 0 to 1 (1: done)",
     T::PermilleToRatio},
    {"catchup.scans", "keywatch_catchup_scans_total", "", "", "", T::None},
    {"catchup.keys", "keywatch_catchup_keys_total", "", "", "", T::None},
    {"plugin.<counter>", "keywatch_plugin_counter_total", "", "",
     "a plugin instance's own counter (host counter_add), by instance and counter name", T::None},
};

const char *type_name(kw_stat_type type) {
    switch (type) {
        case KW_STAT_COUNTER:
            return "counter";
        case KW_STAT_GAUGE:
            return "gauge";
        case KW_STAT_HISTOGRAM:
            return "histogram";
    }
    return "untyped";
}

// A row the table does not know: "queue.acked.<queue>" -> keywatch_queue_acked(_total).
std::string derived_name(const std::string &row, kw_stat_type type, const std::string &unit) {
    std::string base = row.substr(0, row.find(".<"));
    std::string name = "keywatch_";
    for (char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (type == KW_STAT_HISTOGRAM && unit == "seconds") name += "_seconds";
    if (type == KW_STAT_COUNTER) name += "_total";
    return name;
}

// The shortest text that reads back as the same double; "+Inf" for infinity.
std::string number(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    char buf[40];
    // Whole numbers as integers ("10", not the shorter "1e+01"), as Prometheus writes them.
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
        snprintf(buf, sizeof buf, "%.0f", v);
        return buf;
    }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

std::string escape_help(const std::string &help) {
    std::string out;
    for (char c : help) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

// The families of one exposition, in the order first seen; each written as one block.
class Exposition {
  public:
    using Labels = std::vector<std::pair<std::string, std::string>>;

    void family(const std::string &name, const char *type, const std::string &help) {
        if (index_.count(name)) return;
        index_[name] = blocks_.size();
        blocks_.push_back("# HELP " + name + " " + escape_help(help) + "\n# TYPE " + name + " " +
                          type + "\n");
    }
    void sample(const std::string &family, const std::string &suffix, const Labels &labels,
                const std::string &value) {
        std::string &block = blocks_[index_.at(family)];
        block += family + suffix;
        if (!labels.empty()) {
            block += '{';
            for (size_t i = 0; i < labels.size(); i++) {
                if (i) block += ',';
                block += labels[i].first + "=\"" + escape_label_value(labels[i].second) + '"';
            }
            block += '}';
        }
        block += ' ' + value + '\n';
    }
    std::string text() const {
        std::string out;
        for (const auto &b : blocks_) out += b;
        return out;
    }

  private:
    std::map<std::string, size_t> index_;
    std::vector<std::string> blocks_;
};

// A sample's labels: a handler's registration index becomes its instance name, a plugin
// counter's "<instance>.<counter>" the labels instance and counter.
Exposition::Labels sample_labels(const std::string &row, const std::string &label,
                                 std::string value, const std::vector<std::string> &handler_names) {
    if (label.empty()) return {};
    if (label == "handler") {
        size_t idx = std::strtoul(value.c_str(), nullptr, 10);
        if (idx < handler_names.size()) value = handler_names[idx];
    }
    if (row == "plugin.<counter>") {
        const size_t dot = std::min(value.find('.'), value.size());
        return {{"instance", value.substr(0, dot)},
                {"counter", dot < value.size() ? value.substr(dot + 1) : ""}};
    }
    return {{label, value}};
}

void histogram(Exposition *x, const std::string &name, Exposition::Labels labels,
               const kw_stats_t *s, size_t i) {
    const double *bounds = nullptr;
    const uint64_t *counts = nullptr;
    size_t n = kw_stats_buckets(s, i, &bounds, &counts);
    for (size_t k = 0; k < n; k++) {
        Exposition::Labels with_le = labels;
        with_le.emplace_back("le", number(bounds[k]));
        x->sample(name, "_bucket", with_le, std::to_string(counts[k]));
    }
    x->sample(name, "_sum", labels, number(kw_stats_sum(s, i)));
    x->sample(name, "_count", labels, std::to_string(kw_stats_value(s, i)));
}

void gauge_family(Exposition *x, const std::string &name, const std::string &help,
                  const std::vector<QueueFigures> &queues,
                  const std::function<double(const QueueFigures &)> &value) {
    x->family(name, "gauge", help);
    for (const auto &q : queues) x->sample(name, "", {{"queue", q.queue}}, number(value(q)));
}

void queue_gauges(Exposition *x, const QueueGauges::Figures &f) {
    const std::string from = " (read from Redis every [metrics] queue_interval)";
    gauge_family(x, "keywatch_queue_due", "items waiting in the queue, due or not" + from, f.queues,
                 [](const QueueFigures &q) { return double(q.due); });
    gauge_family(x, "keywatch_queue_due_now", "of those, past their deadline" + from, f.queues,
                 [](const QueueFigures &q) { return double(q.due_now); });
    gauge_family(x, "keywatch_queue_in_flight",
                 "items claimed by an engine and not acknowledged yet" + from, f.queues,
                 [](const QueueFigures &q) { return double(q.inflight); });
    gauge_family(x, "keywatch_queue_dead_letters",
                 "entries in the queue's dead-letter stream" + from, f.queues,
                 [](const QueueFigures &q) { return double(q.dead); });
    gauge_family(x, "keywatch_queue_oldest_overdue_seconds",
                 "how long ago the deadline of the oldest item due now passed, 0 when none" + from,
                 f.queues, [](const QueueFigures &q) {
                     return q.oldest_overdue_ms < 0 ? 0.0 : q.oldest_overdue_ms / 1000.0;
                 });
    x->family("keywatch_queue_gauges_read_errors_total", "counter",
              "reads of the queue gauges from Redis that failed or were incomplete (the "
              "gauges then keep the last figures read)");
    x->sample("keywatch_queue_gauges_read_errors_total", "", {}, std::to_string(f.errors));
    if (f.read_ms == 0) return;  // nothing read yet: no time to show
    x->family("keywatch_queue_gauges_read_timestamp_seconds", "gauge",
              "when the queue gauges were last read from Redis (Unix time)");
    x->sample("keywatch_queue_gauges_read_timestamp_seconds", "", {}, number(f.read_ms / 1000.0));
}

}  // namespace

const std::vector<MetricMapping> &metric_map() {
    return kMetricMap;
}

const MetricMapping *metric_mapping(const std::string &row) {
    for (const auto &m : kMetricMap)
        if (row == m.row) return &m;
    return nullptr;
}

std::string escape_label_value(const std::string &value) {
    std::string valid;
    if (!is_valid_utf8(value)) {
        // Byte by byte: keep the valid sequences, replace each stray byte with U+FFFD.
        for (size_t i = 0; i < value.size();) {
            size_t len = 1;
            while (len <= 4 && i + len <= value.size() &&
                   !is_valid_utf8(std::string_view(value).substr(i, len)))
                len++;
            if (len <= 4 && i + len <= value.size()) {
                valid.append(value, i, len);
                i += len;
            } else {
                valid += "\xEF\xBF\xBD";
                i++;
            }
        }
    }
    const std::string &in = valid.empty() ? value : valid;
    std::string out;
    for (char c : in) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

Metrics::Metrics(kw_engine_t *engine, std::vector<std::string> handler_names, QueueGauges *gauges)
    : engine_(engine), handler_names_(std::move(handler_names)), gauges_(gauges) {}

std::string Metrics::render() const {
    Exposition x;
    x.family("keywatch_build_info", "gauge", "the keywatch library serving this daemon");
    x.sample("keywatch_build_info", "", {{"version", kw_version_string()}}, "1");
    kw_stats_t *raw = nullptr;
    if (kw_engine_stats(engine_, &raw) != KW_OK) throw std::runtime_error("out of memory");
    std::unique_ptr<kw_stats_t, void (*)(kw_stats_t *)> s(raw, &kw_stats_free);
    for (size_t i = 0; i < kw_stats_count(s.get()); i++) {
        const std::string row = kw_stats_name(s.get(), i);
        const kw_stat_type type = kw_stats_type(s.get(), i);
        const MetricMapping *m = metric_mapping(row);
        if (m && !m->metric) continue;  // left out: the sum of a family exported
        const std::string name = m ? m->metric : derived_name(row, type, kw_stats_unit(s.get(), i));
        const std::string help = m && m->help[0] ? m->help : kw_stats_help(s.get(), i);
        x.family(name, type_name(type), help);
        Exposition::Labels labels = sample_labels(row, kw_stats_label_name(s.get(), i),
                                                  kw_stats_label_value(s.get(), i), handler_names_);
        if (m && m->extra_label[0]) labels.emplace_back(m->extra_label, m->extra_value);
        if (type == KW_STAT_HISTOGRAM) {
            histogram(&x, name, labels, s.get(), i);
            continue;
        }
        const int64_t v = kw_stats_value(s.get(), i);
        const MetricTransform t = m ? m->transform : MetricTransform::None;
        x.sample(name, "", labels,
                 t == MetricTransform::ReadyToUp ? (v == KW_CONN_READY ? "1" : "0")
                 : t == MetricTransform::MillisToSeconds || t == MetricTransform::PermilleToRatio
                     ? number(v / 1000.0)
                     : std::to_string(v));
    }
    if (gauges_) queue_gauges(&x, gauges_->figures());
    return x.text();
}

}  // namespace keywatch::cli
