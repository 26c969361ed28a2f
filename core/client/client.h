// Client: the blocking producer/admin side (track, schedule, inspect, dead letters): checks
// what it is given, builds the queue scripts' calls, decodes their replies, pipelines them,
// and reads Redis's clock per node. Its ClusterRouter (core/client/cluster_router.h) takes
// each call to Redis: to a standalone server, or in a Redis Cluster to the master of the
// item's slot (following MOVED/ASK, waiting out TRYAGAIN/CLUSTERDOWN/LOADING, EVAL on
// NOSCRIPT).
// Not thread-safe: one client per thread.
#pragma once

#include <hiredis/hiredis.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/client/cluster_router.h"
#include "core/config/config.h"
#include "core/queue/queue_keys.h"
#include "core/queue/scripts.h"
#include "core/redis/endpoint.h"

namespace keywatch {

// What Client::inspect reads: one queue's figures (on one master, or summed).
struct QueueFigures {
    std::string queue;
    int64_t due = 0;                 // items waiting, due or not
    int64_t due_now = 0;             // of those, past their deadline
    int64_t inflight = 0;            // claimed by an engine, not yet acked
    int64_t dead = 0;                // entries in its dead-letter stream
    int64_t oldest_overdue_ms = -1;  // age of the oldest due-now deadline; -1: none due now
    void add(const QueueFigures &o);
};

// One master's share of the queues (standalone: the one server).
struct NodeFigures {
    std::string node;  // "host:port" or socket path
    bool reachable = true;
    std::vector<QueueFigures> queues;  // only queues holding anything there, by name
};

// A master or shard whose queues could not be read.
struct UnreadNode {
    std::string node;
    int64_t slots = 0;  // hash slots it holds (16384 for a standalone server)
    std::string error;  // why
};

// Client::inspect's result; kw_client_inspect_json documents each field.
struct Inspection {
    int64_t now_ms = 0;  // Redis's clock when read
    bool cluster = false;
    int64_t unread_slots = 0;  // 0 when complete
    std::vector<UnreadNode> unreachable;
    std::vector<std::pair<int, int>> unassigned;  // slot ranges no shard holds (unread)
    std::vector<QueueFigures> queues;             // summed over the masters, sorted by name
    std::vector<NodeFigures> nodes;
    bool complete() const { return unread_slots == 0; }
};

// One dead letter, as the queue scripts wrote it to the dead-letter stream.
struct DeadLetter {
    std::string entry;     // stream entry id "<ms>-<seq>"
    std::string slot_tag;  // cluster: the hash tag of the slot's stream; "" standalone
    std::string id;        // the item: tracked key or task id (bytes)
    int64_t attempts = 0, deadline_ms = 0, failed_ms = 0;
    std::string error;  // the handler's last reason (bytes)
    bool has_payload = false;
    std::string payload;  // task payload or snapshot value (bytes)
    // Fields this release does not know, in stream order (name, value bytes).
    std::vector<std::pair<std::string, std::string>> other;
};

// A dead letter's cursor: "<ms>-<seq>", on a cluster followed by "@<slot tag>" (the streams
// of different slots may hold the same entry id). A page's `after`, and the entry that
// dead_replay and dead_purge take: with the tag they act on that slot's stream only.
std::string dead_letter_cursor(const DeadLetter &d);

// The router's slice of a Config: seeds (with the overrides), mode and timeouts. (Here, not
// in core/engine/config_slices.h: the client layer comes before the engine's.)
RouterOptions router_options(const Config &c);

class Client {
  public:
    explicit Client(Config config);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    // Connects (and, on a Redis Cluster, reads the topology). Also done lazily by every
    // call after a failure.
    int connect();

    int track(std::string_view key, std::string_view value, int64_t ttl_ms, int flags,
              int64_t *deadline);
    int untrack(const std::string &key, bool delete_key);
    int adopt(const std::string &key, int flags, int64_t *deadline);
    int schedule(const std::string &queue, const std::string &id, const std::string &payload,
                 int64_t at_ms, int64_t delay_ms, int flags, int64_t *at_out);
    int cancel(const std::string &queue, const std::string &id);
    int reschedule(const std::string &queue, const std::string &id, int64_t at_ms, int64_t delay_ms,
                   int64_t *at_out);

    int pipeline_begin();
    // Sends the queued calls: each one's status into *statuses and, when errors is not
    // null, each one's message into *errors ("" for a call that succeeded).
    int pipeline_end(std::vector<int> *statuses, std::vector<std::string> *errors = nullptr);

