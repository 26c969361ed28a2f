// The Redis the CLI talks to: the --redis URL as given, or, with no --redis, a private
// redis-server that the CLI starts (from PATH, a free loopback port, a temporary
// directory, notify-keyspace-events "AKE") and stops when this object goes away.
// Not thread-safe: the main thread owns it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/redact_url.h"
#include "cli/stop_signal.h"
#include "embedded/redis_process.h"

namespace keywatch::cli {

class RedisTarget {
  public:
    RedisTarget() = default;
    ~RedisTarget();
    RedisTarget(const RedisTarget &) = delete;
    RedisTarget &operator=(const RedisTarget &) = delete;

    // url empty: start the private server (registered with stop for a forced exit).
    // False with *err when the server cannot be started.
    bool open(const std::string &url, StopSignal *stop, std::string *err);
    // Stops the private server, if any (by pid). Idempotent.
    void close();

    const std::string &url() const { return url_; }
    bool embedded() const { return server_ != nullptr; }
    // The private server's pid; 0 when not embedded.
    pid_t server_pid() const { return server_ ? server_->pid() : 0; }
    // "started a private redis-server ..." for the user; empty when not embedded.
    std::string started_message() const;

  private:
    std::string url_;
    std::unique_ptr<RedisProcess> server_;
    StopSignal *stop_ = nullptr;
};

// The URL the options name: --redis (or KEYWATCH_REDIS_URL) as flag_url, or --conf
// redis.url=..., which is taken out of *conf so that one URL is applied. Both naming
// different URLs is bad input: false with *err naming both (passwords hidden). *url is ""
// when neither names one.
bool resolve_redis_url(const std::string &flag_url,
                       std::vector<std::pair<std::string, std::string>> *conf, std::string *url,
                       std::string *err);

}  // namespace keywatch::cli
