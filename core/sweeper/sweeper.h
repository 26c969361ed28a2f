// Sweeper: the reliable-delivery side of one Redis node, on the event loop. Over its own
// command connection it
//  - sweeps each served queue (claim_due) at the earliest known deadline, or after
//    sweep.interval when nothing is known to be due, claiming no more than the dispatch
//    queue has room for (tracked items wait safely in Redis instead);
//  - claims the live `expired`/`evicted` events of tracked keys (claim_live), so exactly
//    one instance gets each, and passes the rest on as untracked events;
//  - forgets tracked keys deleted outside keywatch (`del` events);
//  - acks, retries or dead-letters what handlers finished, and renews the leases of the
//    items this engine holds (claimed, not completed: queued, running or held) every
//    lease/3, up to hold.timeout after their claim (then releases them for redelivery);
//  - de-duplicates untracked live events across instances when asked (SET NX PX).
//  - adopts keys adopt rules match (Adoption, adoption.h) and finds those whose TTL was set
//    unheard with a catch-up scan (AdoptScan, adopt_scan.h) once the node's subscriber is
//    subscribed: at start, after either connection came back and after dropped adoptions.
// While the server cannot serve (-LOADING, or -CLUSTERDOWN for the whole cluster) all of
// this waits and one command every kPollMs tells when it can (NodeLink). A lost connection
// is re-made with capped backoff, cut short while completions wait and their leases run
// out, and ended at once by retry_now() when another connection to the node succeeded.
// Cost while idle: standalone, one claim_due call per served queue per sweep.interval,
// whatever the number of items not yet due.
//
// On a Redis Cluster (Options::cluster) a queue lives in the slot of its items: one
// instance of it per hash tag (`<ns>:<queue>:{<tag>}:due`, see slots.h). The sweeper of a
// master learns which of its slots hold queue items from keyspace notifications on those
// due keys (touched()) and from a SCAN every sweep.scan_interval (and after every
// connect), and sweeps each such slot queue at its own earliest deadline: an empty slot
// queue costs nothing. A slot that moved away (MOVED) is dropped and on_moved() asks for a
// topology refresh; a slot migrating in (its keys restored here, the importing master
// answering MOVED until the migration ends) is swept again until it is served here, for at
// most cluster.migration_wait; a slot the topology shows handed over to this master is
// taken over with its queues (take_over(), ClusterArrivals).
// The class is made of parts that own their state, each given references to the parts it
// uses and narrow functions back (called per reply or batch, never per item), none seeing
// another's fields: SlotQueues (slot_queues.h: the slot queues served; per-queue state in
// slot_queue.h), NodeLink (node_link.h: the connection, reconnects, every command sent, a
// server that cannot serve for now), LeaseRenewal (lease_renewal.h: renewal,
// hold.timeout), CompletionBatches (completion_batches.h: completions in batches until
// Redis confirms them), ClusterArrivals (cluster_arrivals.h: redirects, keyspace touches,
// scan and peek). Sweeper keeps the lifecycle and the claims: sweeper.cpp (construction,
// start and stop, the connection's hooks), sweeper_due.cpp (due-claim scheduling),
// sweeper_live.cpp (live claims, forget, dedupe).
// Loop thread only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/backoff.h"
#include "core/queue/adopt_rules.h"
#include "core/sweeper/adopt_scan.h"
#include "core/sweeper/adoption.h"
#include "core/sweeper/cluster_arrivals.h"
#include "core/sweeper/completion_batches.h"
#include "core/sweeper/completion_store.h"
#include "core/base/event.h"
#include "core/redis/event_loop.h"
#include "core/base/log_fields.h"
#include "core/queue/queue_keys.h"
#include "core/redis/redis_conn.h"
#include "core/queue/scripts.h"
#include "core/base/stats.h"
#include "core/sweeper/lease_renewal.h"
#include "core/sweeper/node_link.h"
#include "core/sweeper/slot_queue.h"
#include "core/sweeper/slot_queues.h"
#include "core/sweeper/sweeper_counters.h"
#include "core/sweeper/v1_engines.h"

