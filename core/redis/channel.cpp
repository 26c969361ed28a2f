#include "core/redis/channel.h"

#include <climits>

namespace keywatch {

bool parse_channel(std::string_view channel, ParsedChannel *out) {
    static constexpr std::string_view kKeyevent = "__keyevent@";
    static constexpr std::string_view kKeyspace = "__keyspace@";
    ChannelKind kind;
    if (channel.substr(0, kKeyevent.size()) == kKeyevent) {
        kind = ChannelKind::Keyevent;
    } else if (channel.substr(0, kKeyspace.size()) == kKeyspace) {
        kind = ChannelKind::Keyspace;
    } else {
        return false;
    }
    size_t i = kKeyevent.size();  // both prefixes have the same length
    long db = 0;
    size_t digits = 0;
    while (i < channel.size() && channel[i] >= '0' && channel[i] <= '9') {
        db = db * 10 + (channel[i] - '0');
        if (db > INT_MAX) return false;
        i++;
        digits++;
    }
    if (digits == 0) return false;
    if (channel.substr(i, 3) != "__:") return false;
    out->kind = kind;
    out->db = static_cast<int>(db);
    out->rest = channel.substr(i + 3);
    return true;
}

std::string keyevent_pattern(std::string_view event, int db) {
    std::string p = "__keyevent@" + (db < 0 ? std::string("*") : std::to_string(db)) + "__:";
    p.append(event.data(), event.size());
    return p;
}

std::string keyspace_pattern(int db, std::string_view key_glob) {
    std::string p = "__keyspace@" + std::to_string(db) + "__:";
    p.append(key_glob.data(), key_glob.size());
    return p;
}

std::string channel_acl_rules(const std::vector<std::string> &keyevent_patterns,
                              const std::vector<std::string> &keyspace_patterns) {
    std::string rules;
    for (auto &p : keyevent_patterns) rules += "&" + p + " ";
    for (auto &p : keyspace_patterns) rules += "&" + p + " ";
    return rules + "&" + kHeartbeatChannelPrefix + "*";
}

}  // namespace keywatch
