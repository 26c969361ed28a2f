#include "embedded/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/redis/endpoint.h"
#include "core/redis/reply_text.h"

namespace keywatch {
namespace {

// A socket bound to host (an IPv4 or IPv6 literal) and port, or -1.
int bind_loopback(const std::string &host, int port) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    auto *in = reinterpret_cast<sockaddr_in *>(&addr);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&addr);
    if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(static_cast<uint16_t>(port));
        len = sizeof *in;
    } else if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(static_cast<uint16_t>(port));
        len = sizeof *in6;
    } else {
        return -1;
    }
    int fd = socket(addr.ss_family, SOCK_STREAM, 0);
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&addr), len) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

bool wait_exit(pid_t pid, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

RedisProcess::RedisProcess() : RedisProcess(Options()) {}

RedisProcess::RedisProcess(Options opts) : opts_(std::move(opts)) {
    char tmpl[] = "/tmp/keywatch-redis-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed: " + std::string(strerror(errno)));
    dir_ = tmpl;
    port_ = opts_.port ? opts_.port : free_port(opts_.host);
    // A port the caller chose for `extra` (a --tls-port picked with free_port() and
    // released) is free again now, and the kernel may hand it out twice.
    while (!opts_.port && std::find(opts_.extra.begin(), opts_.extra.end(),
                                    std::to_string(port_)) != opts_.extra.end())
        port_ = free_port(opts_.host);
}

RedisProcess::~RedisProcess() {
    if (pid_ > 0) stop(2000);
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (dir_.rfind("/tmp/keywatch-redis-", 0) == 0) (void)std::system(cmd.c_str());
}

int RedisProcess::free_port(const std::string &host) {
    int fd = bind_loopback(host, 0);
    if (fd < 0) throw std::runtime_error("bind() to a free port on " + host + " failed");
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    close(fd);
    return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
}

bool RedisProcess::port_free(int port, const std::string &host) {
    int fd = bind_loopback(host, port);
    if (fd < 0) return false;
    close(fd);
    return true;
}

std::string RedisProcess::url() const {
    std::string auth = opts_.password.empty() ? "" : ":" + opts_.password + "@";
    return (opts_.tls_only ? "rediss://" : "redis://") + auth + Endpoint{host(), port_, ""}.str();
}

void RedisProcess::start() {
    if (pid_ > 0) return;
    std::vector<std::string> args = {opts_.binary,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     opts_.host,
                                     "--dir",
                                     dir_,
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--save",
                                     "",
                                     "--daemonize",
                                     "no",
                                     "--protected-mode",
                                     "no"};
    if (opts_.tls_only) {
        args[2] = "0";  // the --port: no plain TCP port
        args.insert(args.end(),
                    {"--tls-port", std::to_string(port_), "--unixsocket", unix_socket()});
    }
    if (!opts_.notify.empty()) args.insert(args.end(), {"--notify-keyspace-events", opts_.notify});
    if (!opts_.password.empty()) args.insert(args.end(), {"--requirepass", opts_.password});
    if (opts_.appendonly)
        args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
    args.insert(args.end(), opts_.extra.begin(), opts_.extra.end());
    if (!opts_.config_text.empty()) {
        const std::string conf = dir_ + "/redis.conf";
        if (access(conf.c_str(), F_OK) != 0) std::ofstream(conf) << opts_.config_text;
        args.insert(args.begin() + 1, conf);
    }

    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
        // Child: own process group so a Ctrl-C in a terminal reaches us, not the server
        // (we stop it ourselves); stdin/stdout away from the caller's terminal.
        setpgid(0, 0);
        // Die with the process that started us, even if it is killed (a test at its
        // timeout): never leave a server behind. (Fires when the forking thread exits.)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        fprintf(stderr, "keywatch: cannot run %s: %s (install redis-server)\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    pid_ = pid;
    try {
        wait_ready(10000);
    } catch (const std::runtime_error &) {
        // Tests run in parallel: another test's server may have taken the free port between
        // free_port() and this server's bind. A port we chose ourselves is chosen again.
        if (opts_.port != 0 || started_once_ || ++port_retries_ > 5 ||
            log_tail().find("Address already in use") == std::string::npos)
            throw;
        port_ = free_port(opts_.host);
        start();
        return;
    }
    started_once_ = true;
}

void RedisProcess::wait_ready(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("redis-server exited at start (is it installed?): " +
                                     log_tail());
        }
        try {
            std::string pong = command({"PING"});
            // Loading an AOF answers -LOADING: keep waiting for that.
            if (pong.rfind("NOAUTH", 0) == 0) return;
            // The server answering must be this one, not another test's on a port this one
            // failed to bind (it then exits, and the loop above sees that).
            if (pong == "PONG" &&
                command({"INFO", "server"}).find("process_id:" + std::to_string(pid_) + "\r") !=
                    std::string::npos)
                return;
        } catch (const std::exception &) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string tail = log_tail();
    kill9();
    throw std::runtime_error("redis-server did not answer PING within " +
                             std::to_string(timeout_ms) + " ms: " + tail);
}

void RedisProcess::stop(int timeout_ms) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);  // a paused server cannot handle SIGTERM
    ::kill(pid_, SIGTERM);
    if (!wait_exit(pid_, timeout_ms)) {
        ::kill(pid_, SIGKILL);
        wait_exit(pid_, 5000);
    }
    pid_ = -1;
}

void RedisProcess::kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, 5000);
    pid_ = -1;
}

void RedisProcess::pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisProcess::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

void RedisProcess::restart() {
    stop();
    start();
}

std::string RedisProcess::log_tail(size_t max_bytes) const {
    std::ifstream in(dir_ + "/redis.log");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string all = ss.str();
    return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

RedisProcess::Connection::Connection(const std::string &host, int port, const std::string &password)
    : Connection(Endpoint{host, port, ""}, password) {}

RedisProcess::Connection::Connection(const Endpoint &at, const std::string &password)
    : where_(at.str()) {
    // Owned here until the handshake is done: a throw below frees it.
    std::unique_ptr<redisContext, decltype(&redisFree)> c(
        at.is_unix() ? redisConnectUnixWithTimeout(at.unix_path.c_str(), timeval{5, 0})
                     : redisConnectWithTimeout(at.host.c_str(), at.port, timeval{5, 0}),
        &redisFree);
    if (!c || c->err)
        throw std::runtime_error("cannot connect to " + where_ + ": " +
                                 (c ? c->errstr : "out of memory"));
    redisSetTimeout(c.get(), timeval{30, 0});
    ctx_ = c.get();
    if (!password.empty()) {
        std::string r = command({"AUTH", password});
        if (r != "OK") throw std::runtime_error("AUTH on " + where_ + " failed: " + r);
    }
    c.release();
}

RedisProcess::Connection::~Connection() {
    redisFree(ctx_);
}

std::string RedisProcess::Connection::command(const std::vector<std::string> &args) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> r(
        static_cast<redisReply *>(
            redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data())),
        &freeReplyObject);
    if (!r) throw std::runtime_error("redis command on " + where_ + " failed: " + ctx_->errstr);
    return reply_lines(r.get());
}

std::string RedisProcess::command(const std::vector<std::string> &args) const {
    return Connection(admin_endpoint(), opts_.password).command(args);
}

Endpoint RedisProcess::admin_endpoint() const {
    if (opts_.tls_only) return {"", 0, unix_socket()};
    return {host(), port_, ""};
}

}  // namespace keywatch
