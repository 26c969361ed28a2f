// The Lua scripts behind every state change of a queue. Each runs atomically in Redis and
// reads Redis's clock (TIME) once, so instances on different hosts agree on "now". They
// need Redis 7.0 (PEXPIRETIME, ZMSCORE).
//
// Deadlines of tracked keys are the keys' own expiry times (PEXPIRETIME), and an item is
// due once now is strictly past its deadline: exactly when Redis considers the key expired.
// Per-item work is batched into multi-member commands (HMGET, ZMSCORE, ZADD, HSET, HDEL),
// at most 1000 ids a call. The data hash keeps one permanent field ('~', a value longer than
// hash-max-listpack-value) so that Redis stores it as a real hash table, never as a listpack
// that every lookup would scan.
//
// Queue scripts take these KEYS, all in one hash-tag slot:
//   KEYS[1] due       ZSET id -> deadline (ms)
//   KEYS[2] inflight  ZSET id -> lease end (ms)
//   KEYS[3] data      HASH p:<id> payload/snapshot, m:<id> "attempt:deadline:owner"
//                     (only while claimed or retrying), e:<id> last error
//   KEYS[4] dead      STREAM dead letters
//   KEYS[5] done      ZSET id -> ack time; recently finished tracked keys, so the late
//                     `expired` notification of a key already handled is not mistaken
//                     for an untracked key (pruned by claim_due)
// untrack and adopt take only KEYS[1] due, KEYS[2] data, KEYS[3] the tracked key (adopt: see
// below, with more keys); track KEYS[1] due, KEYS[2] the tracked key, and KEYS[3] data only
// with a snapshot.
// A snapshot of a tracked key is stored as "<deadline>|<value>": one left over from an
// earlier incarnation of the key (other deadline) is ignored, so that a track without
// snapshot need not delete it.
// Pure data: thread-safe.
#pragma once

#include <string>
#include <vector>