namespace keywatch {

// Where a Sweeper hands what it claimed: its node's intake (node_intake.h).
class SweeperSink {
  public:
    virtual ~SweeperSink() = default;
    // Claimed items: must be queued for the workers (never dropped).
    virtual void deliver_tracked(std::vector<Event> &items) = 0;
    // Untracked live events: may be dropped when the workers are behind.
    virtual void deliver_untracked(std::vector<Event> &events) = 0;
    virtual size_t dispatch_room() const = 0;
    // Live expiry events not asked about because the workers have no room for what they
    // might claim: counted as dropped (a tracked key among them stays due in Redis and is
    // swept once there is room).
    virtual void shed_live(size_t count) = 0;
    // A log line; fields name the queue it is about, if one (log_fields.h).
    virtual void log(kw_log_level level, const std::string &message, const LogFields &fields) = 0;
};

class Sweeper {
  public:
    struct Options {
        std::string ns, tag = kStandaloneTag, owner;
        bool track_keys = true;
        std::vector<std::string> task_queues;
        int64_t lease_ms, retry_base_ms, retry_max_ms;
        int64_t hold_timeout_ms;  // hold.timeout: lease renewals end this long after the claim
        int64_t max_attempts, batch, interval_ms, done_window_ms;
        // The engines channel its claims count listeners on (queue.done_mode=auto); empty:
        // every claim is shared (keeps done records).
        std::string engines_channel;
        // Whether this node's subscriber is subscribed now, so that the one listener a
        // claim may count is this engine (null or false: claims are shared).
        std::function<bool()> subscribed;
        // This node's subscriber's heartbeat channel, which it subscribes after the engines
        // channel: a claim is alone only if that channel has a subscriber when it runs (the
        // one listener is then this engine, not another one while ours is away).
        std::string own_channel;
        bool dedupe;
        int64_t dedupe_ttl_ms;
        int64_t connect_timeout_ms;
        Backoff reconnect;
        const std::string *node_name = nullptr;  // as Subscriber::Options::node_name
        // Where it records per queue (claimed, dead, lease_expired) and whether it sweeps
        // (node.sweeping); null: nowhere.
        const EngineStats *stats = nullptr;
        NodeStats *node_stats = nullptr;
        bool cluster = false;
        // Cluster: full SCAN for queue keys; both: how often to look for engines of the
        // earlier version (v1_engines.h)
        int64_t scan_interval_ms;
        int64_t migration_wait_ms;       // cluster: how long Where::Arriving lasts
        std::function<void()> on_moved;  // cluster: a slot is served elsewhere now
        // Cluster: completions refused with MOVED (their slot is served elsewhere now), to
        // be routed to the slot's new master while their lease lasts. Null: retried here.
        std::function<void(std::vector<Completion> &&)> on_redirect;
        // Cluster: live events whose claim was refused because their slot is on the move
        // (MOVED, ASK, TRYAGAIN, CLUSTERDOWN), to be asked of the slot's master later.
        std::function<void(std::vector<Event> &&)> on_unrouted_live;
        AdoptRules adopt;  // adopt rules (empty: none)
        // Events subscribed only for the queues' bookkeeping (tracking, adoption; no handler
        // takes them): the intake never dispatches them (Demand::bookkeeping_events).
        std::vector<std::string> bookkeeping_events;
        // Cluster: keys whose adoption met MOVED/ASK/TRYAGAIN (nothing written),
        // to be adopted on the slot's master later (null: dropped, counted, rescanned).
        std::function<void(std::vector<AdoptKey> &&)> on_unrouted_adopt;
        // The catch-up scan of adopt rules (adopt_scan.h): catchup.enable/count/rate, where
        // it counts (null: nowhere), and the reason its first scan gives.
        bool catchup_enable = true;
        int64_t catchup_count = 1000, catchup_rate = 250000;
        CatchupCounters *catchup_counters = nullptr;
        std::string catchup_first_reason = "engine start";
        // Claims on their way from all the engine's sweepers (one counter they share on
        // the loop thread; null: this sweeper's own).
        int *claims_in_flight = nullptr;
        // The connection was made (or re-made) and the server answered on it: evidence that
        // the node is back, for the node's other connections (null: none told).
        std::function<void()> on_connected;
        // Sentinel: a READONLY reply (the master was demoted): ask where it is now.
        std::function<void()> on_readonly;
    };

    Sweeper(EventLoop &loop, RedisUrl url, Options opts, SweeperSink *sink,
            SweeperCounters *counters);
    ~Sweeper();
    Sweeper(const Sweeper &) = delete;
    Sweeper &operator=(const Sweeper &) = delete;

    void start();
    // Evidence that the node is back (another connection to it succeeded): a reconnect
    // waiting out its backoff after a failure that was not permanent starts now.
    void retry_now();
    void stop_claiming();  // no new sweeps or live claims; acks still go out
    void shutdown();       // close the connection; nothing follows
    // Replies still awaited and completions Redis has not confirmed yet: the owner waits
    // for 0 before shutdown.
    size_t outstanding() const { return link_.outstanding() + completions_.size(); }
    // Every completion not confirmed yet, taken out (this node is retired: the owner
    // routes them to the slots' new masters).
    std::vector<Completion> take_completions() { return completions_.take_all(); }

