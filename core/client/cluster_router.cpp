#include "core/client/cluster_router.h"

#include <chrono>
#include <thread>

#include "core/base/backoff.h"
#include "core/redis/sentinel.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

// Redirections one call may follow before giving up (a resharding in full swing).
constexpr int kMaxRedirects = 8;

}  // namespace

ClusterRouter::ClusterRouter(RouterOptions options)
    : options_(std::move(options)), seed_(options_.seeds.front()), base_(event_base_new()) {
    index_masters();
}

ClusterRouter::~ClusterRouter() {
    nodes_.clear();  // before the base they run on
    event_base_free(base_);
}

int ClusterRouter::fail(int status, std::string msg) {
    status_ = status;
    error_ = std::move(msg);
    return status;
}

BlockingRedis *ClusterRouter::node(const Endpoint &n) {
    std::unique_ptr<BlockingRedis> &c = nodes_[n];
    if (c && c->connected()) return c.get();
    if (!c) c = std::make_unique<BlockingRedis>(topology_.url_of(seed_, n), "client", true, base_);
    if (int rc = c->connect(options_.connect_timeout_ms); rc != KW_OK) {
        fail(rc, c->error());
        return nullptr;
    }
    return c.get();
}

BlockingRedis *ClusterRouter::connection(const Endpoint &n) const {
    auto it = nodes_.find(n);
    return it == nodes_.end() ? nullptr : it->second.get();
}

int ClusterRouter::connect() {
    if (!topology_known_) {
        std::string why;
        if (sentinel()) {
            if (int rc = find_sentinel_master(); rc != KW_OK) return rc;
        }
        int rc = probe_seeds(sentinel() ? std::vector<RedisUrl>{seed_} : options_.seeds,
                             options_.connect_timeout_ms, options_.mode, &seed_, &cluster_,
                             &topology_, &why);
        if (rc != KW_OK) return fail(rc, why);
        index_masters();
        topology_known_ = true;
    }
    // Standalone: the one server must answer. Cluster: masters are reached when needed.
    if (!cluster_ && !node(masters_.front())) return status_;
    return KW_OK;
}

int ClusterRouter::refresh_topology() {
    // Any node that answers will do: the seed first, then the masters we knew.
    std::vector<Endpoint> candidates = {seed_.address()};
    for (auto &m : topology_.masters) candidates.push_back(m.address());
    std::string why;
    for (auto &n : candidates) {
        bool is_cluster = false;
        Topology t;
        if (probe_topology(topology_.url_of(seed_, n), options_.connect_timeout_ms, "cluster",
                           &is_cluster, &t, &why) == KW_OK) {
            topology_ = std::move(t);
            index_masters();
            return KW_OK;
        }
    }
    return fail(KW_ERR_CONNECT, "cannot read the cluster topology from any known node: " + why);
}

int ClusterRouter::find_sentinel_master() {
    FoundMaster found;
    std::string why;
    if (int rc = find_master(options_.seeds.front(), options_.connect_timeout_ms, &found, &why);
        rc != KW_OK)
        return fail(rc, why);
    seed_ = found.url;
    index_masters();
    return KW_OK;
}

void ClusterRouter::index_masters() {
    masters_.clear();
    if (!cluster_) {
        masters_.push_back(seed_.address());
        return;
    }
    for (auto &m : topology_.masters) masters_.push_back(m.address());
}

std::optional<Endpoint> ClusterRouter::master_for_slot(int slot) const {
    if (!cluster_) return masters_.front();
    int16_t m = topology_.slot_owner[static_cast<size_t>(slot)];
    if (m < 0 || static_cast<size_t>(m) >= masters_.size()) return std::nullopt;
    return masters_[static_cast<size_t>(m)];
}

ReplyPtr ClusterRouter::call(const Endpoint &n, const std::vector<std::string> &args) {
    BlockingRedis *c = node(n);
    if (!c) return nullptr;
    ReplyPtr r = c->command(args, options_.command_timeout_ms);
    if (!r) {
        fail(KW_ERR_CONNECT, "lost the connection to Redis at " + n.str() + ": " + c->error());
        return nullptr;
    }
    if (classify(r.get()) == ReplyError::Auth) {
        fail(KW_ERR_AUTH, password_required_message(seed_));
        return nullptr;
    }
    return r;
}

