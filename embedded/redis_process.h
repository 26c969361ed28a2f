// RedisProcess: a private redis-server on a free loopback port with its own temporary
// directory, stopped (by pid) when the object goes away. Used by the CLI's embedded
// default, the tests and the benchmarks; not part of libkeywatch.
// Not thread-safe: one owner thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/redis/endpoint.h"

struct redisContext;

namespace keywatch {

class RedisProcess {
  public:
    struct Options {
        std::string notify = "AKE";      // notify-keyspace-events ("" leaves it off)
        std::string password;            // requirepass when not empty
        bool appendonly = false;         // AOF on (fsync always when on)
        std::vector<std::string> extra;  // more "--name value" arguments, already split
        std::string binary = "redis-server";
        int port = 0;                    // 0: pick a free port
        std::string host = "127.0.0.1";  // the loopback address it binds (--bind): or "::1"
        // TLS only: `port` is its tls-port and there is no plain TCP port (port 0); the
        // certificates' arguments go in `extra`. This class then talks to it over a unix
        // socket in its directory, and url() is rediss://.
        bool tls_only = false;
        // Not empty: written to DIR/redis.conf at the first start and read first (what a
        // sentinel needs, with extra = {"--sentinel"}: it rewrites that file).
        std::string config_text;
    };

    // A blocking connection that stays open (so SELECT sticks), for set-up in tests and
    // benchmarks: AUTH with the password given (if any), then commands with binary-safe
    // arguments. Throws std::runtime_error when it cannot connect, AUTH is refused or a
    // command gets no reply. Not thread-safe: one owner thread.
    class Connection {
      public:
        Connection(const std::string &host, int port, const std::string &password = "");
        // At host:port or, for an Endpoint with a unix_path, at that socket.
        explicit Connection(const Endpoint &at, const std::string &password = "");
        ~Connection();
        Connection(const Connection &) = delete;
        Connection &operator=(const Connection &) = delete;

        // Runs one command; returns the reply as text (reply_lines): bulk/status as is,
        // integers in decimal, "(nil)", an error as its text, arrays one element per line.
        std::string command(const std::vector<std::string> &args);

      private:
        std::string where_;
        redisContext *ctx_ = nullptr;
    };

    RedisProcess();  // default Options
    explicit RedisProcess(Options opts);
    ~RedisProcess();
    RedisProcess(const RedisProcess &) = delete;
    RedisProcess &operator=(const RedisProcess &) = delete;

    // Start the server and wait until it answers PING. Throws std::runtime_error with the
    // server's log tail when it does not come up.
    void start();
    // SIGTERM, wait; SIGKILL if it has not exited after timeout_ms. Keeps the directory.
    void stop(int timeout_ms = 5000);
    // kill -9 without waiting for a clean shutdown.
    void kill9();
    // SIGSTOP / SIGCONT.
    void pause();
    void resume();
    // stop() then start() on the same port and directory (data persists via AOF/RDB).
    void restart();

    bool running() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    int port() const { return port_; }
    const std::string &dir() const { return dir_; }
    // redis://HOST:PORT (rediss:// when tls_only), [::1] for IPv6, with the password if any.
    std::string url() const;
    std::string host() const { return opts_.host; }
    // The unix socket it also listens on (tls_only: how command() reaches it); else empty.
    std::string unix_socket() const { return opts_.tls_only ? dir_ + "/redis.sock" : ""; }
    std::string log_tail(size_t max_bytes = 4000) const;

    // One command on a temporary Connection (with the password of Options), its reply as
    // Connection::command gives it.
    std::string command(const std::vector<std::string> &args) const;

    // A free TCP port on `host`, 127.0.0.1 or ::1 (bound then released).
    static int free_port(const std::string &host = "127.0.0.1");
    // Whether a TCP port on `host` can be bound now.
    static bool port_free(int port, const std::string &host = "127.0.0.1");

  private:
    void wait_ready(int timeout_ms);
    // Where command() talks to it: host:port, or the unix socket when tls_only.
    Endpoint admin_endpoint() const;

    Options opts_;
    pid_t pid_ = -1;
    int port_ = 0;
    bool started_once_ = false;  // a later start() keeps its port (restart)
    int port_retries_ = 0;
    std::string dir_;
};

}  // namespace keywatch
