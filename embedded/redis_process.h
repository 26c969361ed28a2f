// RedisProcess: a private redis-server on a free loopback port with its own temporary
// directory, stopped (by pid) when the object goes away. Used by the CLI's embedded
// default, the tests and the benchmarks; not part of libkeywatch.
// Not thread-safe: one owner thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace keywatch {

class RedisProcess {
  public:
    struct Options {
        std::string notify = "AKE";      // notify-keyspace-events ("" leaves it off)
        std::string password;            // requirepass when not empty
        bool appendonly = false;         // AOF on (fsync always when on)
        std::vector<std::string> extra;  // more "--name value" arguments, already split
        std::string binary = "redis-server";
        int port = 0;  // 0: pick a free port
        std::string host = "127.0.0.1";  // the loopback address it binds (--bind): or "::1"
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
    std::string url() const;  // redis://HOST:PORT, [::1] for IPv6 (with the password if any)
    std::string host() const { return opts_.host; }
    std::string log_tail(size_t max_bytes = 4000) const;

    // One blocking command on a fresh connection (set-up in tests and benchmarks; binary
    // safe arguments). Returns the reply as text (bulk/simple/integer), or
    // "(nil)", or "ERR ..." for an error reply; arrays are joined with '\n'.
    std::string command(const std::vector<std::string> &args) const;

    // A free TCP port on `host`, 127.0.0.1 or ::1 (bound then released).
    static int free_port(const std::string &host = "127.0.0.1");
    // Whether a TCP port on `host` can be bound now.
    static bool port_free(int port, const std::string &host = "127.0.0.1");

  private:
    void wait_ready(int timeout_ms);

    Options opts_;
    pid_t pid_ = -1;
    int port_ = 0;
    std::string dir_;
};

}  // namespace keywatch
