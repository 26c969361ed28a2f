#include "tests/support/redis_sentinel.h"

#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/redis/endpoint.h"

namespace keywatch {
namespace {

std::vector<std::string> lines(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) out.push_back(line);
    return out;
}

// A flat [name, value, ...] reply (SENTINEL MASTER) as a map.
std::map<std::string, std::string> pairs(const std::string &text) {
    std::map<std::string, std::string> out;
    std::vector<std::string> l = lines(text);
    for (size_t i = 0; i + 1 < l.size(); i += 2) out[l[i]] = l[i + 1];
    return out;
}

template <typename Pred>
bool wait_for(int timeout_ms, Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        try {
            if (pred()) return true;
        } catch (const std::exception &) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

}  // namespace

RedisSentinels::RedisSentinels() : RedisSentinels(Options()) {}
RedisSentinels::RedisSentinels(Options opts) : opts_(std::move(opts)) {}
RedisSentinels::~RedisSentinels() {
    sentinels_.clear();  // first, so that no failover starts while the nodes stop
    nodes_.clear();
}

void RedisSentinels::start() {
    for (int i = 0; i <= opts_.replicas; i++) {
        RedisProcess::Options o;
        o.notify = opts_.notify;
        // Replicas sync at once; tests may turn Redis's own expiry off.
        o.extra = {"--repl-diskless-sync-delay", "0", "--enable-debug-command", "local"};
        if (i > 0)
            o.extra.insert(o.extra.end(),
                           {"--replicaof", nodes_[0]->host(), std::to_string(nodes_[0]->port())});
        nodes_.push_back(std::make_unique<RedisProcess>(o));
        nodes_.back()->start();
    }
    if (!wait_replicated(30000))
        throw std::runtime_error("the replicas did not sync: " + nodes_[1]->log_tail(800));
    for (int i = 0; i < opts_.sentinels; i++) {
        RedisProcess::Options o;
        o.notify = "";
        o.extra = {"--sentinel"};
        o.config_text = "sentinel monitor " + opts_.name + " " + nodes_[0]->host() + " " +
                        std::to_string(nodes_[0]->port()) + " " +
                        std::to_string(opts_.sentinels / 2 + 1) + "\n" +
                        "sentinel down-after-milliseconds " + opts_.name + " " +
                        std::to_string(opts_.down_after_ms) + "\n" + "sentinel failover-timeout " +
                        opts_.name + " " + std::to_string(opts_.failover_timeout_ms) + "\n";
        sentinels_.push_back(std::make_unique<RedisProcess>(o));
        sentinels_.back()->start();
    }
    if (!wait_sentinels_ready(30000)) {
        std::string logs;
        for (auto &s : sentinels_)
            logs += "--- sentinel " + std::to_string(s->port()) + "\n" + s->log_tail(800);
        throw std::runtime_error("the sentinels did not find each other:\n" + logs);
    }
}

bool RedisSentinels::wait_sentinels_ready(int timeout_ms) {
    const std::string replicas = std::to_string(opts_.replicas);
    const std::string others = std::to_string(opts_.sentinels - 1);
    return wait_for(timeout_ms, [&] {
        for (auto &s : sentinels_) {
            auto m = pairs(s->command({"SENTINEL", "MASTER", opts_.name}));
            if (m["num-slaves"] != replicas || m["num-other-sentinels"] != others) return false;
        }
        return true;
    });
}

std::string RedisSentinels::url() const {
    std::string out = "redis+sentinel://";
    for (size_t i = 0; i < sentinels_.size(); i++)
        out += (i ? "," : "") + Endpoint{sentinels_[i]->host(), sentinels_[i]->port(), ""}.str();
    return out + "/" + opts_.name;
}

int RedisSentinels::master() {
    for (size_t i = 0; i < nodes_.size(); i++) {
        if (!nodes_[i]->running()) continue;
        try {
            std::vector<std::string> role = lines(nodes_[i]->command({"ROLE"}));
            if (!role.empty() && role[0] == "master") return static_cast<int>(i);
        } catch (const std::exception &) {
        }
    }
    return -1;
}

int RedisSentinels::wait_new_master(int old_master, int timeout_ms) {
    int found = -1;
    wait_for(timeout_ms, [&] {
        found = master();
        if (found < 0 || found == old_master) return false;
        const std::string port = std::to_string(nodes_[static_cast<size_t>(found)]->port());
        for (auto &s : sentinels_) {
            if (!s->running()) continue;
            std::vector<std::string> addr =
                lines(s->command({"SENTINEL", "get-master-addr-by-name", opts_.name}));
            if (addr.size() != 2 || addr[1] != port) return false;
        }
        return true;
    });
    return found >= 0 && found != old_master ? found : -1;
}

bool RedisSentinels::wait_replicated(int timeout_ms) {
    return wait_for(timeout_ms, [&] {
        int m = master();
        if (m < 0) return false;
        int replicas = 0;
        for (size_t i = 0; i < nodes_.size(); i++) replicas += nodes_[i]->running() && int(i) != m;
        std::string acked =
            nodes_[static_cast<size_t>(m)]->command({"WAIT", std::to_string(replicas), "1000"});
        return std::stoi(acked) >= replicas;
    });
}

}  // namespace keywatch