namespace keywatch {

struct Script {
    const char *name;
    const char *body;
    bool key_script;  // KEYS = due, data, key (track: see above; else the five queue keys)
    // SHA-1 of the body, for EVALSHA; computed once.
    const std::string &sha() const;
};

namespace scripts {
// track        ARGV value deadline_ms [mode(''|NX|XX) snapshot(0|1)]; deadline_ms in plain
//              digits. Reply: the deadline as text, or -1 (NX/XX unmet), kPastMax.
extern const Script kTrack;
extern const Script kUntrack;  // ARGV delete(0|1)
// adopt        P due, P data [K due, K data] key...  ARGV snapshot(0|1) queues(1|2)
//              strict(0|1). Makes the queues agree with each key's TTL (PEXPIRETIME): P is
//              the rule's queue, K `keys` (given when P is another queue: a key tracked there
//              keeps its record and snapshot, only its score moves). Reply: one letter per key,
//              a adopted, r deadline moved, = unchanged (nothing written), u untracked (TTL
//              gone), n no TTL and not tracked, g gone (left to the claim or forget), x past
//              kMaxTimeMs, S adopted without snapshot (not a string). With a snapshot the
//              value is stored ("<deadline>|<value>") for keys of P. strict (one key, the
//              client's kw_client_adopt): the key's deadline, or -2 gone, -1 no TTL, kPastMax,
//              -3 a snapshot of a non-string, each with nothing written.
extern const Script kAdopt;
extern const Script kSchedule;    // ARGV id payload at_ms delay_ms mode(''|NX)
extern const Script kReschedule;  // ARGV id at_ms delay_ms
extern const Script kCancel;      // ARGV id
extern const Script kClaimDue;    // ARGV limit lease_ms owner is_keys done_window_ms
extern const Script kClaimLive;   // ARGV lease_ms owner mode(x: expired events|e) id...
extern const Script kForget;      // ARGV id...   (del events: untrack keys that are gone)
extern const Script kAck;         // ARGV owner is_keys id...
extern const Script kFail;        // ARGV owner is_keys id error reject max_attempts
                                  //      retry_base_ms retry_max_ms jitter(0..1)
                                  //      [retry_delay_ms: <0 or absent = the backoff]
extern const Script kRenew;       // ARGV owner lease_ms id...
extern const Script kRelease;     // ARGV owner id...  (claimed, not handled: due again)
extern const Script kReplay;      // ARGV entry_id('' = oldest first) limit
extern const Script kPurge;       // ARGV entry_id('' = all)
extern const Script kInspect;     // (no ARGV) -> {now, due, due_now, inflight, dead, oldest}

// The batch layout's scripts (scripts.cpp explains the layout). Their KEYS, in order:
//   claim_due   due inflight leases data done seq batch [stale batch keys...]
//               ARGV limit lease_ms owner seq is_keys done_window_ms flags('L': look at
//               leases, 'S': shared) n_stale stale_member... [engines channel
//               [own channel]]
//               -> {now, next_due|-1, next_lease|-2, live|-1, b, ids, runs(deadline count...),
//                   reclaimed(id deadline attempt error|false payload|false ...),
//                   extras(index attempt deadline error|false payload|false ...),
//                   stale members, untracked, moved, listeners|-1}
//               (next_due and the runs' deadlines as Redis's score text: see scripts.cpp)
//   claim_live  due inflight leases data done seq batch [pending batch...] event_key...
//               ARGV lease_ms owner seq mode(x|e) [engines channel [flags('S')
//               [n_pending [own channel]]]] (pending: the caller's claims sent before this
//               one, whose items count as taken)
//               -> {now, letters, items (as reclaimed), b, listeners|-1}
//   A batch of tracked keys is alone (b = -1: no inflight entries, no done records) when
//   the engines channel is given and at most one subscriber listens on it (this engine's;
//   design section 2.3) and, if the own channel (the caller's heartbeat channel, which its
//   subscriber subscribes after the engines channel) is given, that channel has a
//   subscriber (so the one listener is the caller); shared otherwise (b from seq).
//   ack         due inflight leases data done batch... ARGV owner is_keys
//               {seq b '*' | seq b 'i' n id...}... -> acked count per batch
//   fail        due inflight leases data dead done batch ARGV owner seq b is_keys id error
//               reject max_attempts retry_base_ms retry_max_ms jitter [retry_delay_ms]
//   release     due inflight leases data batch... ARGV owner {seq b '*' | seq b 'i' n id...}...
//   renew       leases ARGV lease_ms member... -> 1|0 per member
//   inspect     due inflight data dead done leases -> {now, due, due_now, dead, oldest,
//               v1_inflight, live members}
// The engine runs these. The version-1 claim_due, claim_live, ack, fail, renew, release and
// inspect above are what engines of the earlier version run: kept in kAll so that the ACL
// rule still grants their commands to a user such engines share during a rolling upgrade,
// and run by the tests that play such an engine.
namespace batch {
extern const Script kClaimDue, kClaimLive, kAck, kFail, kRelease, kRenew, kInspect;
}  // namespace batch

// What track, adopt, schedule and reschedule return, having written nothing, for a
// deadline later than kMaxTimeMs (core/base/time_limit.h).
constexpr long long kPastMax = -9;

// Every script, for SCRIPT LOAD at connect.
extern const Script *const kAll[];
extern const size_t kAllCount;

// The commands the scripts run (Redis checks each against the caller's ACL), upper case,
// sorted, read from the scripts themselves (redis.call and redis.pcall) so that a new one is
// granted and probed without anyone listing it; PUBSUB by subcommand ("PUBSUB|NUMSUB").
std::vector<std::string> commands();
}  // namespace scripts

// SHA1 of a script body as lower-case hex (what EVALSHA takes).
std::string script_sha1(const char *body);

}  // namespace keywatch
