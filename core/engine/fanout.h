// Fanout: an engine's nodes and the cluster's topology. A node is a Redis server the
// engine must hear: the single server in standalone mode, every master of a Redis Cluster
// in cluster mode (keyspace notifications are node-local and never cross the cluster
// bus). Per node a Subscriber, the node's claim intake (NodeIntake, which the subscriber
// hands its events to) and, when the engine serves queues, a Sweeper: the path of an event
// stays on its node and never passes through here. Fanout routes by slot only what has
// no node of its own: completions (to the master serving the item's slot) and
// what a sweeper gave up after MOVED/ASK (live claims, adoptions: parked until the next
// topology).
//
// In cluster mode it follows the topology: it asks a node for CLUSTER SHARDS (CLUSTER
// SLOTS on servers without it) every cluster.refresh and whenever a subscriber loses its
// connection; a node that is no longer a master is dropped (a demoted master keeps its
// subscribers connected and silently publishes only `del`), a new master is subscribed,
// and a slot that changed master (a migration's end, a failover) has its queues swept by
// the new one.
//
// With a redis+sentinel:// URL the one node is the master the sentinels name (found at start
// by the engine): a lost connection to it, a READONLY reply or a +switch-master heard on a
// sentinel makes the fanout ask the sentinels again (MasterFinder); a new master replaces
// the node (its subscriber checks notify-keyspace-events there, its sweeper sweeps at
// once), and what the old node's sweeper had not confirmed goes to the new one.
//
// Evidence that a node is back ends its connections' reconnect waits at once (node_back):
// the subscriber's connection and the sweeper's tell each other when they are made, and in
// cluster mode the topology probe, and a connection tried at each refresh to every master
// not subscribed now, tell both. Without it each would sleep its own backoff (up to
// reconnect.max) after a node, or the whole cluster, came back.
// Loop thread only.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/engine/dispatcher.h"
#include "core/engine/engine_counters.h"
#include "core/redis/event_loop.h"
#include "core/engine/node_intake.h"
#include "core/redis/master_finder.h"
#include "core/redis/redis_conn.h"
#include "core/base/stats.h"
#include "core/engine/subscriber.h"
#include "core/sweeper/sweeper.h"
#include "core/redis/topology.h"

namespace keywatch {

class Fanout : private SubscriberSink {
  public:
    struct Options {
        Subscriber::Options sub;
        RedisUrl seed;  // standalone: the server; cluster: where to ask first
        bool cluster = false;
        Topology topology;      // cluster: the masters known at start
        int64_t refresh_ms;     // cluster.refresh (from Config: fanout_options())
        bool sweepers = false;  // the engine serves queues
        Sweeper::Options sweep;
        Dispatcher *dispatcher = nullptr;  // where every node's intake hands events
        EngineCounters *events = nullptr;  // the intakes count what they read and drop
        SweeperCounters *counters = nullptr;
        // The node.* samples: a node's record is made with it and dropped when the
        // topology no longer lists it (also conn.nodes and conn.state).
        EngineStats *stats = nullptr;
    };

    Fanout(EventLoop &loop, Options opts, SubscriberSink *sink);
    ~Fanout() override;

    // Subscribes every node. The sink's on_started gets one outcome: standalone, the
    // server's; cluster, KW_OK once every master answered and at least one is subscribed
    // (the others keep retrying), else the first error (always at once for AUTH).
    void start();
    void start_sweepers();  // once start succeeded
    void shutdown_subscribers();
    // No new claims; what the intakes still hold is passed on (live claims are asked and
    // given back, the rest goes to the workers).
    void stop_claiming();
    size_t outstanding() const;  // replies the sweepers still wait for
    void shutdown();

    // Queue work that comes from the workers, routed by the slot of each item to the
    // sweeper of the master serving it (standalone: the one sweeper).
    void complete(std::vector<Completion> &&done);

  private:
    struct Node {
        RedisUrl url;
        std::shared_ptr<NodeStats> stats;    // its samples: intake and sweeper record here
        std::unique_ptr<NodeIntake> intake;  // before sub and sweeper, which point at it
        std::unique_ptr<Subscriber> sub;
        std::unique_ptr<Sweeper> sweeper;
        kw_conn_state state = KW_CONN_DISCONNECTED;
        bool reported = false;  // its first outcome is in
    };

    // SubscriberSink
    void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) override;
    void on_started(Subscriber &sub, int status, const std::string &message) override;
    void log(kw_log_level level, const std::string &message, const LogFields &fields) override {
        sink_->log(level, message, fields);
    }
    void on_keyspace(Subscriber &sub, const std::string &key, const std::string &event) override;

