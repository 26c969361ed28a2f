// `keywatch inspect` for people: the library's inspect JSON
// ({"queues":[{"queue","due","due_now","inflight","dead","oldest_overdue_ms"},...],
// "now_ms", "mode", "nodes":[{"node","queues":[...]}]}) as aligned tables: one row per
// queue, and on a cluster one row per master and queue. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keywatch::cli {

struct QueueFigures {
    std::string queue;
    int64_t due = 0;                 // items waiting (due now or later)
    int64_t due_now = 0;             // of those, past their deadline
    int64_t inflight = 0;            // claimed by an engine, not acked yet
    int64_t dead = 0;                // dead letters
    int64_t oldest_overdue_ms = -1;  // -1: nothing overdue
};

struct NodeFigures {
    std::string node;       // host:port of a master
    bool reachable = true;  // false: not read (no figures, rather than zeros)
    std::vector<QueueFigures> queues;
};

// Parses the JSON of kw_client_inspect_json. False with *err on a shape it does not know.
// nodes (may be null) receives the per-master figures of a cluster (empty otherwise).
bool parse_inspect_json(const std::string &json, std::vector<QueueFigures> *queues, int64_t *now_ms,
                        std::string *err, std::vector<NodeFigures> *nodes = nullptr);

// QUEUE  DUE  DUE NOW  IN FLIGHT  DEAD  OLDEST OVERDUE, then one row per queue (numbers
// right-aligned, "-" when nothing is overdue). Ends with '\n'.
std::string inspect_table(const std::vector<QueueFigures> &queues);

// MASTER  QUEUE  DUE ... : the same figures per cluster master (only queues it holds).
std::string inspect_node_table(const std::vector<NodeFigures> &nodes);

}  // namespace keywatch::cli
