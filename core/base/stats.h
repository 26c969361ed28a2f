// Statistics: the one table of every statistic an engine keeps (name, type, unit, help),
// what is generated from it (the name lookup, the JSON, the list in include/keywatch.h, which
// tests/stats_table_test.cpp checks and rewrites), and the cheap recorders: relaxed atomic
// counters and histograms with fixed buckets. A row whose name holds "<label>" is a labelled
// family (one sample per node, queue, handler or event name).
// Thread-safety: the table functions are pure; Histogram and EngineStats record and read
// from any thread (EngineStats::set_* only before the engine starts).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

// X(id, name, type, unit, help). Types: COUNTER (only grows), GAUGE (goes up and down),
// HISTOGRAM (count, sum and fixed buckets of observations). Rows are never renamed.
#define KW_STATS_TABLE(X)                                                                          \
    X(EVENTS_RECEIVED, "events.received", COUNTER, "events", "events read from Redis (all types)") \
    X(EVENTS_RECEIVED_BY_NAME, "events.received.<event>", COUNTER, "events",                       \
      "events read from Redis, per event name, e.g. events.received.expired")                      \
    X(EVENTS_DELIVERED, "events.delivered", COUNTER, "calls",                                      \
      "events handed to handlers whose calls returned (a batch of n events: n)")                   \
    X(EVENTS_DROPPED, "events.dropped", COUNTER, "events",                                         \
      "live events dropped because the dispatch queue was full")                                   \
    X(EVENTS_ABANDONED, "events.abandoned", COUNTER, "events",                                     \
      "events still queued when stop's deadline passed")                                           \
    X(EVENTS_SUPPRESSED, "events.suppressed", COUNTER, "events",                                   \
      "live expiry events of tracked keys another path handles")                                   \
    X(EVENTS_UNROUTED, "events.unrouted", COUNTER, "events",                                       \
      "cluster: live events dropped because no master was known for their slot and more "          \
      "than 100000 were waiting for one")                                                          \
    X(HANDLER_ERRORS, "handler.errors", COUNTER, "calls",                                          \
      "handler calls that returned RETRY or REJECT or an unknown code")                            \
    X(HANDLER_RETRIES, "handler.retries", COUNTER, "calls", "of those, RETRY")                     \
    X(HANDLER_CALLS_BY_HANDLER, "handler.calls.<handler>", COUNTER, "calls",                       \
      "events one handler's calls returned (a batch of n events: n); <handler> is its "            \
      "registration index, from 0")                                                                \
    X(HANDLER_ERRORS_BY_HANDLER, "handler.errors.<handler>", COUNTER, "calls",                     \
      "of those, the calls that returned RETRY or REJECT or an unknown code")                      \
    X(HANDLER_ACKED, "handler.acked.<handler>", COUNTER, "events",                                 \
      "events one handler acknowledged: returned ACK, or completed its hold with ACK")             \
    X(HANDLER_RETRIED, "handler.retried.<handler>", COUNTER, "events",                             \
      "events one handler asked to retry (returned RETRY, or completed its hold with RETRY)")      \
    X(HANDLER_REJECTED, "handler.rejected.<handler>", COUNTER, "events",                           \
      "events one handler rejected (REJECT or an unknown code, returned or through its hold)")     \
    X(HANDLER_PENDING, "handler.pending.<handler>", COUNTER, "calls",                              \
      "calls of one handler that held the event (kw_event_hold); the hold's result is counted "    \
      "in acked, retried or rejected when it completes (a hold released unfinished: in none)")     \
    X(HANDLER_DURATION, "handler.duration.<handler>", HISTOGRAM, "seconds",                        \
      "how long one handler's calls took, observed once per event (each event of a batch: the "    \
      "batch's call)")                                                                             \
    X(HANDLER_BATCHES, "handler.batches.<handler>", COUNTER, "calls",                              \
      "calls into one handler: one per handle_batch call (a plugin's batch of events), one per "   \
      "call of a handler that takes one event at a time; events per call = calls / batches")       \
    X(HANDLER_WAITING, "handler.waiting.<handler>", GAUGE, "events",                               \
      "events of one handler parked by its max_in_flight (a plugin's set_max_in_flight) until "    \
      "room frees up; no worker waits for them; 0 without a limit")                                \
    X(CONN_RECONNECTS, "conn.reconnects", COUNTER, "connections",                                  \
      "successful reconnects after a lost connection")                                             \
    X(CONN_STATE, "conn.state", GAUGE, "state",                                                    \
      "kw_conn_state of the subscriber (worst over all nodes)")                                    \
    X(CONN_NODES, "conn.nodes", GAUGE, "nodes",                                                    \
      "nodes subscribed to (1, or the masters of a cluster)")                                      \
    X(NODE_STATE, "node.state.<node>", GAUGE, "state",                                             \
      "kw_conn_state of one node's subscriber (\"host:port\" or socket path)")                     \
    X(NODE_RECONNECTS, "node.reconnects.<node>", COUNTER, "connections",                           \
      "successful reconnects to one node after a lost connection")                                 \
    X(NODE_RECEIVED, "node.received.<node>", COUNTER, "events",                                    \
      "events read from one node (all types)")                                                     \
    X(NODE_SWEEPING, "node.sweeping.<node>", GAUGE, "bool",                                        \
      "1 while one node's sweeper is connected and its claims work, else 0 (only when the "        \
      "engine serves queues)")                                                                     \
    X(TOPOLOGY_REFRESHES, "topology.refreshes", COUNTER, "refreshes",                              \
      "cluster topology reads that succeeded (periodic, and after a lost connection or MOVED)")    \
    X(CONN_SLOTS_UNCOVERED, "conn.slots_uncovered", GAUGE, "slots",                                \
      "cluster slots the last topology read gives no working master (a master down, its "          \
      "replica not promoted yet): their events cannot arrive; 0 when standalone")                  \
    X(DISPATCH_QUEUED, "dispatch.queued", GAUGE, "events", "events waiting for a worker now")      \
    X(ITEMS_CLAIMED, "items.claimed", COUNTER, "items",                                            \
      "tracked keys and tasks claimed by this engine")                                             \
    X(ITEMS_ACKED, "items.acked", COUNTER, "items", "of those, acknowledged")                      \
    X(ITEMS_RETRIED, "items.retried", COUNTER, "items", "of those, scheduled for a retry")         \
    X(ITEMS_DEAD, "items.dead", COUNTER, "items", "of those, moved to the dead-letter stream")     \
    X(ITEMS_LEASE_EXPIRED, "items.lease_expired", COUNTER, "items",                                \
      "claims of items whose previous holder's lease ran out")                                     \
    X(ITEMS_UNHANDLED, "items.unhandled", COUNTER, "items",                                        \
      "claimed items no handler's filter matched (acked)")                                         \
    X(ITEMS_LATE_ACKS, "items.late_acks", COUNTER, "items",                                        \
      "completions not written: the lease had passed to another holder, or "                       \
      "the item was released at hold.timeout")                                                     \
    X(ITEMS_RELEASED, "items.released", COUNTER, "items",                                          \
      "claimed items given back unhandled when the engine stopped")                                \
    X(QUEUE_ACKED, "queue.acked.<queue>", COUNTER, "items",                                        \
      "items of one queue (\"keys\" or a task queue) whose handlers all returned ACK")             \
    X(QUEUE_RETRIED, "queue.retried.<queue>", COUNTER, "items",                                    \
      "items of one queue a handler returned RETRY for (and none REJECT)")                         \
    X(QUEUE_REJECTED, "queue.rejected.<queue>", COUNTER, "items",                                  \
      "items of one queue a handler returned REJECT or an unknown code for")                       \
    X(QUEUE_CLAIMED, "queue.claimed.<queue>", COUNTER, "items",                                    \
      "items of one queue claimed by this engine (swept when due, or on their live event)")        \
    X(QUEUE_DEAD, "queue.dead.<queue>", COUNTER, "items",                                          \
      "items of one queue moved to its dead-letter stream")                                        \
    X(QUEUE_LEASE_EXPIRED, "queue.lease_expired.<queue>", COUNTER, "items",                        \
      "claims of items of one queue whose previous holder's lease ran out")                        \
    X(EXPIRY_LATENESS, "expiry.lateness.<queue>", HISTOGRAM, "seconds",                            \
      "handler start minus deadline of the first delivery of each tracked key or task of "         \
      "one queue (negative counts as 0)")                                                          \
    X(SWEEP_CALLS, "sweep.calls", COUNTER, "calls", "claim_due script calls")                      \
    X(LATENESS_MAX, "lateness.max_ms", GAUGE, "ms",                                                \
      "largest handler start minus deadline seen (tracked keys and tasks)")                        \
    X(ADOPT_ADOPTED, "adopt.adopted", COUNTER, "keys",                                             \
      "keys an adopt rule matches that adoption tracked (events and catch-up scans)")              \
    X(ADOPT_RESCHEDULED, "adopt.rescheduled", COUNTER, "keys",                                     \
      "tracked keys whose deadline adoption moved to their new TTL")                               \
    X(ADOPT_UNTRACKED, "adopt.untracked", COUNTER, "keys",                                         \
      "tracked keys adoption untracked because their TTL was removed")                             \
    X(ADOPT_LATE, "adopt.late", COUNTER, "keys",                                                   \
      "keys gone before their adoption after an event that could set a TTL (a TTL shorter than "   \
      "the adoption delay)")                                                                       \
    X(ADOPT_DROPPED, "adopt.dropped", COUNTER, "keys",                                             \
      "adoptions dropped (a catch-up scan follows): more than 100000 waited for the connection "   \
      "or, on a cluster, for their slot's master; a reply failed; their slot had no master")       \
    X(ADOPT_PARKED, "adopt.parked", GAUGE, "keys",                                                 \
      "cluster: adoptions refused because their slot moved, parked now to be sent again to the "   \
      "slot's master")                                                                             \
    X(ADOPT_RESENT, "adopt.resent", COUNTER, "keys",                                               \
      "cluster: parked adoptions sent again to their slot's master")                               \
    X(CATCHUP_SCANNING, "catchup.scanning.<node>", GAUGE, "bool",                                  \
      "1 while the catch-up scan for adopt rules reads one node, else 0 (only with adopt.rules)")  \
    X(CATCHUP_PROGRESS, "catchup.progress.<node>", GAUGE, "permille",                              \
      "how far the catch-up scan of one node is, 0 to 1000 (1000: done; only with adopt.rules)")   \
    X(CATCHUP_SCANS, "catchup.scans", COUNTER, "scans", "catch-up scans of a node completed")      \
    X(CATCHUP_KEYS, "catchup.keys", COUNTER, "keys",                                               \
      "keys the catch-up scans found that an adopt rule matches")                                  \
    X(PLUGIN_COUNTER, "plugin.<counter>", COUNTER, "count",                                        \
      "a plugin instance's own counter (host counter_add); <counter> is the instance's name, "     \
      "a dot and the counter's: plugin.stream.appended")

