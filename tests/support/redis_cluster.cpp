#include "tests/support/redis_cluster.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/redis/endpoint.h"

namespace keywatch {
namespace {

std::string field(const std::string &info, const std::string &name) {
    size_t at = info.find(name + ":");
    if (at == std::string::npos) return "";
    size_t end = info.find_first_of("\r\n", at);
    return info.substr(at + name.size() + 1, end - at - name.size() - 1);
}

}  // namespace

RedisCluster::RedisCluster() : RedisCluster(Options()) {}

RedisCluster::RedisCluster(Options opts) : opts_(opts) {}

RedisCluster::~RedisCluster() = default;  // each RedisProcess stops its server

void RedisCluster::start() {
    int total = opts_.masters * (1 + opts_.replicas_per_master);
    for (int i = 0; i < total; i++) {
        RedisProcess::Options o;
        o.notify = opts_.notify;
        o.appendonly = opts_.appendonly;
        o.host = opts_.host;
        o.extra = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", std::to_string(opts_.node_timeout_ms),
                   // A replica with stale data may still take over: tests kill masters.
                   "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage",
                   "no",
                   // Replicas sync at once instead of after the default 5 s grace.
                   "--repl-diskless-sync-delay", "0",
                   // Tests turn Redis's own expiry off (DEBUG SET-ACTIVE-EXPIRE 0).
                   "--enable-debug-command", "local"};
        // The cluster bus listens on port + 10000 (tls-port + 10000 under tls-cluster yes):
        // both must be free, and both below the kernel's ephemeral ports (32768 and up): a
        // node restarted by a test must find its ports unused, and an outgoing connection
        // (an engine reconnecting to the other nodes) could otherwise be given one of them
        // as its local port.
        std::random_device rd;
        auto pick = [&](int other) {
            for (int tries = 0; tries < 1000; tries++) {
                int p = 10000 + static_cast<int>(rd() % 12768);
                if (p != other && p != other + 10000 && p + 10000 != other &&
                    RedisProcess::port_free(p, o.host) &&
                    RedisProcess::port_free(p + 10000, o.host))
                    return p;
            }
            return 0;
        };
        o.port = pick(0);
        o.tls_only = opts_.tls == Options::Tls::Only;
        if (opts_.tls != Options::Tls::None) {
            if (!certs_) certs_ = std::make_unique<TestCertificates>();
            tls_ports_.push_back(o.tls_only ? o.port : pick(o.port));
            for (auto &a : tls_args(static_cast<size_t>(i))) o.extra.push_back(a);
        }
        nodes_.push_back(std::make_unique<RedisProcess>(o));
        nodes_.back()->start();
    }
    const std::string cmd = create_command();
    if (std::system(cmd.c_str()) != 0)
        throw std::runtime_error("redis-cli --cluster create failed (see " + nodes_[0]->dir() +
                                 "/create.log); is redis-tools installed?");
    if (!wait_healthy(60000) || !wait_replicated(60000) || !wait_roles_known(60000)) {
        std::string logs;
        for (auto &n : nodes_)
            logs += "--- node " + std::to_string(n->port()) + "\n" + n->log_tail(800);
        throw std::runtime_error("the cluster did not become healthy:\n" + logs);
    }
}

std::vector<std::string> RedisCluster::tls_args(size_t i) const {
    if (opts_.tls == Options::Tls::None) return {};
    std::vector<std::string> args = certs_->server_files("yes");
    args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
    if (opts_.tls == Options::Tls::BesidePlain)
        args.insert(args.end(), {"--tls-port", std::to_string(tls_ports_[i])});
    return args;
}

std::string RedisCluster::create_command() const {
    // Over TLS the nodes meet at their tls-ports (the cluster bus is at tls-port + 10000).
    // redis-cli 7.0 takes an IPv6 node unbracketed ("::1:7000"), as Redis prints it.
    std::string cmd = "redis-cli";
    if (certs_)
        cmd += " --tls --cacert " + certs_->path("ca.crt") + " --cert " +
               certs_->path("client.crt") + " --key " + certs_->path("client.key");
    cmd += " --cluster create";
    for (size_t i = 0; i < nodes_.size(); i++)
        cmd += " " + opts_.host + ":" + std::to_string(certs_ ? tls_ports_[i] : nodes_[i]->port());
    return cmd + " --cluster-replicas " + std::to_string(opts_.replicas_per_master) +
           " --cluster-yes > " + nodes_[0]->dir() + "/create.log 2>&1";
}

