#include "cli/event_names.h"

#include "cli/closest_name.h"
#include "core/redis/keyspace_events.h"

#include <algorithm>
#include <cstddef>

namespace keywatch::cli {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::string unknown_event_message(std::string_view name, bool allow_task) {
    std::string msg = "unknown event '" + std::string(name) + "' in --events";
    std::string near = closest_name(name, event_names(), true);
    if (!near.empty()) msg += ": did you mean '" + near + "'?";
    msg +=
        " Use names Redis publishes, comma-separated (e.g. expired,evicted,del,set,expire,"
        "persist,rename_from,rename_to), or '*' for all of those";
    if (allow_task) msg += "; task for the items of task queues";
    return msg;
}

}  // namespace

bool parse_event_list(std::string_view text, bool allow_task, std::string *canonical,
                      std::string *err) {
    if (trim(text) == "*") {
        *canonical = "*";
        return true;
    }
    std::vector<std::string> picked;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string_view::npos) comma = text.size();
        std::string_view name = trim(text.substr(start, comma - start));
        start = comma + 1;
        if (name.empty()) {
            *err = "empty event name in --events '" + std::string(text) +
                   "': separate names with single commas, e.g. --events expired,del";
            return false;
        }
        if (name == "*") {
            *err = "'*' in --events stands alone: use --events '*' or list names";
            return false;
        }
        if (!find_event(name) && !(allow_task && name == "task")) {
            *err = unknown_event_message(name, allow_task);
            return false;
        }
        if (std::find(picked.begin(), picked.end(), name) == picked.end())
            picked.emplace_back(name);
    }
    canonical->clear();
    for (const auto &name : picked) {
        if (!canonical->empty()) *canonical += ',';
        *canonical += name;
    }
    return true;
}

}  // namespace keywatch::cli