namespace keywatch {

enum class StatType { COUNTER, GAUGE, HISTOGRAM };

enum class StatId {
#define KW_STAT_ENUM_(id, name, type, unit, help) id,
    KW_STATS_TABLE(KW_STAT_ENUM_)
#undef KW_STAT_ENUM_
};

struct StatInfo {
    const char *name;  // "<label>" in it marks a labelled family
    StatType type;
    const char *unit;
    const char *help;
    const char *label;  // the placeholder's name ("queue"), "" for an unlabelled row
};

// The table, in its order.
const std::vector<StatInfo> &stat_table();
const StatInfo &stat_info(StatId id);
const char *stat_type_name(StatType type);  // "counter", "gauge", "histogram"
// The lookup: an unlabelled row's exact name, or a labelled row's name with the placeholder
// replaced by a label value ("events.received.expired"). False for anything else.
bool find_stat(std::string_view name, StatId *id, std::string *label_value);
// A sample's name as kw_engine_stat and the JSON spell it: the row's, placeholder filled.
std::string stat_sample_name(StatId id, const std::string &label_value);
// The list in include/keywatch.h's statistics comment, as generated from the table.
std::string stats_header_list();

// Fixed histogram buckets (upper bounds in seconds; a last bucket +Inf follows).
constexpr std::array<double, 15> kHistogramBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
constexpr size_t kHistogramBuckets = kHistogramBounds.size() + 1;

struct HistogramSnapshot {
    std::array<uint64_t, kHistogramBuckets> buckets{};  // per bucket (not cumulative)
    uint64_t count = 0;                                 // sum of buckets
    double sum = 0;                                     // seconds
};

// Observations in microseconds: one relaxed add to a bucket and one to the sum.
class Histogram {
  public:
    void observe_us(int64_t us);
    HistogramSnapshot snapshot() const;

