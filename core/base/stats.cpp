#include "core/base/stats.h"

#include <cstdio>

#include "keywatch_types.h"

namespace keywatch {
namespace {

std::vector<StatInfo> build_table() {
    std::vector<StatInfo> rows = {
#define KW_STAT_ROW_(id, name, type, unit, help) {name, StatType::type, unit, help, ""},
        KW_STATS_TABLE(KW_STAT_ROW_)
#undef KW_STAT_ROW_
    };
    // The label's name is the placeholder's: "expiry.lateness.<queue>" -> "queue".
    static std::vector<std::string> labels;
    labels.reserve(rows.size());
    for (auto &row : rows) {
        std::string_view name = row.name;
        size_t lt = name.find('<');
        labels.emplace_back(lt == std::string_view::npos
                                ? std::string()
                                : std::string(name.substr(lt + 1, name.size() - lt - 2)));
        row.label = labels.back().c_str();
    }
    return rows;
}

// The placeholder's position, or npos.
size_t placeholder(const StatInfo &row) {
    return std::string_view(row.name).find('<');
}

// Words of `text` wrapped to `width` columns after a head of `first` columns; each further
// line starts with `cont`.
std::string wrap(const std::string &text, size_t first, const std::string &cont, size_t width) {
    std::string out, line;
    size_t used = first;
    size_t start = 0;
    while (start < text.size()) {
        size_t space = text.find(' ', start);
        if (space == std::string::npos) space = text.size();
        std::string word = text.substr(start, space - start);
        start = space + 1;
        if (!line.empty() && used + line.size() + 1 + word.size() > width) {
            out += line + "\n" + cont;
            line.clear();
            used = cont.size();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
}

}  // namespace

const std::vector<StatInfo> &stat_table() {
    static const std::vector<StatInfo> table = build_table();
    return table;
}

const StatInfo &stat_info(StatId id) {
    return stat_table()[static_cast<size_t>(id)];
}

const char *stat_type_name(StatType type) {
    switch (type) {
        case StatType::COUNTER:
            return "counter";
        case StatType::GAUGE:
            return "gauge";
        case StatType::HISTOGRAM:
            return "histogram";
    }
    return "?";
}

bool find_stat(std::string_view name, StatId *id, std::string *label_value) {
    const auto &table = stat_table();
    for (size_t i = 0; i < table.size(); i++)
        if (placeholder(table[i]) == std::string_view::npos && name == table[i].name) {
            *id = static_cast<StatId>(i);
            label_value->clear();
            return true;
        }
    for (size_t i = 0; i < table.size(); i++) {
        size_t lt = placeholder(table[i]);
        if (lt == std::string_view::npos) continue;
        std::string_view prefix(table[i].name, lt);
        if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix) {
            *id = static_cast<StatId>(i);
            *label_value = std::string(name.substr(prefix.size()));
            return true;
        }
    }
    return false;
}

std::string stat_sample_name(StatId id, const std::string &label_value) {
    const StatInfo &row = stat_info(id);
    size_t lt = placeholder(row);
    if (lt == std::string_view::npos) return row.name;
    return std::string(row.name, lt) + label_value;
}

std::string stats_header_list() {
    // " *   <name> <type> <unit> <help, wrapped>" within 100 columns.
    std::string out;
    for (const auto &row : stat_table()) {
        char head[160];
        snprintf(head, sizeof head, " *   %-27s %-9s %-11s ", row.name, stat_type_name(row.type),
                 row.unit);
        const std::string line = head;
        out += line + wrap(row.help, line.size(), " *" + std::string(line.size() - 2, ' '), 100) +
               "\n";
    }
    return out;
}

void Histogram::observe_us(int64_t us) {
    if (us < 0) us = 0;
    const double seconds = static_cast<double>(us) / 1e6;
    size_t b = 0;
    while (b < kHistogramBounds.size() && seconds > kHistogramBounds[b]) b++;
    buckets_[b].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(us, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
    HistogramSnapshot s;
    for (size_t b = 0; b < kHistogramBuckets; b++) {
        s.buckets[b] = buckets_[b].load(std::memory_order_relaxed);
        s.count += s.buckets[b];
    }
    s.sum = static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6;
    return s;
}

std::string stats_json(const std::vector<StatSample> &samples) {
    std::string out = "{";
    for (const auto &s : samples) {
        if (out.size() > 1) out += ",";
        // Names are ASCII without quotes; node names are host:port or a socket path, whose
        // quotes and backslashes are escaped.
        out += "\"";
        for (char c : stat_sample_name(s.id, s.label)) {
            if (c == '"' || c == '\\') out += '\\';
            if (static_cast<unsigned char>(c) >= 0x20) out += c;
        }
        out += "\":";
        if (stat_info(s.id).type != StatType::HISTOGRAM) {
            out += std::to_string(s.value);
            continue;
        }
        char sum[64];
        snprintf(sum, sizeof sum, "%.6f", s.histogram.sum);
        out += "{\"count\":" + std::to_string(s.histogram.count) + ",\"sum\":" + sum +
               ",\"buckets\":[";
        uint64_t cumulative = 0;
        for (size_t b = 0; b < kHistogramBuckets; b++) {
            char bound[32];
            if (b < kHistogramBounds.size())
                snprintf(bound, sizeof bound, "%g", kHistogramBounds[b]);
            else
                snprintf(bound, sizeof bound, "\"+Inf\"");
            out += std::string(b ? "," : "") + "[" + bound + "," +
                   std::to_string(cumulative += s.histogram.buckets[b]) + "]";
        }
        out += "]}";
    }
    return out + "}";
}

void EngineStats::set_handlers(size_t count) {
    while (handlers_.size() < count) handlers_.push_back(std::make_unique<PerHandler>());
}

void EngineStats::set_queues(const std::vector<std::string> &queues) {
    for (auto &q : queues)
        if (!queues_.count(q)) queues_.emplace(q, std::make_unique<QueueStats>());
}

QueueStats *EngineStats::queue(const std::string &name) const {
    auto it = queues_.find(name);
    return it == queues_.end() ? nullptr : it->second.get();
}

void EngineStats::handler_batch(size_t handler) {
    if (handler < handlers_.size())
        handlers_[handler]->batches.fetch_add(1, std::memory_order_relaxed);
}

void EngineStats::handler_done(size_t handler, int result, int64_t duration_us) {
    if (handler >= handlers_.size()) return;
    PerHandler &h = *handlers_[handler];
    h.calls.fetch_add(1, std::memory_order_relaxed);
    h.duration.observe_us(duration_us);
    // PENDING: the handler held the event; its result comes later through the Hold.
    if (result == KW_RESULT_PENDING) {
        h.pending.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (result != KW_RESULT_ACK) h.errors.fetch_add(1, std::memory_order_relaxed);
    handler_result(handler, result);
}

void EngineStats::handler_result(size_t handler, int result) {
    if (handler >= handlers_.size()) return;
    PerHandler &h = *handlers_[handler];
    auto &counter = result == KW_RESULT_ACK     ? h.acked
                    : result == KW_RESULT_RETRY ? h.retried
                                                : h.rejected;
    counter.fetch_add(1, std::memory_order_relaxed);
}

void EngineStats::queue_done(const std::string &name, int result) {
    QueueStats *q = queue(name);
    if (!q) return;
    auto &counter = result == KW_RESULT_ACK     ? q->acked
                    : result == KW_RESULT_RETRY ? q->retried
                                                : q->rejected;
    counter.fetch_add(1, std::memory_order_relaxed);
}

void EngineStats::lateness(const std::string &name, int64_t late_ms) {
    if (QueueStats *q = queue(name)) q->lateness.observe_us(late_ms * 1000);
}

std::shared_ptr<NodeStats> EngineStats::add_node(const std::string &node, bool has_sweeper,
                                                 bool has_catchup) {
    auto n = std::make_shared<NodeStats>();
    n->state = KW_CONN_DISCONNECTED;
    n->has_sweeper = has_sweeper;
    n->has_catchup = has_catchup;
    std::lock_guard<std::mutex> lock(node_mu_);
    nodes_[node] = n;
    return n;
}

void EngineStats::drop_node(const std::string &node) {
    std::lock_guard<std::mutex> lock(node_mu_);
    nodes_.erase(node);
}

void EngineStats::node_state(const std::string &node, int state, bool reconnect) {
    std::lock_guard<std::mutex> lock(node_mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return;
    it->second->state.store(state, std::memory_order_relaxed);
    if (reconnect) it->second->reconnects.fetch_add(1, std::memory_order_relaxed);
}

int64_t EngineStats::node_count() const {
    std::lock_guard<std::mutex> lock(node_mu_);
    return static_cast<int64_t>(nodes_.size());
}

int64_t EngineStats::worst_state() const {
    auto rank = [](int64_t s) {
        switch (s) {
            case KW_CONN_BROKEN:
                return 3;
            case KW_CONN_CONNECTING:
                return 2;
            case KW_CONN_DISCONNECTED:
                return 1;
            default:
                return 0;
        }
    };
    std::lock_guard<std::mutex> lock(node_mu_);
    if (nodes_.empty()) return KW_CONN_DISCONNECTED;
    int64_t worst = KW_CONN_READY;
    for (auto &kv : nodes_) {
        int64_t s = kv.second->state.load(std::memory_order_relaxed);
        if (rank(s) > rank(worst)) worst = s;
    }
    return worst;
}

void EngineStats::append(std::vector<StatSample> *out, bool fixed) const {
    auto load = [](const std::atomic<int64_t> &a) { return a.load(std::memory_order_relaxed); };
    {
        std::lock_guard<std::mutex> lock(node_mu_);
        for (auto &kv : nodes_) {
            const NodeStats &n = *kv.second;
            out->push_back({StatId::NODE_STATE, kv.first, load(n.state), {}});
            out->push_back({StatId::NODE_RECONNECTS, kv.first, load(n.reconnects), {}});
            out->push_back({StatId::NODE_RECEIVED, kv.first, load(n.received), {}});
            if (n.has_sweeper)
                out->push_back({StatId::NODE_SWEEPING, kv.first, load(n.sweeping), {}});
            if (n.has_catchup) {
                out->push_back({StatId::CATCHUP_SCANNING, kv.first, load(n.catchup_scanning), {}});
                out->push_back({StatId::CATCHUP_PROGRESS, kv.first, load(n.catchup_progress), {}});
            }
        }
    }
    if (!fixed) return;
    for (auto &kv : queues_) {
        const QueueStats &q = *kv.second;
        out->push_back({StatId::QUEUE_ACKED, kv.first, load(q.acked), {}});
        out->push_back({StatId::QUEUE_RETRIED, kv.first, load(q.retried), {}});
        out->push_back({StatId::QUEUE_REJECTED, kv.first, load(q.rejected), {}});
        out->push_back({StatId::QUEUE_CLAIMED, kv.first, load(q.claimed), {}});
        out->push_back({StatId::QUEUE_DEAD, kv.first, load(q.dead), {}});
        out->push_back({StatId::QUEUE_LEASE_EXPIRED, kv.first, load(q.lease_expired), {}});
        HistogramSnapshot h = q.lateness.snapshot();
        out->push_back({StatId::EXPIRY_LATENESS, kv.first, static_cast<int64_t>(h.count), h});
    }
    for (size_t i = 0; i < handlers_.size(); i++) {
        const PerHandler &h = *handlers_[i];
        const std::string label = std::to_string(i);
        out->push_back({StatId::HANDLER_CALLS_BY_HANDLER, label, load(h.calls), {}});
        out->push_back({StatId::HANDLER_ERRORS_BY_HANDLER, label, load(h.errors), {}});
        out->push_back({StatId::HANDLER_ACKED, label, load(h.acked), {}});
        out->push_back({StatId::HANDLER_RETRIED, label, load(h.retried), {}});
        out->push_back({StatId::HANDLER_REJECTED, label, load(h.rejected), {}});
        out->push_back({StatId::HANDLER_PENDING, label, load(h.pending), {}});
        HistogramSnapshot d = h.duration.snapshot();
        out->push_back({StatId::HANDLER_DURATION, label, static_cast<int64_t>(d.count), d});
        out->push_back({StatId::HANDLER_BATCHES, label, load(h.batches), {}});
    }
}

}  // namespace keywatch
