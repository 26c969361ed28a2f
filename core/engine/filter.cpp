#include "core/engine/filter.h"

#include <cstdlib>

#include "core/queue/queue_keys.h"
#include "core/redis/keyspace_events.h"

namespace keywatch {

bool Filter::matches(std::string_view event, int event_db, std::string_view key,
                     std::string_view item_queue) const {
    if (db >= 0 && event_db != db) return false;
    if (has_queue && item_queue != queue) return false;
    // "*" means every Redis event; delayed tasks are asked for by name.
    bool listed = events.find(event) != events.end();
    if (!listed && (!all_events || event == "task")) return false;
    if (has_prefix && key.substr(0, prefix.size()) != prefix) return false;
    if (has_glob && !glob_match(glob, key)) return false;
    return true;
}

bool Filter::wants_queue(const std::string &q, bool is_keys) const {
    if (has_queue && queue != q) return false;
    return is_keys ? (all_events || events.count("expired")) : events.count("task") != 0;
}

bool Filter::set(std::string_view name, std::string_view value, bool binary, std::string *err) {
    if (name == "prefix") {
        prefix.assign(value.data(), value.size());
        has_prefix = true;
        return true;
    }
    if (name == "glob") {
        glob.assign(value.data(), value.size());
        has_glob = true;
        return true;
    }
    if (binary) {
        *err = "filter option '" + std::string(name) +
               "' takes text: use kw_filter_set (binary values are for prefix and glob)";
        return false;
    }
    if (name == "queue") {
        std::string q(value);
        if (!valid_queue_name(q, err)) return false;
        queue = q;
        has_queue = true;
        return true;
    }
    if (name == "db") {
        if (value == "*" || value == "-1") {
            db = -1;
            return true;
        }
        char *end = nullptr;
        std::string v(value);
        long n = strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || n < 0 || n > 1000000) {
            *err = "filter db '" + v + "' is not a database number: use 0, 1, ... or * for any";
            return false;
        }
        db = static_cast<int>(n);
        return true;
    }
    if (name == "events") {
        std::set<std::string, std::less<>> parsed;
        bool all = false;
        std::string v(value);
        size_t start = 0;
        while (start <= v.size()) {
            size_t comma = v.find(',', start);
            std::string ev =
                v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            while (!ev.empty() && ev.front() == ' ') ev.erase(ev.begin());
            while (!ev.empty() && ev.back() == ' ') ev.pop_back();
            if (ev == "*") {
                all = true;
            } else {
                bool ok = !ev.empty();
                for (char c : ev)
                    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
                        ok = false;
                if (!ok) {
                    *err = "filter events '" + v + "': '" + ev +
                           "' is not an event name (lower-case letters, digits, '_' and '-'; "
                           "e.g. expired,evicted,del or *)";
                    return false;
                }
                parsed.insert(ev);
            }
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        all_events = all;
        if (all) {
            const std::vector<std::string> star = star_events();
            events = std::set<std::string, std::less<>>(star.begin(), star.end());
        } else {
            events = parsed;
        }
        if (all) events.insert(parsed.begin(), parsed.end());
        return true;
    }
    *err =
        "unknown filter option '" + std::string(name) + "': use events, db, prefix, glob or queue";
    return false;
}

}  // namespace keywatch