  private:
    std::array<std::atomic<uint64_t>, kHistogramBuckets> buckets_{};
    std::atomic<int64_t> sum_us_{0};
};

// One sample of a snapshot: a row, its label value ("" if unlabelled), its value (a
// histogram's: its count) and, for a histogram, the buckets.
struct StatSample {
    StatId id;
    std::string label;
    int64_t value = 0;
    HistogramSnapshot histogram;
};

// Every sample as one JSON object: "name": value, a histogram as
// {"count": n, "sum": seconds, "buckets": [[upper bound, cumulative count], ..., ["+Inf", n]]}.
std::string stats_json(const std::vector<StatSample> &samples);

// One node's samples (node.*). The node's parts record into it: the engine its state, its
// intake what it read, its sweeper whether it sweeps. Atomics: any thread.
struct NodeStats {
    std::atomic<int64_t> state{0}, reconnects{0}, received{0}, sweeping{0};
    std::atomic<int64_t> catchup_scanning{0}, catchup_progress{0};  // its AdoptScan's
    bool has_sweeper = false;  // node.sweeping is sampled only when the engine serves queues
    bool has_catchup = false;  // catchup.* are sampled only when the engine adopts keys
};

// One queue's samples (queue.*, expiry.lateness). Atomics: any thread.
struct QueueStats {
    std::atomic<int64_t> claimed{0}, acked{0}, retried{0}, rejected{0}, dead{0}, lease_expired{0};
    Histogram lateness;
};

// The labelled statistics of one engine: per node, per queue and per handler. Queues and
// handlers are fixed before start (so recording takes no lock); nodes come and go with the
// topology (rare: the map is under a mutex, each record's atomics are not): a node the
// cluster no longer lists as a master leaves the snapshot.
class EngineStats {
  public:
    void set_handlers(size_t count);
    void set_queues(const std::vector<std::string> &queues);

