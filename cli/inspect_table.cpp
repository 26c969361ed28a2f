#include "cli/inspect_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "cli/time_text.h"

namespace keywatch::cli {

bool parse_inspect_json(const std::string &json, std::vector<QueueFigures> *queues, int64_t *now_ms,
                        std::string *err) {
    try {
        const auto j = nlohmann::json::parse(json);
        queues->clear();
        *now_ms = j.value("now_ms", int64_t{0});
        for (const auto &q : j.at("queues")) {
            QueueFigures f;
            f.queue = q.at("queue").get<std::string>();
            f.due = q.at("due").get<int64_t>();
            f.due_now = q.at("due_now").get<int64_t>();
            f.inflight = q.at("inflight").get<int64_t>();
            f.dead = q.at("dead").get<int64_t>();
            f.oldest_overdue_ms = q.at("oldest_overdue_ms").get<int64_t>();
            queues->push_back(std::move(f));
        }
        return true;
    } catch (const std::exception &e) {
        *err = std::string("unexpected inspect output from the library: ") + e.what();
        return false;
    }
}

std::string inspect_table(const std::vector<QueueFigures> &queues) {
    const std::vector<std::string> head = {"QUEUE",     "DUE",  "DUE NOW",
                                           "IN FLIGHT", "DEAD", "OLDEST OVERDUE"};
    std::vector<std::vector<std::string>> rows = {head};
    for (const auto &q : queues)
        rows.push_back({q.queue, std::to_string(q.due), std::to_string(q.due_now),
                        std::to_string(q.inflight), std::to_string(q.dead),
                        q.oldest_overdue_ms < 0 ? "-" : format_span_ms(q.oldest_overdue_ms)});
    std::vector<size_t> width(head.size(), 0);
    for (const auto &r : rows)
        for (size_t i = 0; i < r.size(); i++) width[i] = std::max(width[i], r[i].size());
    std::string out;
    for (const auto &r : rows) {
        std::string line;
        for (size_t i = 0; i < r.size(); i++) {
            const std::string pad(width[i] - r[i].size(), ' ');
            if (i > 0) line += "  ";
            // Queue names and the last column read left to right; counts line up right.
            if (i == 0 || i + 1 == r.size())
                line += r[i] + pad;
            else
                line += pad + r[i];
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

}  // namespace keywatch::cli