    void claim_live(std::vector<Event> &&events);  // expired/evicted on the tracked db
    void forget(std::vector<std::string> &&keys);  // del events on the tracked db
    void untracked(std::vector<Event> &&events);   // other live events (dedupe if on)
    // Keys whose TTL an event may have set, moved or removed (rule index each), or that a
    // catch-up scan found: one adopt call per chunk per slot queue, sent now (adoption.h).
    // answered (optional) runs once every call for them is answered, kept or dropped.
    void adopt(std::vector<AdoptKey> &&keys, Adoption::Answered answered = {});
    const AdoptRules &adopt_rules() const { return opts_.adopt; }
    // Keys may have had their TTL set unheard (the subscriber reconnected): a catch-up scan
    // of the node from the start, once its subscriber is subscribed and it serves.
    void adoption_rescan(const std::string &reason) { catchup_.request(reason); }
    // Adoptions waiting for the connection, taken out (the node is retired).
    std::vector<AdoptKey> take_adoptions() { return adoption_.take_waiting(); }
    const std::vector<std::string> &bookkeeping_events() const { return opts_.bookkeeping_events; }
    void complete(std::vector<Completion> &&done);
    // Whether this sweeper holds the item `c` completes, from the claim `c` comes from (a
    // completion goes first to the sweeper that claimed it: only it knows the claim's
    // batch, which the completion must name wherever the slot is served now).
    bool holds(const Completion &c);
    // Cluster: a keyspace notification on a due key of this node (one of kArrivalEvents:
    // new items, a slot migrated in): sweep that slot queue soon.
    void touched(const std::string &due_key, const std::string &event) {
        arrivals_.touched(due_key, event);
    }
    // Cluster: the slot queues it knows in `slots` (indexed by slot), for a slot's new
    // master when the topology shows the slot moved.
    std::vector<SlotQueueName> queues_in(const std::vector<bool> &slots) const {
        return arrivals_.queues_in(slots);
    }
    // Cluster: the topology shows this master serving `slots` (indexed by slot) that another
    // served before. Its queues there that it gave up (MOVED) and those the old master knew
    // (`known`) are swept now, and again, backing off, while it still answers MOVED.
    void take_over(const std::vector<bool> &slots, const std::vector<SlotQueueName> &known) {
        arrivals_.take_over(slots, known);
    }

  private:
    using Queue = SlotQueue;
    using Where = SlotQueue::Where;
    using ReplyFn = std::function<void(redisReply *)>;

    // --- sweeper.cpp: the connection's hooks ---
    // Connected, or loaded: every queue swept, what waited sent (NodeLink::Hooks::ready).
    void resume();
    // The connection went: what was on its way is dropped or waits (NodeLink::Hooks::lost).
    void on_lost();