    // A handler call returned `result` after `duration_us`. Worker threads.
    void handler_done(size_t handler, int result, int64_t duration_us);
    // One call into a handler (a batch, or one event). Worker threads.
    void handler_batch(size_t handler);
    // A handler's result for one event: returned, or its hold completed. Any thread.
    void handler_result(size_t handler, int result);
    // An item of `queue` was handled with the combined result. Worker threads.
    void queue_done(const std::string &queue, int result);
    // First delivery of a tracked key or task, `late_ms` after its deadline.
    void lateness(const std::string &queue, int64_t late_ms);
    // A served queue's record (null for a queue not served): fixed after start.
    QueueStats *queue(const std::string &name) const;

    // A node joins (its record, new; one of the same name is replaced) or leaves the
    // snapshot. Loop thread.
    std::shared_ptr<NodeStats> add_node(const std::string &node, bool has_sweeper,
                                        bool has_catchup = false);
    void drop_node(const std::string &node);
    // A node's subscriber changed state (a reconnect if it was READY before). Nodes not
    // listed (dropped) are ignored. Loop thread.
    void node_state(const std::string &node, int state, bool reconnect);
    // conn.nodes: the nodes listed; conn.state: the worst of their states (broken, then
    // connecting, then disconnected; ready only if all are; none: disconnected).
    int64_t node_count() const;
    int64_t worst_state() const;

    // The samples: nodes always; queues and handlers only with `fixed` (set_handlers and
    // set_queues are done: before that another thread must not walk their containers).
    void append(std::vector<StatSample> *out, bool fixed) const;

  private:
    struct PerHandler {
        std::atomic<int64_t> calls{0}, errors{0}, acked{0}, retried{0}, rejected{0}, pending{0},
            batches{0};
        Histogram duration;
    };

    std::vector<std::unique_ptr<PerHandler>> handlers_;
    std::map<std::string, std::unique_ptr<QueueStats>> queues_;
    mutable std::mutex node_mu_;
    std::map<std::string, std::shared_ptr<NodeStats>> nodes_;
};

}  // namespace keywatch
