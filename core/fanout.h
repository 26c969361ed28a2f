// Fanout: an engine's presence on each Redis node it must hear: the single server in
// standalone mode, every master of a Redis Cluster in cluster mode (keyspace
// notifications are node-local and never cross the cluster bus). Per node a Subscriber
// and, when the engine serves queues, a Sweeper; queue work (live claims, acks, ...) is
// routed to the sweeper of the master that serves the item's slot.
//
// In cluster mode it follows the topology: it asks a node for CLUSTER SHARDS (CLUSTER
// SLOTS on servers without it) every cluster.refresh and whenever a subscriber loses its
// connection; a node that is no longer a master is dropped (a demoted master keeps its
// subscribers connected and silently publishes only `del`), a new master is subscribed.
// Loop thread only, except the atomics read by stats.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/event_loop.h"
#include "core/redis_conn.h"
#include "core/subscriber.h"
#include "core/sweeper.h"
#include "core/topology.h"

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
        SweeperSink *sweep_sink = nullptr;
        SweeperCounters *counters = nullptr;
    };

    Fanout(EventLoop &loop, Options opts, SubscriberSink *sink);
    ~Fanout() override;

    // Subscribes every node. The sink's on_started gets one outcome: standalone, the
    // server's; cluster, KW_OK once every master answered and at least one is subscribed
    // (the others keep retrying), else the first error (always at once for AUTH).
    void start();
    void start_sweepers();  // once start succeeded
    void shutdown_subscribers();
    void stop_claiming();
    size_t outstanding() const;  // replies the sweepers still wait for
    void shutdown();

    // Queue work, routed by the slot of each item (standalone: the one sweeper).
    void claim_live(std::vector<Event> &&events);
    void forget(std::vector<std::string> &&keys);
    void untracked(std::vector<Event> &&events);
    void complete(std::vector<Completion> &&done);

    int64_t nodes() const { return nodes_.load(); }
    kw_conn_state worst_state() const { return worst_.load(); }

  private:
    struct Node {
        std::unique_ptr<Subscriber> sub;
        std::unique_ptr<Sweeper> sweeper;
        kw_conn_state state = KW_CONN_DISCONNECTED;
        bool reported = false;  // its first outcome is in
    };

    // SubscriberSink
    void on_event(Event &&ev) override { sink_->on_event(std::move(ev)); }
    void on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) override;
    void on_started(Subscriber &sub, int status, const std::string &message) override;
    void log(kw_log_level level, const std::string &message) override {
        sink_->log(level, message);
    }
    void on_keyspace(Subscriber &sub, const std::string &key, const std::string &event) override;

    // Completions whose slot has no known master, or was refused with MOVED: kept (while
    // their lease lasts) until the next topology says where they go; a refresh is asked.
    void park(std::vector<Completion> &&done);
    // Live events of tracked-key candidates whose slot has no known master, or whose
    // claim met a slot on the move: kept (at most kMaxParkedLive, the rest dropped and
    // counted as events.unrouted) until the next topology, then claimed there.
    void park_live(std::vector<Event> &&events);
    void route_parked();  // after a topology change
    // A topology refresh in `ms` unless one is already due (or the fanout is down).
    void refresh_soon(int64_t ms);
    // The sweeper of the master serving the slot of `id` (standalone: the one), or null.
    // `*slot`: the id's slot if known (-1: computed here, and stored).
    Sweeper *route(const std::string &id, int *slot);
    // Rebuilds sweeper_of_master_ after the nodes or the topology changed.
    void index_sweepers();
    Node &make_node(const RedisUrl &url);
    void add(const std::string &host, int port);
    void refresh();
    void apply(const Topology &t);
    void update_worst();
    const std::string *intern(const std::string &name);

    EventLoop &loop_;
    Options opts_;
    SubscriberSink *sink_;
    std::map<std::string, Node> nodes_by_endpoint_;
    std::vector<Sweeper *> sweeper_of_master_;  // cluster: by index in opts_.topology.masters
    int claims_in_flight_ = 0;                  // all sweepers' (acks wait for them)
    std::vector<Node> retired_;                 // shut down; freed at the next refresh
    CompletionStore parked_;                    // see park(): waiting only, never sent
    std::vector<Event> parked_live_;            // see park_live()
    static constexpr size_t kMaxParkedLive = 100000;
    std::set<std::string> names_;       // interned node names: events point at them
    std::unique_ptr<RedisConn> probe_;  // asks for the topology; one per refresh
    std::vector<std::string> probe_order_;
    size_t probe_next_ = 0;
    bool probe_failed_ = false;  // the last probe got no topology
    Timer refresh_timer_, soon_timer_;
    bool down_ = true, started_reported_ = false, refreshing_ = false;
    bool sweepers_started_ = false;
    int ok_count_ = 0;
    std::atomic<int64_t> nodes_{0};
    std::atomic<kw_conn_state> worst_{KW_CONN_DISCONNECTED};
};

}  // namespace keywatch
