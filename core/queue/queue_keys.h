// Queue naming and the shapes of queue script replies, shared by the engine (async) and
// the blocking client. Pure: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace keywatch {

// The key-tracking queue's name; task queues have names of their own.
inline constexpr const char *kKeysQueue = "keys";

// The Redis keys of one queue in one hash-tag slot: <ns>:<queue>:{<tag>}:<part>.
struct QueueKeys {
    std::string due, inflight, data, dead, done;
    // The batch layout's keys: lease members per claim batch, the batch number counter.
    std::string leases, seq;
    // "<ns>:<queue>:{<tag>}:", the prefix every key of the slot queue shares.
    std::string base;

    static QueueKeys make(const std::string &ns, const std::string &queue, const std::string &tag);
    // make(...).due alone.
    static std::string due_key(const std::string &ns, const std::string &queue,
                               const std::string &tag);
    // KEYS for a script, in the order scripts.h documents (plus the tracked key if any).
    std::vector<std::string> keys() const { return {due, inflight, data, dead, done}; }
    // The KEYS of a claim (claim_due, claim_live) opening batch `seq` of `owner`.
    std::vector<std::string> claim_keys(const std::string &owner, uint64_t seq) const {
        return {due, inflight, leases, data, done, this->seq, batch(owner, seq)};
    }
    // The key of one claim batch: <base>c:<owner>:<seq>.
    std::string batch(const std::string &owner, uint64_t seq) const {
        return base + "c:" + owner + ":" + std::to_string(seq);
    }
    // The batch key of a lease member "<owner>:<seq>:<b>" ("" if it is not one).
    std::string batch_of_member(const std::string &member) const;
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

// True for keywatch's own keys in namespace ns: "<ns>:dedupe:..." and
// "<ns>:<queue>:{<tag>}:<part>". Their events are never news, and no rule adopts them.
bool is_keywatch_key(std::string_view ns, std::string_view key);

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

// A claim batch's member of `leases`: "<owner>:<seq>:<b>".
inline std::string lease_member(const std::string &owner, uint64_t seq, int64_t b) {
    return owner + ":" + std::to_string(seq) + ":" + std::to_string(b);
}

// The batch layout's claim_due reply (scripts.h documents its shape), parsed in one place
// for the sweeper, the tests and the bench.
struct ClaimReply {
    int64_t now = 0, next_due = -1;
    int64_t next_lease = -2;  // -2: leases not looked at
    int64_t live = -1;        // batches (and version-1 items) in flight; -1: not looked at
    int64_t b = -1;           // the batch number; -1: no batch opened
    int64_t untracked = 0, moved = 0;
    // Subscribers of the engines channel the claim saw (PUBSUB NUMSUB); -1: not asked.
    int64_t listeners = -1;
    // The due part in order (source 'S'), then the items of run-out leases (source 'L').
    std::vector<ClaimedItem> items;
    std::vector<std::string> stale;  // lease members whose batch key the next claim declares
};
// False, with *err saying what was wrong, if r is not a claim_due reply.
bool parse_claim_reply(const redisReply *r, ClaimReply *out, std::string *err);

// claim_live's reply: one letter per event key (C T D R U), the claimed items, the batch.
struct LiveClaimReply {
    int64_t now = 0, b = -1;
    int64_t listeners = -1;  // as in ClaimReply
    std::string letters;
    std::vector<ClaimedItem> items;  // source 'N'
};
bool parse_live_claim_reply(const redisReply *r, LiveClaimReply *out, std::string *err);

}  // namespace keywatch
