#include "cli/daemon/readiness.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>

#include "cli/conn_state.h"

namespace keywatch::cli {
namespace {

struct NodeView {
    int64_t state = KW_CONN_DISCONNECTED;
    int sweeping = -1;      // -1: the engine runs no sweeper for it (no sample)
    bool scanning = false;  // its catch-up scan for adopt rules runs
    int64_t progress = 0;   // of that scan, in thousandths
};

}  // namespace

Readiness check_readiness(kw_engine_t *engine) {
    Readiness r;
    kw_stats_t *raw = nullptr;
    if (!engine || kw_engine_stats(engine, &raw) != KW_OK) {
        r.json = R"({"ready":false,"not_ready":["the engine's statistics cannot be read"]})";
        return r;
    }
    std::unique_ptr<kw_stats_t, void (*)(kw_stats_t *)> s(raw, &kw_stats_free);
    std::map<std::string, NodeView> nodes;  // sorted: a stable body
    int64_t expected = 0, uncovered = 0;
    for (size_t i = 0; i < kw_stats_count(s.get()); i++) {
        const std::string name = kw_stats_name(s.get(), i);
        const int64_t v = kw_stats_value(s.get(), i);
        if (name == "conn.nodes") expected = v;
        if (name == "conn.slots_uncovered") uncovered = v;
        if (name == "node.state.<node>") nodes[kw_stats_label_value(s.get(), i)].state = v;
        if (name == "node.sweeping.<node>")
            nodes[kw_stats_label_value(s.get(), i)].sweeping = v != 0;
        if (name == "catchup.scanning.<node>")
            nodes[kw_stats_label_value(s.get(), i)].scanning = v != 0;
        if (name == "catchup.progress.<node>") nodes[kw_stats_label_value(s.get(), i)].progress = v;
    }
    nlohmann::json not_ready = nlohmann::json::array(), listed = nlohmann::json::array();
    nlohmann::json adopting = nlohmann::json::array();
    for (const auto &[node, view] : nodes) {
        nlohmann::json n = {{"node", node}, {"state", conn_state_name(view.state)}};
        if (view.sweeping >= 0) n["sweeping"] = view.sweeping == 1;
        // A catch-up scan is running: said, never a reason to be not ready (the node's
        // events are heard meanwhile).
        if (view.scanning) {
            n["adopting"] = static_cast<double>(view.progress) / 1000.0;
            adopting.push_back({{"node", node}, {"progress", n["adopting"]}});
        }
        listed.push_back(n);
        if (view.state != KW_CONN_READY)
            not_ready.push_back("node " + node + ": subscriber " + conn_state_name(view.state));
        if (view.sweeping == 0) not_ready.push_back("node " + node + ": sweeper not running");
    }
    if (nodes.empty())
        not_ready.push_back("no Redis node connected yet");
    else if (expected != static_cast<int64_t>(nodes.size()))
        not_ready.push_back("the engine serves " + std::to_string(expected) +
                            " nodes but reports the state of " + std::to_string(nodes.size()));
    // A cluster master down and not yet replaced leaves the node list (no subscriber is
    // owed to it), but its slots' events cannot arrive: not ready until a master serves them.
    if (uncovered > 0)
        not_ready.push_back(std::to_string(uncovered) +
                            " of 16384 cluster slots have no working master (a master is down "
                            "and no replica has taken over yet)");
    r.ready = not_ready.empty();
    nlohmann::json body = {{"ready", r.ready}};
    if (!r.ready) body["not_ready"] = not_ready;
    if (!adopting.empty()) body["adopting"] = adopting;
    body["nodes"] = listed;
    r.json = body.dump();
    return r;
}

}  // namespace keywatch::cli