    // Producer results are outputs of the calls above; admin results are these structs
    // (JSON is made at the C API's edge, capi/keywatch.cpp).
    int inspect(Inspection *out);
    // Oldest first over every slot's stream (by entry id, then slot tag), at most
    // max(limit, 1); with after (a page's cursor: the last entry's id "<ms>-<seq>", on a
    // cluster followed by "@<slot tag>"), only the entries after it.
    int dead_list(const std::string &queue, size_t limit, std::vector<DeadLetter> *out,
                  const std::string &after = "");
    // entry: "" (the oldest `limit`), or a cursor (dead_letter_cursor); KW_ERR_INVALID_ARG
    // for other text.
    int dead_replay(const std::string &queue, const std::string &entry, size_t limit,
                    int64_t *count);
    int dead_purge(const std::string &queue, const std::string &entry, int64_t *count);

    // One command for `key`, on its slot's master in a cluster (the plugin host's "Redis
    // command routed by key"): follows MOVED/ASK and waits out TRYAGAIN/CLUSTERDOWN like
    // every script call. A Redis error reply is returned as the reply (classify() gives
    // its kind); null with last_error() when no reply could be had.
    ReplyPtr command_for_key(const std::string &key, std::vector<std::string> args);
    // The same for any command, routed by its own first key (first_key_index; a command
    // without a key goes to slot 0's master). KW_OK with *reply set, which may be the
    // command's own error reply; else a status with last_error() and *reply null. args by
    // value: a caller that moves them in (the plugin host's batches) copies nothing.
    int command(std::vector<std::string> args, ReplyPtr *reply);
    // Many commands, each routed like `command` by its own first key, through
    // ClusterRouter::exec_all (pipelined per node, all nodes at once, redirects per
    // command): (*out)[i] is cmds[i]'s outcome. Every command has an argument.
    void commands(std::vector<std::vector<std::string>> &&cmds,
                  std::vector<ClusterRouter::Outcome> *out);
    // Index in args of a command's first key: 3 for EVAL/EVALSHA/FCALL (and _RO) with
    // numkeys > 0, else 1; 0 when the command has no key (any master serves it).
    static size_t first_key_index(const std::vector<std::string> &args);

    const std::string &last_error() const { return error_; }
    bool is_cluster() const { return router_.cluster(); }

  private:
    // How a script's reply becomes a status (and outputs).
    using Decode = std::function<int(const redisReply *)>;
    // One script call: its queue keys live in the slot of `id` (the tracked key or the
    // task id); in standalone mode in the fixed tag. Routed by router_; decoded here.
    struct Call : ClusterRouter::Call {
        Decode decode;
    };
    // A queue instance: (name, tag) on a node.
    struct QueueRef {
        Endpoint node;
        std::string name, tag;
    };