    // Completions whose slot has no known master, or was refused with MOVED: kept (while
    // their lease lasts) until the next topology says where they go; a refresh is asked.
    void park(std::vector<Completion> &&done);
    // Live events of tracked-key candidates whose slot has no known master, or whose
    // claim met a slot on the move: kept (at most kMaxParked, the rest dropped and
    // counted as events.unrouted) until the next topology, then claimed there.
    void park_live(std::vector<Event> &&events);
    // Cluster: adoptions refused because their slot is on the move or served elsewhere
    // (nothing written), or read from a master just dropped: kept (at most kMaxParked;
    // beyond, dropped, counted as adopt.dropped and rescanned) and sent to the slot's
    // master after the next topology (the adopt script is idempotent). Keys refused again
    // (a migration that does not end) wait a backoff, 50 ms doubling up to 5 s, reset
    // when a slot changes master; they are said (rate-limited) while they stay.
    void park_adopt(std::vector<AdoptKey> &&keys);
    // After a topology: parked adoptions due (new ones, the backoff over, or `owner_changed`:
    // a slot changed master) go to their slots' masters; live claims and completions always.
    void route_parked(bool owner_changed);
    void note_parked();  // the adopt.parked gauge
    // Parked live events to the sweepers of their slots' masters now.
    void claim_parked(std::vector<Event> &&events);
    // A topology refresh in `ms` unless one is already due (or the fanout is down).
    void refresh_soon(int64_t ms);
    // The sweeper of the master serving the slot of `id` (standalone: the one), or null.
    // `*slot`: the id's slot if known (-1: computed here, and stored).
    Sweeper *route(const std::string &id, int *slot);
    // Rebuilds sweeper_of_master_ after the nodes or the topology changed.
    void index_sweepers();
    Node &make_node(const RedisUrl &url);
    void add(const Endpoint &node);
    void refresh();
    void apply(const Topology &t);
    // Slots whose master changed from the old topology to `t`: the queues that their old
    // master's sweeper knew there, keyed by the endpoint of the new master (its sweeper
    // takes them over once it is added: Sweeper::take_over), with the slots themselves.
    struct Handover {
        std::vector<bool> slots;
        std::vector<SlotQueueName> queues;
        bool gained = false;  // a slot that had no master: what adoption lost there is rescanned
    };
    std::map<std::string, Handover> handovers(const Topology &t) const;
    // A connection to `endpoint` succeeded: its subscriber and sweeper stop waiting out
    // their backoff and reconnect now.
    void node_back(const std::string &endpoint);
    // Cluster, at each refresh: tries a connection and a PING to every node not subscribed
    // now (one at a time per node, for at most redis.connect_timeout, silently); an answer
    // calls node_back().
    void reach_lost_nodes();
    const std::string *intern(const std::string &name);
    // Sentinel: asks the sentinels where the master is now (unless a search runs).
    void rediscover(const std::string &why);
    // Sentinel: the master found; a new one replaces the node.
    void switch_master(const FoundMaster &found);
    // Takes a node out (a demoted or dead master): its subscriber and sweeper shut down;
    // its live claims go to *claims, its unconfirmed completions to *done and the
    // adoptions it had not sent to *adopts, for the caller to hand on.
    void retire(std::map<std::string, Node>::iterator it, std::vector<Event> *claims,
                std::vector<Completion> *done, std::vector<AdoptKey> *adopts);

    EventLoop &loop_;
    Options opts_;
    SubscriberSink *sink_;
    // By Endpoint::str(), the name RedisUrl and ClusterNode both give a node.
    std::map<std::string, Node> nodes_by_endpoint_;
    std::vector<Sweeper *> sweeper_of_master_;  // cluster: by index in opts_.topology.masters
    int claims_in_flight_ = 0;                  // all sweepers' (acks wait for them)
    std::vector<Node> retired_;                 // shut down; freed at the next refresh
    CompletionStore parked_;                    // see park(): waiting only, never sent
    std::vector<Event> parked_live_;            // see park_live()
    std::vector<AdoptKey> parked_adopt_;        // see park_adopt()
    // At most this many live events, and as many adoptions, parked (the bound of an
    // adoption waiting for its connection).
    static constexpr size_t kMaxParked = kMaxAdoptWaiting;
    static constexpr int64_t kAdoptBackoffMaxMs = 5000;
    int adopt_tries_ = 0;               // times parked adoptions were refused again in a row
    bool adopt_due_ = false;            // parked adoptions not sent yet go at the next topology
    bool adopt_backoff_over_ = false;   // and those refused again too
    int64_t adopt_said_ms_ = 0;         // when parked adoptions were last said to stay
    std::set<std::string> names_;       // interned node names: events point at them
    std::unique_ptr<RedisConn> probe_;  // asks for the topology; one per refresh
    struct Reach {
        std::unique_ptr<RedisConn> conn;
        int64_t since_ms = 0;  // when the try began (wall clock)
    };
    std::map<std::string, Reach> reach_;  // reach_lost_nodes(), by node
    std::vector<Endpoint> probe_order_;
    size_t probe_next_ = 0;
    bool probe_failed_ = false;  // the last probe got no topology
    Timer refresh_timer_, soon_timer_;
    Timer adopt_timer_;  // the backoff of adoptions refused again
    bool down_ = true, started_reported_ = false, refreshing_ = false;
    bool sweepers_started_ = false;
    std::unique_ptr<MasterFinder> finder_;  // sentinel URL only
    bool switched_ = false;                 // sentinel: the node was replaced at least once
    int ok_count_ = 0;
};

}  // namespace keywatch