ReplyPtr ClusterRouter::exec(Call &c) {
    bool asking = false;
    std::string last_error, last_node;  // the last refusal, to name the real state
    ReplyError last_kind = ReplyError::None;
    std::optional<std::chrono::steady_clock::time_point> loading_since;  // first LOADING
    for (int attempt = 0; attempt < kMaxRedirects; attempt++) {
        if (!c.node) {
            if (cluster_ && refresh_topology() != KW_OK) return nullptr;
            c.node = master_for_slot(c.slot);
            if (!c.node) {
                fail(KW_ERR_REDIS, "no master serves slot " + std::to_string(c.slot) +
                                       " now (is the cluster down?): retry later");
                return nullptr;
            }
        }
        if (asking && !call(*c.node, {"ASKING"})) return nullptr;
        ReplyPtr r = call(*c.node, c.args);
        if (!r) {
            // A master that went away (failover): read the topology again, once.
            if (cluster_ && attempt == 0 && status_ == KW_ERR_CONNECT) {
                c.node.reset();
                continue;
            }
            // Sentinel: ask the sentinels where the master is now, once.
            if (sentinel() && attempt == 0 && status_ == KW_ERR_CONNECT) {
                if (find_sentinel_master() != KW_OK) return nullptr;
                c.node = masters_.front();
                continue;
            }
            return nullptr;
        }
        asking = false;
        const ReplyError kind = classify(r.get());
        if (kind != ReplyError::None) {
            last_kind = kind;
            last_error.assign(r->str, r->len);  // an error reply
            last_node = c.node->str();
        }
        if (kind == ReplyError::ReadOnly && sentinel()) {
            // A demoted master (a failover): never written to; the sentinels name the new one.
            if (find_sentinel_master() != KW_OK) return nullptr;
            c.node = masters_.front();
        } else if (kind == ReplyError::NoScript && c.script) {
            c.args[0] = "EVAL";
            c.args[1] = c.script->body;
        } else if (kind == ReplyError::Moved) {
            refresh_topology();
            c.node = Endpoint::parse(redirect_target(r.get()), Endpoint::Form::Strict);
        } else if (kind == ReplyError::Ask) {
            c.node = Endpoint::parse(redirect_target(r.get()), Endpoint::Form::Strict);
            asking = true;
        } else if (kind == ReplyError::TryAgain || kind == ReplyError::ClusterDown) {
            if (c.no_wait && kind == ReplyError::ClusterDown) break;  // named below
            // 50ms doubling to 800ms: a failover or a slot move settles within a few.
            const Backoff wait{50, 800};
            std::this_thread::sleep_for(std::chrono::milliseconds(wait.delay(attempt)));
            if (kind == ReplyError::ClusterDown) refresh_topology();
            c.node = master_for_slot(c.slot);
        } else if (kind == ReplyError::Loading) {
            // A restarted server (or a promoted replica) loading its data set: asked again
            // every kPollMs for up to redis.connect_timeout, as at a start. Not a
            // redirect: the attempt is not counted.
            const auto now = std::chrono::steady_clock::now();
            if (!loading_since) loading_since = now;
            if (now - *loading_since >= std::chrono::milliseconds(options_.connect_timeout_ms)) {
                fail(KW_ERR_TIMEOUT,
                     still_loading_message(url(c.node), options_.connect_timeout_ms));
                return nullptr;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
            attempt--;
        } else {
            return r;
        }
    }
    return gave_up(c, last_kind, last_node, last_error);
}

ReplyPtr ClusterRouter::gave_up(const Call &c, ReplyError kind, const std::string &node,
                                const std::string &reply) {
    if (kind == ReplyError::ClusterDown)
        fail(KW_ERR_REDIS, "the cluster refuses commands: " + node + " answered '" + reply +
                               "' (a slot without a master; with cluster-require-full-coverage "
                               "yes, Redis's default, a node that sees one refuses every "
                               "command); retry once the cluster is ok (CLUSTER INFO: "
                               "cluster_state)");
    else if (kind == ReplyError::TryAgain)
        fail(KW_ERR_REDIS, "slot " + std::to_string(c.slot) +
                               " is being migrated and its keys are "
                               "split between nodes (" +
                               node + ": '" + reply + "'); retry in a moment");
    else
        fail(KW_ERR_REDIS, (c.script ? std::string(c.script->name) : c.args[0]) + ": slot " +
                               std::to_string(c.slot) + " was redirected " +
                               std::to_string(kMaxRedirects) + " times (last: " + node +
                               " answered '" + reply + "'); is the cluster resharding? retry");
    return nullptr;
}

void ClusterRouter::exec_all(const std::vector<Call *> &calls, std::vector<Outcome> *outcomes) {
    outcomes->clear();
    outcomes->resize(calls.size());
    std::vector<size_t> pending(calls.size());
    for (size_t i = 0; i < calls.size(); i++) pending[i] = i;
    std::vector<Redo> redo(calls.size());
    bool refresh = false;
    for (int n = 0; n < kMaxRedirects && !pending.empty(); n++) {
        if (refresh && cluster_) refresh_topology();  // once per round, not per call
        if (refresh && sentinel()) find_sentinel_master();
        Round round;
        send_round(calls, pending, &redo, outcomes, &round);
        receive_round(calls, &redo, outcomes, &round);
        pending.swap(round.again);
        refresh = round.refresh;
        if (round.wait && !pending.empty()) {
            // 50ms doubling to 800ms, once per round: a failover or a slot move settles.
            const Backoff backoff{50, 800};
            std::this_thread::sleep_for(std::chrono::milliseconds(backoff.delay(n)));
            refresh = refresh || round.down;
        }
    }
    for (size_t i : pending) {
        Outcome &o = (*outcomes)[i];
        gave_up(*calls[i], redo[i].kind, redo[i].node, redo[i].reply);
        o.status = status_;
        o.error = error_;
    }
}

void ClusterRouter::send_round(const std::vector<Call *> &calls, const std::vector<size_t> &pending,
                               std::vector<Redo> *redo, std::vector<Outcome> *outcomes,
                               Round *round) {
    std::map<Endpoint, std::pair<int, std::string>> unreachable;
    for (size_t i : pending) {
        Call &c = *calls[i];
        Outcome &o = (*outcomes)[i];
        Redo &d = (*redo)[i];
        if (!c.node) c.node = master_for_slot(c.slot);
        if (!c.node) {
            o.status = KW_ERR_REDIS;
            o.error = "no master serves slot " + std::to_string(c.slot) +
                      " now (is the cluster down?): retry later";
            continue;
        }
        // A connection that lost its link after this round sent on it is not reconnected in
        // the round: that would drop the replies its earlier commands wait for (they are
        // reported lost) and hand them this command's reply. It goes in the next round.
        BlockingRedis *used = connection(*c.node);
        if (used && !used->connected() && round->used.count(used)) {
            round->again.push_back(i);
            continue;
        }
        // A node that could not be reached is tried once per round, not once per command.
        auto down = unreachable.find(*c.node);
        BlockingRedis *conn = down == unreachable.end() ? node(*c.node) : nullptr;
        if (!conn && down == unreachable.end())
            down = unreachable.emplace(*c.node, std::make_pair(status_, error_)).first;
        bool ok = conn != nullptr;
        if (ok && d.asking) ok = conn->send({"ASKING"});
        if (ok) ok = conn->send(c.args);
        if (conn) round->used.insert(conn);
        if (ok) {
            round->sent.emplace_back(conn, i);
        } else if ((cluster_ || sentinel()) && !d.rerouted) {
            // Never sent: once more after a refresh (a master that went away).
            d.rerouted = true;
            c.node.reset();
            round->refresh = true;
            round->again.push_back(i);
        } else {
            o.status = conn ? KW_ERR_CONNECT : down->second.first;
            o.error = conn ? "not connected to Redis at " + c.node->str() : down->second.second;
        }
    }
}

void ClusterRouter::receive_round(const std::vector<Call *> &calls, std::vector<Redo> *redo,
                                  std::vector<Outcome> *outcomes, Round *round) {
    // In the order sent: the connections share one event_base, so every node works at once.
    std::map<BlockingRedis *, std::pair<int, std::string>> lost;
    for (auto &[conn, i] : round->sent) {
        Call &c = *calls[i];
        Outcome &o = (*outcomes)[i];
        Redo &d = (*redo)[i];
        auto gone = lost.find(conn);
        if (gone == lost.end() && d.asking && !conn->receive(options_.command_timeout_ms))
            gone = lost.emplace(conn, std::make_pair(conn->status(), conn->error())).first;
        ReplyPtr r = gone == lost.end() ? conn->receive(options_.command_timeout_ms) : nullptr;
        if (!r && gone == lost.end())
            gone = lost.emplace(conn, std::make_pair(conn->status(), conn->error())).first;
        if (!r) {
            // Sent and lost: it may have run, so it is not sent again.
            const bool timeout = gone->second.first == KW_ERR_TIMEOUT;
            o.status = timeout ? KW_ERR_TIMEOUT : KW_ERR_CONNECT;
            o.error =
                timeout
                    ? gone->second.second
                    : "lost the connection to Redis at " + c.node->str() +
                          " after the command was sent (it may have run): " + gone->second.second;
            continue;
        }
        d.asking = false;
        const ReplyError kind = classify(r.get());
        if (kind == ReplyError::Moved || kind == ReplyError::Ask || kind == ReplyError::TryAgain ||
            kind == ReplyError::ClusterDown || kind == ReplyError::Loading ||
            (kind == ReplyError::NoScript && c.script) ||
            (kind == ReplyError::ReadOnly && sentinel())) {
            redirect(c, d, r.get(), kind, round);
            round->again.push_back(i);
            continue;
        }
        o.reply = std::move(r);
        o.status = KW_OK;
        o.error.clear();
    }
}

void ClusterRouter::redirect(Call &c, Redo &d, const redisReply *r, ReplyError kind, Round *round) {
    d.kind = kind;  // the last refusal, for gave_up
    d.node = c.node->str();
    d.reply.assign(r->str, r->len);
    if (kind == ReplyError::NoScript) {
        c.args[0] = "EVAL";
        c.args[1] = c.script->body;
    } else if (kind == ReplyError::Moved) {
        round->refresh = true;
        c.node = Endpoint::parse(redirect_target(r), Endpoint::Form::Strict);
    } else if (kind == ReplyError::Ask) {
        c.node = Endpoint::parse(redirect_target(r), Endpoint::Form::Strict);
        d.asking = true;
    } else if (kind == ReplyError::ReadOnly) {
        round->refresh = true;  // sentinel: a demoted master; ask where the master is now
        c.node.reset();
    } else {
        round->wait = true;
        if (kind == ReplyError::ClusterDown) round->down = true;
        c.node.reset();  // its slot's master after the wait
    }
}

}  // namespace keywatch
