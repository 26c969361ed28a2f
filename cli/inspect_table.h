// `keywatch inspect` for people: the library's inspect JSON
// ({"queues":[{"queue","due","due_now","inflight","dead","oldest_overdue_ms"},...],
// "now_ms"}) as an aligned table, one row per queue. Pure functions: thread-safe.
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

// Parses the JSON of kw_client_inspect_json. False with *err on a shape it does not know.
bool parse_inspect_json(const std::string &json, std::vector<QueueFigures> *queues, int64_t *now_ms,
                        std::string *err);

// QUEUE  DUE  DUE NOW  IN FLIGHT  DEAD  OLDEST OVERDUE, then one row per queue (numbers
// right-aligned, "-" when nothing is overdue). Ends with '\n'.
std::string inspect_table(const std::vector<QueueFigures> &queues);

}  // namespace keywatch::cli
