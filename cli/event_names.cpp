#include "cli/event_names.h"

#include "cli/closest_name.h"

#include <algorithm>
#include <cstddef>

namespace keywatch::cli {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::string unknown_event_message(std::string_view name) {
    std::string msg = "unknown event '" + std::string(name) + "' in --events";
    std::string near = closest_name(name, known_event_names());
    if (!near.empty()) msg += ": did you mean '" + near + "'?";
    msg +=
        " Use names Redis publishes, comma-separated (e.g. expired,evicted,del,set,expire,"
        "persist,rename_from,rename_to), or '*' for all of those";
    return msg;
}

}  // namespace

const std::vector<std::string> &known_event_names() {
    // From the notifyKeyspaceEvent() calls of Redis 7.0-7.4: generic, string, list, set,
    // sorted set, hash (with 7.4's field expiry), stream and geo commands.
    static const std::vector<std::string> names = {"expired",
                                                   "evicted",
                                                   "del",
                                                   "set",
                                                   "expire",
                                                   "persist",
                                                   "rename_from",
                                                   "rename_to",
                                                   "new",
                                                   "move_from",
                                                   "move_to",
                                                   "copy_to",
                                                   "restore",
                                                   "sortstore",
                                                   "setrange",
                                                   "incrby",
                                                   "incrbyfloat",
                                                   "append",
                                                   "lpush",
                                                   "rpush",
                                                   "lpop",
                                                   "rpop",
                                                   "linsert",
                                                   "lset",
                                                   "lrem",
                                                   "ltrim",
                                                   "sadd",
                                                   "srem",
                                                   "spop",
                                                   "sinterstore",
                                                   "sunionstore",
                                                   "sdiffstore",
                                                   "zadd",
                                                   "zincr",
                                                   "zrem",
                                                   "zremrangebyscore",
                                                   "zremrangebyrank",
                                                   "zremrangebylex",
                                                   "zunionstore",
                                                   "zinterstore",
                                                   "zdiffstore",
                                                   "zrangestore",
                                                   "zpopmin",
                                                   "zpopmax",
                                                   "georadiusstore",
                                                   "geosearchstore",
                                                   "hset",
                                                   "hdel",
                                                   "hincrby",
                                                   "hincrbyfloat",
                                                   "hexpire",
                                                   "hexpired",
                                                   "hpersist",
                                                   "xadd",
                                                   "xtrim",
                                                   "xdel",
                                                   "xsetid",
                                                   "xgroup-create",
                                                   "xgroup-createconsumer",
                                                   "xgroup-delconsumer",
                                                   "xgroup-destroy",
                                                   "xgroup-setid"};
    return names;
}

bool parse_event_list(std::string_view text, std::string *canonical, std::string *err) {
    if (trim(text) == "*") {
        *canonical = "*";
        return true;
    }
    const auto &known = known_event_names();
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
        if (std::find(known.begin(), known.end(), name) == known.end()) {
            *err = unknown_event_message(name);
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