bool RedisCluster::wait_healthy(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        bool ok = true;
        for (auto &n : nodes_) {
            if (!n->running()) continue;
            try {
                std::string info = n->command({"CLUSTER", "INFO"});
                if (field(info, "cluster_state") != "ok" ||
                    field(info, "cluster_slots_ok") != "16384") {
                    ok = false;
                    break;
                }
            } catch (const std::exception &) {
                ok = false;
                break;
            }
        }
        // Every slot must be served by a running master.
        if (ok) {
            for (int slot : {0, 5000, 10000, 16383})
                if (master_of_slot(slot) < 0) ok = false;
        }
        if (ok) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

bool RedisCluster::wait_roles_known(int timeout_ms) {
    // Gossip spreads roles slowly after `--cluster create`: a master that does not see a
    // node as its replica yet ignores that node's CLUSTER FAILOVER (it times out).
    size_t replicas = static_cast<size_t>(opts_.masters * opts_.replicas_per_master);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        bool ok = true;
        for (auto &n : nodes_) {
            std::istringstream lines(n->command({"CLUSTER", "NODES"}));
            std::string line;
            size_t seen = 0;
            while (std::getline(lines, line)) {
                std::istringstream f(line);
                std::string id, addr, flags, master;
                f >> id >> addr >> flags >> master;
                if (flags.find("slave") != std::string::npos && master != "-") seen++;
            }
            if (seen != replicas) ok = false;
        }
        if (ok) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

bool RedisCluster::wait_replicated(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        bool ok = true;
        for (size_t m : masters()) {
            std::string info = nodes_[m]->command({"INFO", "replication"});
            std::string offset = field(info, "master_repl_offset");
            int want = opts_.replicas_per_master;
            int caught_up = 0;
            for (int i = 0; i < want; i++) {
                std::string slave = field(info, "slave" + std::to_string(i));
                // Online (past the first full sync) and at the master's offset.
                if (slave.find("state=online") != std::string::npos &&
                    slave.find("offset=" + offset + ",") != std::string::npos)
                    caught_up++;
            }
            if (caught_up < want) ok = false;
        }
        if (ok) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

std::vector<size_t> RedisCluster::masters() {
    std::vector<size_t> out;
    for (size_t i = 0; i < nodes_.size(); i++) {
        if (!nodes_[i]->running()) continue;
        try {
            if (field(nodes_[i]->command({"INFO", "replication"}), "role") == "master")
                out.push_back(i);
        } catch (const std::exception &) {
        }
    }
    return out;
}

int RedisCluster::master_of_slot(int slot) {
    for (auto &n : nodes_) {
        if (!n->running()) continue;
        try {
            // CLUSTER SLOTS as text: start, end, ip, port, id, ... per range.
            std::string text = n->command({"CLUSTER", "NODES"});
            std::istringstream lines(text);
            std::string line;
            while (std::getline(lines, line)) {
                std::istringstream f(line);
                std::string id, addr, flags, master, ping, pong, epoch, link;
                f >> id >> addr >> flags >> master >> ping >> pong >> epoch >> link;
                if (flags.find("master") == std::string::npos ||
                    flags.find("fail") != std::string::npos)
                    continue;
                std::string range;
                while (f >> range) {
                    if (range[0] == '[') continue;  // migrating/importing markers
                    size_t dash = range.find('-');
                    int lo = std::stoi(range.substr(0, dash));
                    int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
                    if (slot >= lo && slot <= hi) {
                        // "host:port@cport": ::1:7000@17000 on IPv6, as Redis prints it.
                        const auto node =
                            Endpoint::parse(addr.substr(0, addr.find('@')), Endpoint::Form::Redis);
                        int idx = node ? index_of_port(node->port) : -1;
                        if (idx >= 0 && nodes_[static_cast<size_t>(idx)]->running()) return idx;
                        return -1;
                    }
                }
            }
            return -1;
        } catch (const std::exception &) {
        }
    }
    return -1;
}

int RedisCluster::index_of_port(int port) const {
    for (size_t i = 0; i < nodes_.size(); i++)
        if (nodes_[i]->port() == port) return static_cast<int>(i);
    return -1;
}

std::string RedisCluster::seed_url() {
    for (auto &n : nodes_)
        if (n->running()) return n->url();
    return "";
}

void RedisCluster::migrate_slot(int slot, size_t to,
                                const std::function<bool(const std::string &)> &first,
                                const std::function<void()> &before_handover) {
    int from = master_of_slot(slot);
    if (from < 0) throw std::runtime_error("slot " + std::to_string(slot) + " has no master");
    RedisProcess &src = *nodes_[static_cast<size_t>(from)], &dst = *nodes_[to];
    const std::string src_id = src.command({"CLUSTER", "MYID"}),
                      dst_id = dst.command({"CLUSTER", "MYID"}), s = std::to_string(slot);
    auto must = [](const std::string &reply, const std::string &what) {
        if (reply != "OK") throw std::runtime_error(what + ": " + reply);
    };
    must(dst.command({"CLUSTER", "SETSLOT", s, "IMPORTING", src_id}), "SETSLOT IMPORTING");
    must(src.command({"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id}), "SETSLOT MIGRATING");
    bool first_group = static_cast<bool>(first);
    for (;;) {
        std::string listed = src.command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
        if (listed.empty()) break;
        std::vector<std::string> args = {"MIGRATE", dst.host(), std::to_string(dst.port()), "", "0",
                                         "5000",    "KEYS"};
        std::istringstream lines(listed);
        std::string k;
        while (std::getline(lines, k))
            if (!first_group || first(k)) args.push_back(k);
        if (args.size() == 7) {  // the first group is across: the others may go now
            first_group = false;
            continue;
        }
        must(src.command(args), "MIGRATE");
    }
    if (before_handover) before_handover();
    for (size_t m : masters()) nodes_[m]->command({"CLUSTER", "SETSLOT", s, "NODE", dst_id});
}

}  // namespace keywatch