    // --- sweeper_due.cpp: due-claim scheduling ---
    void sweep(Queue &q);
    // The reply of a claim_due call: the items claimed, and when to sweep next.
    void on_swept(Queue &q, redisReply *r, int64_t limit, uint64_t seq);
    void on_claimed(Queue &q, const std::vector<ClaimedItem> &items, uint64_t seq);
    // After a claim_due answer: the live events deferred while claims were on their way
    // are claimed live (those about items claimed since are suppressed as ours), unless
    // (standalone) they still wait for the sweeps (waits_for_sweeps).
    void release_deferred(Queue &q);
    // Standalone: whether a live `expired` event received at since_ms waits for the claims
    // of q on their way rather than being claimed live: they take due items (a deadline's
    // sweep, or a burst), and it has waited less than kDeferMaxMs and half of
    // track.done_window.
    bool waits_for_sweeps(const Queue &q, int64_t now, int64_t since_ms) const {
        return q.sweeping() && q.due_now(now) &&
               now - since_ms < std::min(kDeferMaxMs, opts_.done_window_ms / 2);
    }
    // Claims of one slot queue on their way at once while they come back full (a burst).
    static constexpr size_t kSweepsInFlight = 4;
    // The longest a live `expired` event waits for the sweeps of a burst (standalone): at
    // most this, and at most half of track.done_window (waits_for_sweeps()), so that a key
    // handled meanwhile is still recognised when the event is looked at.
    static constexpr int64_t kDeferMaxMs = 5000;
    // A claimed item of batch `seq` becomes ours (held) and an event.
    Event hold(Queue &q, const ClaimedItem &item, const Event *live, uint64_t seq);
    // The next claim batch's seq: unique in this process, so unique per owner.
    static uint64_t next_batch_seq();
    // Whether the next claim of q looks at leases ('L'): a run-out lease is named, one it
    // knows of may have run out, or it has not looked for kLookAtLeasesMs.
    static bool must_look(const Queue &q, int64_t now);
    // The claim flag 'S' when claims must be shared now (our subscriber is away, another
    // engine listened within track.done_window, or one of the earlier version may be
    // subscribed), else "".
    std::string shared_flag() const;
    // A claim saw `listeners` on the engines channel.
    void saw_listeners(int64_t listeners);
    Event make_event(const Queue &q, const ClaimedItem &item, const Event *live);
    // Items claimed after stop_claiming(): given back at once.
    void give_back(const Queue &q, const std::vector<Event> &items);
    // The batches of claims whose answer was lost, if Redis made them alone ones (b = -1,
    // nothing else knows them before their lease ends): released, so that the next claim
    // takes them at once. A shared one (b unknown) waits for its lease.
    void take_back_unanswered(Queue &q);
    // A claim of q failed (NOPERM, BUSY, a slot no master serves, ...; LOADING and a whole
    // cluster down are server_waits()'s): back off, and say so at most every
    // kClaimWarningMs; claims_work() says when they work again.
    void claims_failing(Queue &q, const redisReply *r);
    void claims_work(Queue &q);
    // Whether completions wait for the claims on their way (CompletionBatches' "deliveries
    // first"): while the engine claims and some claim of it is unanswered, except the
    // pipelined claims of a standalone burst (pipelined()).
    bool acks_wait_for_claims() const;
    // Standalone: some queue's claims come back full and more are on their way (a burst or
    // a backlog, swept by up to kSweepsInFlight claims at once). Redis always has one of
    // them queued, so an ack sent meanwhile takes only its own turn behind them; held, the
    // acks of a whole backlog would pile up and go out after its last claim.
    bool pipelined() const;
    // A claim script went out / was answered (see Options::claims_in_flight).
    void claim_sent();
    void claim_answered();
    // node.sweeping: connected, claiming, and the claims work.
    void set_sweeping(bool on);
    // A line to the sink, with the queue's name as its `queue` field when one is given.
    void log(kw_log_level level, const std::string &message, const Queue *q = nullptr);
    // log() as the parts take it.
    QueueLog queue_log();

    // --- sweeper_live.cpp: live claims ---
    void send_live(Queue &q, std::vector<Event> &&events);
    void on_live_claimed(Queue &q, std::vector<Event> &events, redisReply *r, uint64_t seq);
    // Drops (and counts, see SweeperSink::shed_live) the live events the workers have no
    // room for.
    void shed_beyond_room(std::map<SlotQueue *, std::vector<Event>> &ask);
    // Counts `n` events into a live claim while it is on its way.
    struct LiveAsk {
        LiveAsk(std::shared_ptr<size_t> c, size_t n) : count(std::move(c)), n(n) { *count += n; }
        ~LiveAsk() { *count -= n; }
        LiveAsk(const LiveAsk &) = delete;
        LiveAsk &operator=(const LiveAsk &) = delete;
        std::shared_ptr<size_t> count;
        size_t n;
    };
    // The key queue a key's items live in: its adopt rule's queue, else `keys`.
    const std::string &key_queue(const std::string &key) const;
    // A live event that must wait for the connection (bounded: kMaxBacklog).
    void keep_for_later(Event &&ev);

    Options opts_;
    SweeperSink *sink_;
    SweeperCounters *counters_;
    NodeLink link_;
    SlotQueues queues_;
    LeaseRenewal leases_;
    CompletionBatches completions_;
    ClusterArrivals arrivals_;
    V1Engines v1_engines_;  // asked only when claims may be alone (engines_channel set)
    Adoption adoption_;
    AdoptScan catchup_;
    bool claiming_ = false;
    bool started_ = false;             // start() was called (before it, live claims wait)
    std::vector<Event> live_backlog_;  // live claims waiting for the connection
    int claims_out_ = 0;               // this sweeper's claims on their way
    // Until when (local clock) claims are shared whatever the listeners: track.done_window
    // after a claim saw another engine listening (one that reconnects is not counted).
    int64_t shared_until_ms_ = 0;
    // Live events in claim_live calls on their way: what they may add to the dispatch
    // queue (see claim_live). Kept by LiveAsk's lifetime, whatever becomes of the call.
    std::shared_ptr<size_t> live_asking_ = std::make_shared<size_t>(0);
    int own_claims_in_flight_ = 0;                    // when Options::claims_in_flight is null
    std::optional<int64_t> claims_failing_since_ms_;  // set while claims fail
    int64_t claim_warned_ms_ = 0;                     // when failing claims were last reported
};

}  // namespace keywatch
