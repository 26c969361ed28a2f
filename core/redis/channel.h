// Parsing of keyspace-notification channels, binary safe (keys may hold ':', spaces,
// newlines, NUL). Pure functions: thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace keywatch {

enum class ChannelKind { Keyevent, Keyspace };

struct ParsedChannel {
    ChannelKind kind;
    int db = 0;
    // Keyevent: the event name ("expired"); keyspace: the key (every remaining byte).
    std::string_view rest;
};

// Parses "__keyevent@<db>__:<event>" or "__keyspace@<db>__:<key>". The remainder after
// "__:" is taken whole, whatever bytes it holds. Returns false for anything else
// (including a db that is not a non-negative decimal number that fits an int).
bool parse_channel(std::string_view channel, ParsedChannel *out);

// "__keyevent@*__:<event>": the pattern keywatch PSUBSCRIBEs to for one event name, in
// every database; with a db >= 0, "__keyevent@<db>__:<event>": in that one only.
std::string keyevent_pattern(std::string_view event, int db = -1);

// Whether a pattern (keyevent_pattern(), keyspace_pattern()) holds no glob character, so
// names one channel: keywatch SUBSCRIBEs to that channel instead of PSUBSCRIBE (Redis finds a
// channel's subscribers in a hash table, but matches every message it publishes against
// every pattern subscribed on the server).
inline bool names_one_channel(std::string_view pattern) {
    return pattern.find_first_of("*?[\\") == std::string_view::npos;
}

// "__keyspace@<db>__:<key_glob>": the pattern for the keyspace channels of the keys a glob
// matches (a cluster's sweepers: their due keys, db 0).
std::string keyspace_pattern(int db, std::string_view key_glob);

// The prefix of the channel each subscriber publishes its heartbeats on (then its id).
inline constexpr const char *kHeartbeatChannelPrefix = "__keywatch:heartbeat:";

// The heartbeat channel of the subscriber `id`: "<prefix>2:<id>". Engines before the batch
// layout used "<prefix><16 hex digits>", the shape kV1HeartbeatGlob matches, so that an
// engine of that version is told from this one by its channel (V1Engines, v1_engines.h).
inline std::string heartbeat_channel(const std::string &id) {
    return std::string(kHeartbeatChannelPrefix) + "2:" + id;
}
inline constexpr const char *kV1HeartbeatGlob =
    "__keywatch:heartbeat:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
    "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]";

// The channel every engine serving tracked keys of namespace ns subscribes to on each
// master, before its keyevent patterns: a claim counts its subscribers (PUBSUB NUMSUB) to
// know whether another engine may hear a notification of what it takes (queue.done_mode).
inline std::string engines_channel(const std::string &ns) {
    return std::string(kHeartbeatChannelPrefix) + "engines:" + ns;
}

// The channel rules (after an ACL user's "resetchannels") that allow what a subscriber
// does: "&<pattern>" for each keyevent pattern (keyevent_pattern()), each keyspace pattern,
// and the heartbeat channels. Redis 7.0 compares a PSUBSCRIBE pattern literally with these rules,
// so the patterns are listed exactly; the heartbeat channel is a plain channel, which its
// pattern rule covers.
std::string channel_acl_rules(const std::vector<std::string> &keyevent_patterns,
                              const std::vector<std::string> &keyspace_patterns);

}  // namespace keywatch
