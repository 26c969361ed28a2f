// kw_test_cluster: the project's cluster starter for test drivers outside C++ (a pytest
// fixture, a shell script). Starts a real Redis Cluster (RedisCluster: 3 masters x 1
// replica by default) or, with --single, one private redis-server (RedisProcess); prints
// its nodes as one JSON line on stdout; stops every server (by pid) when stdin closes or on
// SIGTERM/SIGINT/SIGHUP. The servers also die with it if it is killed (PR_SET_PDEATHSIG).
//
//   kw_test_cluster [--single | --sentinel] [--masters N] [--replicas R] [--notify FLAGS]
//                   [--password PW (with --single)] [--host 127.0.0.1|::1] [--tls]
//   {"mode":"cluster","seed":"redis://127.0.0.1:P","nodes":[{"host":"127.0.0.1",
//    "port":P,"url":"redis://127.0.0.1:P","pid":N,"dir":"/tmp/...","role":"master"},...]}
// --tls (a cluster): TLS ports only (RedisCluster's Tls::Only): "rediss://" URLs, each node's
// "socket" (a unix socket for plain redis-cli), and "tls": the keywatch options of a client
// ({"tls.ca_file": ..., "tls.cert_file": ..., "tls.key_file": ...}).
//
// Nothing else is written on stdout; errors go to stderr with exit status 1 (bad usage 2).
// Single-threaded.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "embedded/redis_process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"

namespace {

using keywatch::RedisCluster;
using keywatch::RedisProcess;

struct Args {
    bool single = false, sentinel = false;
    RedisCluster::Options cluster;
    RedisProcess::Options process;
};

[[noreturn]] void usage(const std::string &what) {
    std::cerr << "kw_test_cluster: " << what
              << "\nusage: kw_test_cluster [--single | --sentinel] [--masters N] [--replicas R]"
                 " [--notify FLAGS] [--password PW] [--host 127.0.0.1|::1] [--tls]\n";
    std::exit(2);
}

int count_arg(const char *name, const char *text, int min) {
    char *end = nullptr;
    long n = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || n < min || n > 64)
        usage(std::string(name) + ": '" + text + "' is not a count from " + std::to_string(min) +
              " to 64");
    return static_cast<int>(n);
}

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string opt = argv[i];
        if (opt == "--single" || opt == "--sentinel") {
            (opt == "--single" ? a.single : a.sentinel) = true;
            continue;
        }
        if (opt == "--tls") {
            a.cluster.tls = RedisCluster::Options::Tls::Only;
            continue;
        }
        if (i + 1 >= argc) usage(opt == "--help" ? "help" : opt + " needs a value");
        const char *value = argv[++i];
        if (opt == "--masters") {
            a.cluster.masters = count_arg("--masters", value, 3);
        } else if (opt == "--replicas") {
            a.cluster.replicas_per_master = count_arg("--replicas", value, 0);
        } else if (opt == "--notify") {
            a.cluster.notify = a.process.notify = value;
        } else if (opt == "--password") {
            a.process.password = value;
        } else if (opt == "--host") {  // the loopback address the servers bind and announce
            a.cluster.host = a.process.host = value;
        } else {
            usage("unknown option " + opt);
        }
    }
    if (!a.process.password.empty() && !a.single) usage("--password needs --single");
    if (a.single && a.cluster.tls != RedisCluster::Options::Tls::None)
        usage("--tls is for a cluster, not with --single");
    return a;
}

nlohmann::json node_json(RedisProcess &p, bool master) {
    return {{"host", p.host()}, {"port", p.port()},
            {"url", p.url()},   {"pid", static_cast<long>(p.pid())},
            {"dir", p.dir()},   {"role", master ? "master" : "replica"}};
}

nlohmann::json describe(RedisCluster &c) {
    std::vector<size_t> masters = c.masters();
    nlohmann::json nodes = nlohmann::json::array();
    for (size_t i = 0; i < c.size(); i++) {
        bool m = std::find(masters.begin(), masters.end(), i) != masters.end();
        nodes.push_back(node_json(c.node(i), m));
        if (c.certificates()) nodes.back()["socket"] = c.node(i).unix_socket();
    }
    nlohmann::json line = {{"mode", "cluster"}, {"seed", c.seed_url()}, {"nodes", nodes}};
    if (c.certificates())
        for (auto &nv : c.certificates()->client_options()) line["tls"][nv.first] = nv.second;
    return line;
}

void on_signal(int) {}  // interrupts read(): main returns and the destructors stop the servers

// Blocks until stdin reaches end of file (or a read error, or a signal).
void wait_for_stdin_close() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;  // no SA_RESTART
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
}

// Starts the servers with stdout pointed at stderr, so the JSON line is all stdout carries.
template <typename Start>
void quietly(Start start) {
    std::fflush(stdout);
    int saved = dup(1);
    dup2(2, 1);
    try {
        start();
    } catch (...) {
        dup2(saved, 1);
        close(saved);
        throw;
    }
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
}

}  // namespace

int main(int argc, char **argv) {
    Args args = parse(argc, argv);
    try {
        std::unique_ptr<RedisCluster> cluster;
        std::unique_ptr<RedisProcess> single;
        std::unique_ptr<keywatch::RedisSentinels> sentinels;
        nlohmann::json line;
        if (args.sentinel) {
            sentinels = std::make_unique<keywatch::RedisSentinels>();
            quietly([&] { sentinels->start(); });
            nlohmann::json nodes = nlohmann::json::array(), watchers = nlohmann::json::array();
            for (size_t i = 0; i < sentinels->nodes(); i++)
                nodes.push_back(node_json(sentinels->node(i), i == 0));
            for (size_t i = 0; i < sentinels->sentinels(); i++) {
                watchers.push_back(node_json(sentinels->sentinel(i), false));
                watchers.back()["role"] = "sentinel";
            }
            line = {{"mode", "sentinel"},
                    {"seed", sentinels->url()},
                    {"nodes", nodes},
                    {"sentinels", watchers}};
        } else if (args.single) {
            single = std::make_unique<RedisProcess>(args.process);
            quietly([&] { single->start(); });
            line = {{"mode", "single"},
                    {"seed", single->url()},
                    {"nodes", nlohmann::json::array({node_json(*single, true)})}};
        } else {
            cluster = std::make_unique<RedisCluster>(args.cluster);
            quietly([&] { cluster->start(); });
            line = describe(*cluster);
        }
        std::cout << line.dump() << std::endl;
        wait_for_stdin_close();
    } catch (const std::exception &e) {
        std::cerr << "kw_test_cluster: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
