#include "core/engine/fanout.h"

#include "core/redis/slots.h"

#include <algorithm>

namespace keywatch {

Fanout::Fanout(EventLoop &loop, Options opts, SubscriberSink *sink)
    : loop_(loop),
      opts_(std::move(opts)),
      sink_(sink),
      refresh_timer_(loop.base(), [this] { refresh(); }),
      soon_timer_(loop.base(), [this] { refresh(); }),
      adopt_timer_(loop.base(), [this] {
          adopt_due_ = adopt_backoff_over_ = true;
          refresh_soon(0);
      }) {}

Fanout::~Fanout() = default;

const std::string *Fanout::intern(const std::string &name) {
    return &*names_.insert(name).first;
}

Fanout::Node &Fanout::make_node(const RedisUrl &url) {
    std::string endpoint = url.endpoint();
    const std::string *name = intern(endpoint);
    Subscriber::Options so = opts_.sub;
    so.node_name = name;
    so.retry_from_start = opts_.cluster || switched_;
    Node &n = nodes_by_endpoint_[endpoint];
    n.url = url;
    n.stats = opts_.stats->add_node(
        endpoint, opts_.sweepers,
        opts_.sweepers && !opts_.sweep.adopt.empty() && opts_.sweep.catchup_enable);
    NodeIntake::Options io;
    io.ns = opts_.sweep.ns;
    io.tracked_db = url.db;
    io.dedupe = opts_.sweepers && opts_.sweep.dedupe;
    n.intake = std::make_unique<NodeIntake>(
        loop_, io, *opts_.dispatcher, *opts_.events, n.stats.get(),
        // Its lines and its sweeper's are about this node.
        [this, name](kw_log_level level, const std::string &message, const LogFields &fields) {
            log(level, message, with_field(fields, "node", *name));
        });
    n.sub = std::make_unique<Subscriber>(loop_, url, so, static_cast<SubscriberSink *>(this),
                                         n.intake.get());
    if (opts_.sweepers) {
        Sweeper::Options sw = opts_.sweep;
        sw.node_name = name;
        sw.node_stats = n.stats.get();
        sw.stats = opts_.stats;
        sw.cluster = opts_.cluster;
        sw.claims_in_flight = &claims_in_flight_;
        sw.on_moved = [this] { refresh_soon(50); };
        sw.on_connected = [this, name] { node_back(*name); };
        if (opts_.seed.is_sentinel())
            sw.on_readonly = [this] { rediscover("a READONLY reply: the master was demoted"); };
        // A master that comes after the start (a failover, a new shard) scans as one.
        if (sweepers_started_) sw.catchup_first_reason = "new master";
        // The subscriber outlives the sweeper (Node's member order).
        sw.subscribed = [sub = n.sub.get()] { return sub->state() == KW_CONN_READY; };
        sw.own_channel = n.sub->own_channel();
        if (opts_.cluster) {
            sw.on_redirect = [this](std::vector<Completion> &&c) { park(std::move(c)); };
            sw.on_unrouted_live = [this](std::vector<Event> &&e) { park_live(std::move(e)); };
            sw.on_unrouted_adopt = [this](std::vector<AdoptKey> &&k) { park_adopt(std::move(k)); };
        }
        n.sweeper = std::make_unique<Sweeper>(loop_, url, sw, n.intake.get(), opts_.counters);
        n.intake->attach(n.sweeper.get());
    }
    return n;
}

void Fanout::add(const Endpoint &node) {
    const RedisUrl url = opts_.topology.url_of(opts_.seed, node);
    if (nodes_by_endpoint_.count(url.endpoint())) return;
    Node &n = make_node(url);
    if (down_) return;
    n.sub->start();
    // A master added after start (failover, new shard): its slots are swept at once.
    if (n.sweeper && sweepers_started_) n.sweeper->start();
}

void Fanout::start() {
    down_ = false;
    if (!opts_.cluster) {
        make_node(opts_.seed).sub->start();
        if (opts_.seed.is_sentinel()) {
            const Backoff b{opts_.sub.reconnect.min_ms,
                            std::min<int64_t>(opts_.sub.reconnect.max_ms, 2000)};
            finder_ = std::make_unique<MasterFinder>(
                loop_.base(), opts_.seed, opts_.sub.connect_timeout_ms, b,
                [this](kw_log_level l, const std::string &m, const LogFields &f) { log(l, m, f); });
            finder_->watch_switches([this] { rediscover("+switch-master"); });
        }
        return;
    }
    for (auto &m : opts_.topology.masters) add(m.address());
    index_sweepers();
    const size_t uncovered = opts_.topology.uncovered();
    opts_.events->slots_uncovered.store(static_cast<int64_t>(uncovered), std::memory_order_relaxed);
    if (uncovered > 0)
        log(KW_LOG_WARN,
            std::to_string(uncovered) +
                " of 16384 slots have no master now: events of keys in them "
                "cannot arrive until a master serves them, and under "
                "cluster-require-full-coverage yes (Redis's default) every node "
                "refuses commands meanwhile (CLUSTERDOWN): tracked items wait "
                "in Redis",
            {});
    refresh_timer_.arm(opts_.refresh_ms);
}

void Fanout::start_sweepers() {
    sweepers_started_ = true;
    for (auto &kv : nodes_by_endpoint_)
        if (kv.second.sweeper) kv.second.sweeper->start();
}

void Fanout::shutdown_subscribers() {
    refresh_timer_.cancel();
    soon_timer_.cancel();
    adopt_timer_.cancel();
    if (probe_) probe_->close();
    if (finder_) finder_->close();
    for (auto &kv : reach_) kv.second.conn->close();
    for (auto &kv : nodes_by_endpoint_) kv.second.sub->shutdown();
}

void Fanout::stop_claiming() {
    for (auto &kv : nodes_by_endpoint_) {
        if (kv.second.sweeper) kv.second.sweeper->stop_claiming();
        kv.second.intake->flush();
    }
}

size_t Fanout::outstanding() const {
    size_t n = parked_.size();
    for (auto &kv : nodes_by_endpoint_)
        if (kv.second.sweeper) n += kv.second.sweeper->outstanding();
    return n;
}

void Fanout::shutdown() {
    down_ = true;
    shutdown_subscribers();
    for (auto &kv : nodes_by_endpoint_)
        if (kv.second.sweeper) kv.second.sweeper->shutdown();
}

void Fanout::index_sweepers() {
    const auto &masters = opts_.topology.masters;
    sweeper_of_master_.assign(masters.size(), nullptr);
    for (size_t i = 0; i < masters.size(); i++) {
        auto it = nodes_by_endpoint_.find(masters[i].endpoint());
        if (it != nodes_by_endpoint_.end()) sweeper_of_master_[i] = it->second.sweeper.get();
    }
}

Sweeper *Fanout::route(const std::string &id, int *slot) {
    if (!opts_.cluster) {
        auto it = nodes_by_endpoint_.begin();
        return it == nodes_by_endpoint_.end() ? nullptr : it->second.sweeper.get();
    }
    if (*slot < 0) *slot = key_slot(id);
    int16_t m = opts_.topology.slot_owner[static_cast<size_t>(*slot)];
    return m < 0 || static_cast<size_t>(m) >= sweeper_of_master_.size()
               ? nullptr
               : sweeper_of_master_[static_cast<size_t>(m)];
}

namespace {
// Splits items by the sweeper their id routes to (route(item) gives it); items with no
// sweeper go to the null key.
template <typename T, typename Route>
std::map<Sweeper *, std::vector<T>> split(std::vector<T> &&items, Route route) {
    std::map<Sweeper *, std::vector<T>> out;
    for (auto &item : items) out[route(item)].push_back(std::move(item));
    return out;
}
// Parked items to the sweepers of their slots' masters (send); those whose slot has no
// known master yet are parked again (park).
template <typename T, typename Route, typename Send, typename Park>
void unpark(std::vector<T> &&items, Route route, Send send, Park park) {
    for (auto &kv : split(std::move(items), route)) {
        if (kv.first)
            send(*kv.first, std::move(kv.second));
        else
            park(std::move(kv.second));
    }
}
}  // namespace

void Fanout::claim_parked(std::vector<Event> &&events) {
    unpark(
        std::move(events), [this](Event &e) { return route(e.key, &e.slot); },
        [](Sweeper &s, std::vector<Event> &&e) { s.claim_live(std::move(e)); },
        [this](std::vector<Event> &&e) { park_live(std::move(e)); });
}

void Fanout::complete(std::vector<Completion> &&done) {
    // First to the sweeper that claimed the item: it names the claim's batch, and sends the
    // completion on where the slot is served now if it moved (a reshard). Else by slot.
    auto parts = split(std::move(done), [this](Completion &c) {
        Sweeper *owner = route(c.id, &c.slot);
        if (!opts_.cluster || c.done_ms != 0 || (owner && owner->holds(c))) return owner;
        for (auto &kv : nodes_by_endpoint_)  // the slot moved since the claim (rare)
            if (kv.second.sweeper && kv.second.sweeper->holds(c)) return kv.second.sweeper.get();
        return owner;
    });
    for (auto &kv : parts) {
        if (kv.first)
            kv.first->complete(std::move(kv.second));
        else
            park(std::move(kv.second));  // no master known for the slot now
    }
}

void Fanout::park(std::vector<Completion> &&done) {
    for (auto &c : done) parked_.add(std::move(c));
    size_t late = parked_.drop_expired(wall_ms(), opts_.sweep.lease_ms).size();
    if (late > 0 && opts_.counters) opts_.counters->late_acks.fetch_add(static_cast<int64_t>(late));
    // The topology will say who serves their slots now; then they go there.
    if (parked_.has_waiting()) refresh_soon(50);
}

void Fanout::refresh_soon(int64_t ms) {
    if (!down_ && !soon_timer_.pending()) soon_timer_.arm(ms);
}

void Fanout::park_live(std::vector<Event> &&events) {
    size_t dropped = 0;
    for (auto &ev : events) {
        if (parked_live_.size() < kMaxParked)
            parked_live_.push_back(std::move(ev));
        else
            dropped++;
    }
    if (dropped > 0 && opts_.counters) {
        int64_t before = opts_.counters->unrouted.fetch_add(static_cast<int64_t>(dropped));
        if (before == 0)
            log(KW_LOG_WARN,
                "cluster: live events whose slot has no known master overflow the " +
                    std::to_string(kMaxParked) +
                    " kept for later; dropping them (tracked keys among them are "
                    "still swept; see the events.unrouted statistic)",
                {});
    }
    if (!parked_live_.empty()) refresh_soon(50);
}

void Fanout::park_adopt(std::vector<AdoptKey> &&keys) {
    size_t room = kMaxParked - std::min(kMaxParked, parked_adopt_.size());
    size_t dropped = 0;
    bool again = false;          // some were sent again and refused again
    std::set<Sweeper *> rescan;  // where the keys beyond room are looked for again
    for (auto &k : keys) {
        again = again || k.resent;
        if (room > 0) {
            room--;
            parked_adopt_.push_back(std::move(k));
            continue;
        }
        dropped++;
        rescan.insert(route(k.key, &k.slot));
    }
    note_parked();
    if (dropped > 0 && opts_.counters &&
        opts_.counters->adopt_dropped.fetch_add(static_cast<int64_t>(dropped)) == 0)
        log(KW_LOG_WARN,
            "cluster: adoptions refused by their slot's master overflow the " +
                std::to_string(kMaxParked) +
                " kept for later; dropping them and rescanning (see the adopt.dropped "
                "statistic)",
            {});
    if (rescan.count(nullptr))  // a slot without a known master: every master looks
        for (auto &kv : nodes_by_endpoint_) rescan.insert(kv.second.sweeper.get());
    for (Sweeper *sw : rescan)
        if (sw) sw->adoption_rescan("adoptions dropped");
    if (parked_adopt_.empty()) return;
    if (!again) {  // the topology will say where their slots are served now
        adopt_due_ = true;
        refresh_soon(50);
        return;
    }
    // Refused again: the slot stays on the move (or the topology lags). Not at once again.
    adopt_tries_ = std::min(adopt_tries_ + 1, 10);
    if (!adopt_timer_.pending())
        adopt_timer_.arm(std::min<int64_t>(kAdoptBackoffMaxMs, int64_t{50} << adopt_tries_));
    if (wall_ms() - adopt_said_ms_ >= 30000) {
        adopt_said_ms_ = wall_ms();
        log(KW_LOG_WARN,
            "cluster: " + std::to_string(parked_adopt_.size()) +
                " adoptions stay parked: their slots' masters refused them again (a "
                "migration not finished?); sent again every " +
                std::to_string(kAdoptBackoffMaxMs / 1000) +
                " s at most (see the adopt.parked statistic)",
            {});
    }
}

void Fanout::note_parked() {
    if (opts_.counters)
        opts_.counters->adopt_parked.store(static_cast<int64_t>(parked_adopt_.size()),
                                           std::memory_order_relaxed);
}

void Fanout::route_parked(bool owner_changed) {
    if (!parked_live_.empty()) {
        std::vector<Event> live;
        live.swap(parked_live_);
        claim_parked(std::move(live));
    }
    if (owner_changed) {  // where the parked adoptions go may have changed: all go now
        adopt_tries_ = 0;
        adopt_timer_.cancel();
    }
    if (!parked_adopt_.empty() && (adopt_due_ || owner_changed)) {
        const bool all = owner_changed || adopt_backoff_over_;
        adopt_due_ = adopt_backoff_over_ = false;
        std::vector<AdoptKey> keys, stay;
        for (auto &k : parked_adopt_) (all || !k.resent ? keys : stay).push_back(std::move(k));
        parked_adopt_.swap(stay);
        for (auto &k : keys) k.resent = true;
        if (opts_.counters)
            opts_.counters->adopt_resent.fetch_add(static_cast<int64_t>(keys.size()));
        unpark(
            std::move(keys), [this](AdoptKey &k) { return route(k.key, &k.slot); },
            [](Sweeper &s, std::vector<AdoptKey> &&k) { s.adopt(std::move(k)); },
            [this](std::vector<AdoptKey> &&k) { park_adopt(std::move(k)); });
        note_parked();
    }
    if (parked_.has_waiting()) complete(parked_.take_waiting());
}

void Fanout::on_keyspace(Subscriber &sub, const std::string &key, const std::string &event) {
    auto it = nodes_by_endpoint_.find(sub.endpoint());
    if (it != nodes_by_endpoint_.end() && it->second.sweeper)
        it->second.sweeper->touched(key, event);
}

void Fanout::on_state(Subscriber &sub, kw_conn_state state, const std::string &detail) {
    auto it = nodes_by_endpoint_.find(sub.endpoint());
    if (it != nodes_by_endpoint_.end() && it->second.sub.get() == &sub) it->second.state = state;
    sink_->on_state(sub, state, detail);
    // A lost master may have failed over: look at the topology soon, not at the next
    // periodic refresh; with sentinels, ask them.
    if (opts_.cluster && state == KW_CONN_BROKEN) refresh_soon(200);
    if (finder_ && state == KW_CONN_BROKEN && it != nodes_by_endpoint_.end() &&
        it->second.sub.get() == &sub)
        rediscover("lost the connection to the master " + sub.endpoint());
    if (state != KW_CONN_READY) return;
    node_back(sub.endpoint());
    // Events were published to nobody while it was away: what they set is found by a scan
    // (the first READY starts the node's first scan, with its own reason).
    if (it != nodes_by_endpoint_.end() && it->second.sub.get() == &sub && it->second.sweeper)
        it->second.sweeper->adoption_rescan("subscriber reconnected");
}

void Fanout::node_back(const std::string &endpoint) {
    auto it = nodes_by_endpoint_.find(endpoint);
    if (it == nodes_by_endpoint_.end()) return;
    it->second.sub->retry_now();
    if (it->second.sweeper) it->second.sweeper->retry_now();
}

void Fanout::reach_lost_nodes() {
    const int64_t now = wall_ms();
    for (auto &kv : nodes_by_endpoint_) {
        if (kv.second.state == KW_CONN_READY) continue;
        Reach &reach = reach_[kv.first];
        if (!reach.conn)
            reach.conn = std::make_unique<RedisConn>(loop_.base(), kv.second.url, "reach");
        RedisConn *c = reach.conn.get();
        // Still trying, and not for too long (a paused server accepts, then never answers).
        if (c->state() != RedisConn::State::Idle &&
            now - reach.since_ms < opts_.sub.connect_timeout_ms)
            continue;
        reach.since_ms = now;
        const std::string *name = intern(kv.first);
        // A node still down is its subscriber's to report: nothing is logged here. Any
        // answer to the PING (PONG, LOADING, NOAUTH, ...) shows the server is back.
        c->connect(
            opts_.sub.connect_timeout_ms,
            [this, c, name] {
                c->command({"PING"}, [this, c, name](redisReply *) {
                    c->close();
                    node_back(*name);
                });
            },
            [](const RedisConn::Failure &) {});
    }
}

void Fanout::on_started(Subscriber &sub, int status, const std::string &message) {
    if (!opts_.cluster) {
        if (started_reported_) return;  // a master that replaced the first (sentinel)
        started_reported_ = true;
        sink_->on_started(sub, status, message);
        return;
    }
    auto it = nodes_by_endpoint_.find(sub.endpoint());
    if (it == nodes_by_endpoint_.end() || it->second.reported) return;
    it->second.reported = true;
    if (started_reported_) return;  // a master added later: nothing to report
    if (status == KW_OK) ok_count_++;
    if (status == KW_ERR_AUTH) {
        started_reported_ = true;
        sink_->on_started(sub, status, message);
        return;
    }
    if (status != KW_OK)
        log(KW_LOG_WARN,
            "cluster master " + sub.endpoint() + " is not reachable now (" + message +
                "); the other masters are watched and this one is retried",
            {{"node", sub.endpoint()}});
    for (auto &kv : nodes_by_endpoint_)
        if (!kv.second.reported) return;
    started_reported_ = true;
    if (ok_count_ > 0)
        sink_->on_started(sub, KW_OK, "");
    else
        sink_->on_started(sub, status,
                          "no cluster master could be subscribed; last error: " + message);
}

void Fanout::refresh() {
    if (down_) return;
    reach_lost_nodes();
    if (refreshing_) {
        // One probe at a time; keep the periodic chain alive behind it.
        refresh_timer_.arm(300);
        return;
    }
    // While a master is unreachable its replica may be taking over: look often, so that
    // the promoted replica is subscribed (and its slots swept) soon after the promotion.
    // Likewise while some slots have no master (the dead one dropped, its replica not yet
    // promoted).
    bool all_ready = true;
    for (auto &kv : nodes_by_endpoint_) all_ready = all_ready && kv.second.state == KW_CONN_READY;
    bool settled = all_ready && opts_.topology.uncovered() == 0;
    refresh_timer_.arm(settled ? opts_.refresh_ms : std::min<int64_t>(opts_.refresh_ms, 300));
    retired_.clear();  // shut down at least one refresh ago: no callback can reach them
    // Any node of the cluster can answer: ask the masters we reach first, in turn, then the
    // seed, then the ones we do not reach now.
    probe_order_.clear();
    for (auto &kv : nodes_by_endpoint_)
        if (kv.second.state == KW_CONN_READY) probe_order_.push_back(kv.second.url.address());
    probe_order_.push_back(opts_.seed.address());
    for (auto &kv : nodes_by_endpoint_)
        if (kv.second.state != KW_CONN_READY) probe_order_.push_back(kv.second.url.address());
    // After a failed probe the next one tries the next node.
    const RedisUrl url = opts_.topology.url_of(
        opts_.seed,
        probe_order_[(all_ready || probe_failed_ ? probe_next_++ : 0) % probe_order_.size()]);
    // Refreshes run from timers, never inside the old probe's callbacks: safe to replace.
    probe_ = std::make_unique<RedisConn>(loop_.base(), url, "topology");
    refreshing_ = true;
    probe_->connect(
        opts_.sub.connect_timeout_ms,
        [this, url] {
            node_back(url.endpoint());
            probe_->command({"CLUSTER", "SHARDS"}, [this, url](redisReply *r) {
                auto done = [this, url](const Topology *t, const std::string &err) {
                    refreshing_ = false;
                    probe_failed_ = t == nullptr;
                    probe_->close();
                    if (t) {
                        opts_.events->topology_refreshes.fetch_add(1, std::memory_order_relaxed);
                        apply(*t);
                    } else {
                        log(KW_LOG_WARN, "cluster topology refresh failed: " + err,
                            {{"node", url.endpoint()}});
                    }
                };
                Topology t;
                std::string err;
                if (classify(r) == ReplyError::Loading) {
                    done(nullptr, url.endpoint() + " is loading its data set (LOADING)");
                    return;  // the next refresh asks the next node
                }
                if (r->type == REDIS_REPLY_ERROR) {
                    // Before 7.0: CLUSTER SLOTS.
                    probe_->command({"CLUSTER", "SLOTS"}, [done, url](redisReply *r2) {
                        Topology t2;
                        std::string err2;
                        if (parse_cluster_slots(r2, url.host, &t2, &err2))
                            done(&t2, "");
                        else
                            done(nullptr, err2);
                    });
                    return;
                }
                if (parse_cluster_shards(r, url.host, &t, &err, url.tls))
                    done(&t, "");
                else
                    done(nullptr, err);
            });
        },
        [this, url](const RedisConn::Failure &f) {
            refreshing_ = false;
            probe_failed_ = true;
            log(KW_LOG_WARN, "cluster topology refresh: " + f.message, {{"node", url.endpoint()}});
            if (!down_) soon_timer_.arm(500);  // try the next node
        });
}

std::map<std::string, Fanout::Handover> Fanout::handovers(const Topology &t) const {
    std::map<std::string, Handover> out;
    if (!opts_.sweepers) return out;
    const Topology &old = opts_.topology;
    std::vector<int> now_index(old.masters.size());  // old master -> its index in t, or -1
    for (size_t i = 0; i < old.masters.size(); i++)
        now_index[i] = t.find(old.masters[i].endpoint());
    std::vector<std::vector<bool>> lost(old.masters.size());  // per old master: slots it lost
    for (size_t s = 0; s < t.slot_owner.size(); s++) {
        const int16_t now = t.slot_owner[s], was = old.slot_owner[s];
        if (now < 0 || (was >= 0 && now_index[static_cast<size_t>(was)] == now)) continue;
        Handover &h = out[t.masters[static_cast<size_t>(now)].endpoint()];
        h.slots.resize(t.slot_owner.size(), false);
        h.slots[s] = true;
        if (was < 0) {
            h.gained = true;
            continue;
        }
        lost[static_cast<size_t>(was)].resize(t.slot_owner.size(), false);
        lost[static_cast<size_t>(was)][s] = true;
    }
    for (size_t i = 0; i < lost.size(); i++) {
        auto node = nodes_by_endpoint_.find(old.masters[i].endpoint());
        if (lost[i].empty() || node == nodes_by_endpoint_.end() || !node->second.sweeper) continue;
        for (auto &q : node->second.sweeper->queues_in(lost[i]))
            out[t.master_for_slot(q.slot)->endpoint()].queues.push_back(q);
    }
    return out;
}

void Fanout::apply(const Topology &t) {
    if (t.masters.empty()) return;  // a node that knows nothing (yet): keep what we have
    // Read before the old masters' sweepers go: what they knew of the slots that moved.
    std::map<std::string, Handover> moved = handovers(t);
    opts_.topology = t;
    std::vector<AdoptKey> adopts;  // of dropped masters: parked once the sweepers are indexed
    // Masters that are gone or demoted: drop their subscribers.
    for (auto it = nodes_by_endpoint_.begin(); it != nodes_by_endpoint_.end();) {
        if (t.find(it->first) >= 0) {
            ++it;
            continue;
        }
        log(KW_LOG_INFO,
            "cluster: " + it->first +
                " no longer serves slots as a master; "
                "dropping its subscriber",
            {{"node", it->first}});
        std::vector<Event> claims;
        std::vector<Completion> done;
        std::vector<AdoptKey> read;
        auto next = std::next(it);
        retire(it, &claims, &done, &read);
        // Live claims it read go to the slots' masters, and what it had not confirmed.
        if (!claims.empty()) park_live(std::move(claims));
        adopts.insert(adopts.end(), std::make_move_iterator(read.begin()),
                      std::make_move_iterator(read.end()));
        if (!done.empty()) park(std::move(done));
        it = next;
    }
    for (auto &m : t.masters) {
        if (nodes_by_endpoint_.count(m.endpoint())) continue;
        log(KW_LOG_INFO, "cluster: subscribing to new master " + m.endpoint(),
            {{"node", m.endpoint()}});
        add(m.address());
    }
    // Only now that the new masters are listed (as connecting): a reader of the stats
    // (/readyz) never sees every slot covered while a promoted master is not listed yet.
    opts_.events->slots_uncovered.store(static_cast<int64_t>(t.uncovered()),
                                        std::memory_order_release);
    index_sweepers();
    if (!adopts.empty()) park_adopt(std::move(adopts));
    // A slot's new master sweeps its queues now: a migration's last step (SETSLOT NODE)
    // may come long after the keys, when the new master has stopped looking.
    for (auto &kv : moved) {
        auto node = nodes_by_endpoint_.find(kv.first);
        if (node == nodes_by_endpoint_.end() || !node->second.sweeper) continue;
        node->second.sweeper->take_over(kv.second.slots, kv.second.queues);
        // Adoptions refused there while the slot had no master were dropped (adoption.cpp).
        if (kv.second.gained) node->second.sweeper->adoption_rescan("slot gained a master");
    }
    route_parked(!moved.empty());
}

void Fanout::retire(std::map<std::string, Node>::iterator it, std::vector<Event> *claims,
                    std::vector<Completion> *done, std::vector<AdoptKey> *adopts) {
    it->second.sub->shutdown();
    *claims = it->second.intake->take_claims();
    *adopts = it->second.intake->take_adopts();
    if (it->second.sweeper) {
        std::vector<AdoptKey> waiting = it->second.sweeper->take_adoptions();
        adopts->insert(adopts->end(), std::make_move_iterator(waiting.begin()),
                       std::make_move_iterator(waiting.end()));
    }
    it->second.intake->flush();
    if (it->second.sweeper) {
        *done = it->second.sweeper->take_completions();
        it->second.sweeper->shutdown();
    }
    opts_.stats->drop_node(it->first);  // its samples leave the snapshot
    reach_.erase(it->first);
    retired_.push_back(std::move(it->second));
    nodes_by_endpoint_.erase(it);
}

void Fanout::rediscover(const std::string &why) {
    if (down_ || !finder_ || finder_->searching()) return;
    log(KW_LOG_INFO,
        "sentinel: asking where master '" + opts_.seed.master_name + "' is (" + why + ")", {});
    finder_->find([this](const FoundMaster &found) { switch_master(found); });
}

void Fanout::switch_master(const FoundMaster &found) {
    if (down_) return;
    const std::string endpoint = found.url.endpoint();
    log(KW_LOG_INFO,
        "sentinel " + found.sentinel + " names " + endpoint + " as master '" +
            found.url.master_name + "'",
        {{"node", endpoint}});
    if (nodes_by_endpoint_.count(endpoint)) {
        node_back(endpoint);  // the same master (restarted, or a blip): reconnect now
        return;
    }
    retired_.clear();  // shut down at the last switch: no callback can reach them now
    std::vector<Event> claims;
    std::vector<Completion> done;
    while (!nodes_by_endpoint_.empty()) {
        std::vector<Event> c;
        std::vector<Completion> d;
        std::vector<AdoptKey> a;  // the new master's catch-up scan adopts them again
        log(KW_LOG_INFO,
            "sentinel: the master moved from " + nodes_by_endpoint_.begin()->first + " to " +
                endpoint + "; subscribing there and sweeping at once",
            {{"node", endpoint}});
        retire(nodes_by_endpoint_.begin(), &c, &d, &a);
        claims.insert(claims.end(), std::make_move_iterator(c.begin()),
                      std::make_move_iterator(c.end()));
        done.insert(done.end(), std::make_move_iterator(d.begin()),
                    std::make_move_iterator(d.end()));
    }
    switched_ = true;
    add(found.url.address());
    // The new master's sweeper takes what the old one read and had not confirmed.
    if (!claims.empty()) claim_parked(std::move(claims));
    if (!done.empty()) complete(std::move(done));
}

}  // namespace keywatch
