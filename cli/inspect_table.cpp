#include "cli/inspect_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "cli/time_text.h"

namespace keywatch::cli {

namespace {

QueueFigures parse_queue(const nlohmann::json &q) {
    QueueFigures f;
    f.queue = q.at("queue").get<std::string>();
    f.due = q.at("due").get<int64_t>();
    f.due_now = q.at("due_now").get<int64_t>();
    f.inflight = q.at("inflight").get<int64_t>();
    f.dead = q.at("dead").get<int64_t>();
    f.oldest_overdue_ms = q.at("oldest_overdue_ms").get<int64_t>();
    return f;
}

std::vector<std::string> row(const QueueFigures &q) {
    return {q.queue,
            std::to_string(q.due),
            std::to_string(q.due_now),
            std::to_string(q.inflight),
            std::to_string(q.dead),
            q.oldest_overdue_ms < 0 ? "-" : format_span_ms(q.oldest_overdue_ms)};
}

// Aligned columns: the first `text_cols` and the last read left to right, counts line up
// right.
std::string render(const std::vector<std::vector<std::string>> &rows, size_t text_cols) {
    std::vector<size_t> width(rows.front().size(), 0);
    for (const auto &r : rows)
        for (size_t i = 0; i < r.size(); i++) width[i] = std::max(width[i], r[i].size());
    std::string out;
    for (const auto &r : rows) {
        std::string line;
        for (size_t i = 0; i < r.size(); i++) {
            const std::string pad(width[i] - r[i].size(), ' ');
            if (i > 0) line += "  ";
            if (i < text_cols || i + 1 == r.size())
                line += r[i] + pad;
            else
                line += pad + r[i];
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

const std::vector<std::string> kHead = {"QUEUE",     "DUE",  "DUE NOW",
                                        "IN FLIGHT", "DEAD", "OLDEST OVERDUE"};

}  // namespace

bool parse_inspect_json(const std::string &json, std::vector<QueueFigures> *queues, int64_t *now_ms,
                        std::string *err, std::vector<NodeFigures> *nodes) {
    try {
        const auto j = nlohmann::json::parse(json);
        queues->clear();
        *now_ms = j.value("now_ms", int64_t{0});
        for (const auto &q : j.at("queues")) queues->push_back(parse_queue(q));
        if (nodes) {
            nodes->clear();
            if (j.value("mode", std::string()) == "cluster" && j.contains("nodes"))
                for (const auto &n : j.at("nodes")) {
                    NodeFigures f;
                    f.node = n.at("node").get<std::string>();
                    f.reachable = n.value("reachable", true);
                    for (const auto &q : n.at("queues")) f.queues.push_back(parse_queue(q));
                    nodes->push_back(std::move(f));
                }
        }
        return true;
    } catch (const std::exception &e) {
        *err = std::string("unexpected inspect output from the library: ") + e.what();
        return false;
    }
}

std::string inspect_table(const std::vector<QueueFigures> &queues) {
    std::vector<std::vector<std::string>> rows = {kHead};
    for (const auto &q : queues) rows.push_back(row(q));
    return render(rows, 1);
}

std::string inspect_node_table(const std::vector<NodeFigures> &nodes) {
    std::vector<std::string> head = {"MASTER"};
    head.insert(head.end(), kHead.begin(), kHead.end());
    std::vector<std::vector<std::string>> rows = {head};
    for (const auto &n : nodes) {
        // A master that was not read: no figures rather than zeros (NOT READ says why).
        if (!n.reachable) rows.push_back({n.node, "(not read)", "-", "-", "-", "-", "-"});
        if (n.reachable && n.queues.empty()) rows.push_back({n.node, "-", "0", "0", "0", "0", "-"});
        for (const auto &q : n.queues) {
            std::vector<std::string> r = {n.node};
            auto cells = row(q);
            r.insert(r.end(), cells.begin(), cells.end());
            rows.push_back(r);
        }
    }
    return render(rows, 2);
}

}  // namespace keywatch::cli
