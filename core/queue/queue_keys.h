// Queue naming and the shapes of queue script replies, shared by the engine (async) and
// the blocking client. Pure: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <vector>

namespace keywatch {

// The key-tracking queue's name; task queues have names of their own.
inline constexpr const char *kKeysQueue = "keys";

// The Redis keys of one queue in one hash-tag slot: <ns>:<queue>:{<tag>}:<part>.
struct QueueKeys {
    std::string due, inflight, data, dead, done;

    static QueueKeys make(const std::string &ns, const std::string &queue, const std::string &tag);
    // make(...).due alone.
    static std::string due_key(const std::string &ns, const std::string &queue,
                               const std::string &tag);
    // KEYS for a script, in the order scripts.h documents (plus the tracked key if any).
    std::vector<std::string> keys() const { return {due, inflight, data, dead, done}; }
};

// "<ns>:<queue>:{*}:<part>": the glob of one queue's key in every slot (queue and part may
// be "*" too), for SCAN MATCH and keyspace patterns.
std::string queue_key_glob(const std::string &ns, const std::string &queue,
                           const std::string &part);

// The key a sweeper SETs NX to claim one live event when dedupe is on, in the event key's
// slot (tag): "<ns>:dedupe:{<tag>}:<db>:<event>:<key>".
std::string dedupe_key(const std::string &ns, const std::string &tag, int db,
                       const std::string &event, const std::string &key);

// Parses "<ns>:<queue>:{<tag>}:due" (what a cluster sweeper finds by SCAN or hears of by
// keyspace notification). False for any other key.
bool parse_due_key(const std::string &ns, const std::string &key, std::string *queue,
                   std::string *tag);
// Same for "<ns>:<queue>:{<tag>}:<part>" with any part (due, dead, ...).
bool parse_queue_key(const std::string &ns, const std::string &key, const std::string &part,
                     std::string *queue, std::string *tag);

// Standalone Redis keeps every queue in one slot tag.
inline constexpr const char *kStandaloneTag = "0";

// A queue name is text without '{', '}' or ':' and not empty, so names never collide.
bool valid_queue_name(const std::string &name, std::string *err);

// One item a claim script handed to us.
struct ClaimedItem {
    std::string id;
    int64_t deadline_ms = 0;
    int attempt = 1;
    bool has_payload = false;
    std::string payload;
    char source = 'S';       // 'S' sweep, 'L' lease expired, 'N' live notification
    std::string last_error;  // the previous attempt's error ("" if none)
};

// Claim scripts return their items flat: id, deadline, attempt, payload|nil, source,
// last error|nil, ...
inline constexpr size_t kClaimedFields = 6;
// Parses item i of such a flat array. False if the shape is wrong.
bool parse_claimed(const redisReply *flat, size_t i, ClaimedItem *out);

}  // namespace keywatch
