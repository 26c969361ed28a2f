#include "capi/client_json.h"

#include <nlohmann/json.hpp>

#include "core/format/json_bytes.h"

namespace keywatch {
namespace {

nlohmann::json queue_json(const QueueFigures &f) {
    return {{"queue", f.queue},       {"due", f.due},   {"due_now", f.due_now},
            {"inflight", f.inflight}, {"dead", f.dead}, {"oldest_overdue_ms", f.oldest_overdue_ms}};
}

}  // namespace

std::string inspection_json(const Inspection &in) {
    nlohmann::json out;
    out["now_ms"] = in.now_ms;
    out["mode"] = in.cluster ? "cluster" : "standalone";
    out["complete"] = in.complete();
    out["unread_slots"] = in.unread_slots;
    out["unreachable"] = nlohmann::json::array();
    for (auto &u : in.unreachable)
        out["unreachable"].push_back({{"node", u.node}, {"slots", u.slots}, {"error", u.error}});
    out["unassigned"] = nlohmann::json::array();
    for (auto &r : in.unassigned) out["unassigned"].push_back({r.first, r.second});
    out["queues"] = nlohmann::json::array();
    for (auto &q : in.queues) out["queues"].push_back(queue_json(q));
    out["nodes"] = nlohmann::json::array();
    for (auto &n : in.nodes) {
        nlohmann::json node = {
            {"node", n.node}, {"reachable", n.reachable}, {"queues", nlohmann::json::array()}};
        for (auto &q : n.queues) node["queues"].push_back(queue_json(q));
        out["nodes"].push_back(node);
    }
    return out.dump();
}

std::string dead_letters_json(const std::vector<DeadLetter> &letters) {
    nlohmann::json out = nlohmann::json::array();
    for (auto &d : letters) {
        nlohmann::json item;
        item["entry"] = d.entry;
        if (!d.slot_tag.empty()) item["slot_tag"] = d.slot_tag;
        item["cursor"] = dead_letter_cursor(d);
        put_bytes(item, "id", d.id);
        item["attempts"] = d.attempts;
        item["deadline"] = d.deadline_ms;
        item["failed_ms"] = d.failed_ms;
        put_bytes(item, "error", d.error);
        if (d.has_payload) put_bytes(item, "payload", d.payload);
        for (auto &kv : d.other) put_bytes(item, kv.first, kv.second);
        out.push_back(item);
    }
    return out.dump();
}

}  // namespace keywatch