    int fail(int status, const std::string &msg);
    // A router result: on failure, its message becomes last_error().
    int routed(int status);
    ReplyPtr routed(ReplyPtr reply);
    int check_key(std::string_view key);
    int check_value(std::string_view value, const char *what);
    int check_queue(const std::string &queue);
    // schedule/reschedule's at_ms and delay_ms: not negative, within kMaxTimeMs.
    int check_when(const char *what, int64_t at_ms, int64_t delay_ms);
    // A script refused a deadline past kMaxTimeMs (scripts::kPastMax).
    int fail_past_max(const char *what);
    // Runs (or, in a pipeline, queues) a script on the queue `name` of the item `id`.
    // `slot`: the id's slot if known (cluster), else -1.
    int run(const Script &s, const std::string &name, const std::string &id, const std::string *key,
            std::vector<std::string> &&argv, Decode decode, int slot = -1);
    // Inside a pipeline: sends c on its node's connection; its reply is read at the end.
    void queue_in_pipeline(Call &&c);
    // The pipeline's next call to fill, a slot of pipeline_ kept from earlier pipelines with
    // its strings' storage (a pipelined track allocates nothing once warm).
    Call &pipeline_slot();
    // Sends the pipeline's call c on its node's connection (c.node reset: sent at the end).
    void send_queued(Call &c);
    // After pipeline_end: what pipeline_ keeps for the next one (kKeptCalls slots, no large
    // argument's storage).
    void trim_pipeline(size_t used);
    // track's reply: its deadline into *deadline, or the status of a refusal (flags: NX/XX).
    int track_reply(const redisReply *r, int flags, int64_t *deadline);
    int finish(Call &call, ReplyPtr reply);
    // A plain command (no script fallback) for the master of key's slot ("" or
    // standalone: slot 0), as command, command_for_key and commands route it.
    Call plain_call(const std::string &key, std::vector<std::string> &&args);
    Call script_call(const Script &s, const std::string &name, const std::string &tag, int slot,
                     const std::string *key, std::vector<std::string> &&argv);
    // Makes c (reusing its storage) a call of s in slot `slot` with argc args: EVALSHA and
    // the sha set, the rest left to the caller.
    void call_head(Call &c, const Script &s, int slot, size_t argc);
    // Makes c (reusing its storage) a call of s on the queue q in slot `slot`: args EVALSHA
    // sha nkeys, the keys (key scripts: due, data, key), then `argc` arguments left for the
    // caller to fill from the returned index on.
    size_t script_args(Call &c, const Script &s, const QueueKeys &q, int slot, std::string_view key,
                       size_t argc);
    // The `keys` queue of a slot (standalone: its one queue), without building a string.
    const QueueKeys &keys_queue(int slot);
    Call queue_call(const Script &s, const QueueRef &ref, const std::vector<std::string> &argv);
    // router_.call and router_.exec, their failure's message into error_.
    ReplyPtr call(const Endpoint &node, const std::vector<std::string> &args);
    ReplyPtr exec(Call &call);
    // The queue instances on every master (SCAN). A master that cannot be scanned is
    // left out; with `unreachable`, it is recorded there with the reason.
    std::vector<QueueRef> find_queues(const std::string &part, const std::string &only_name,
                                      std::map<std::string, std::string> *unreachable = nullptr);
    // dead_list's streams of a queue: find_queues's, kept for kDeadStreamsTtl so that a
    // dashboard polling a page does not SCAN every master each time (a stream of a slot
    // that had none shows after at most that long; an empty finding is never kept).
    const std::vector<QueueRef> &dead_streams(const std::string &queue);
    // inspect: the masters and shards whose queues could not be read.
    void unread_nodes(const std::map<std::string, std::string> &unreachable, Inspection *out) const;
    // inspect: reads the figures of each queue instance into per_node; a master that
    // refuses or cannot be reached is added to unreachable and its instances skipped, one
    // in a slot that no master serves is skipped (unread_nodes counts it). KW_OK, or the
    // status of a failure that reading elsewhere cannot get round (a refused password).
    // Both maps are keyed by the node's name (Endpoint::str()).
    int read_figures(const std::vector<QueueRef> &refs,
                     std::map<std::string, std::string> *unreachable,
                     std::map<std::string, std::map<std::string, QueueFigures>> *per_node,
                     int64_t *now);
    const QueueKeys &queue_keys(const std::string &name, const std::string &tag);
    // Redis's clock on a node (empty: none serves the slot now), estimated from an offset to
    // the local steady clock that is measured with TIME at most once a second (never inside
    // a pipeline: pipeline_begin refreshes the offsets first).
    int redis_now(const std::optional<Endpoint> &node, int64_t *now_ms);
    int sync_clock(const Endpoint &node);

    Config config_;                                // what the operations read (ns, limits, queues)
    ClusterRouter router_;                         // its slice of config_: router_options
    std::map<std::string, QueueKeys> keys_cache_;  // "<queue>/<tag>" -> its keys
    // The `keys` queue's keys per slot (standalone: [0]), pointing into keys_cache_.
    std::vector<const QueueKeys *> keys_queue_by_slot_;
    struct FoundStreams {
        int64_t at_ms = 0;  // steady clock
        std::vector<QueueRef> refs;
    };
    std::map<std::string, FoundStreams> dead_streams_;  // dead_streams's, by queue
    std::vector<const char *> argv_scratch_;            // argv and lengths for hiredis, reused
    std::vector<size_t> lens_scratch_;
    std::string error_;
    bool pipelining_ = false;
    std::vector<Call> pipeline_;  // [0, queued_): this pipeline's calls; the rest kept
    size_t queued_ = 0;
    struct ClockOffset {
        int64_t offset_ms;  // Redis ms minus local steady ms
        int64_t synced_at;  // local steady ms
    };
    std::map<Endpoint, ClockOffset> clocks_;
};

}  // namespace keywatch
