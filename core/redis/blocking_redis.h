// BlockingRedis: RedisConn driven on a private event_base, for callers that block (the
// producer Client, the topology probe): the same transport (TCP, unix socket, TLS), the
// same handshake and the same reply types as the engine's loop connections, with a
// deadline on every wait. Not thread-safe: one owner thread.
#pragma once

#include <hiredis/hiredis.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/redis/redis_conn.h"

namespace keywatch {

struct ReplyDeleter {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class BlockingRedis {
  public:
    // role names the connection in messages ("client", "topology"); select_db: SELECT the
    // URL's db in the handshake. base: an event_base shared with other BlockingRedis of the
    // same thread (waiting on one then moves them all: a pipeline over several nodes); null:
    // a private one.
    BlockingRedis(RedisUrl url, std::string role, bool select_db, event_base *base = nullptr);
    ~BlockingRedis();
    BlockingRedis(const BlockingRedis &) = delete;
    BlockingRedis &operator=(const BlockingRedis &) = delete;

    // Connects and runs the handshake (AUTH, SELECT) within timeout_ms. KW_OK, or a KW_ERR_*
    // status with error() saying what failed and what to do.
    int connect(int64_t timeout_ms);
    bool connected() const { return conn_->state() == RedisConn::State::Ready; }

    // Queues a command; its reply comes from receive(), in order. False if not connected.
    bool send(const std::vector<std::string> &args);
    bool send_argv(int argc, const char **argv, const size_t *lens);
    // The next reply, waiting at most timeout_ms. Null when the connection failed or the
    // wait ran out (the connection is closed then): status() and error() say which.
    ReplyPtr receive(int64_t timeout_ms);
    // send() then receive().
    ReplyPtr command(const std::vector<std::string> &args, int64_t timeout_ms);
    void close();

    // Of the last failure: a KW_ERR_* status, the message, and whether no connection could
    // be made at all (a server that may still be starting).
    int status() const { return status_; }
    const std::string &error() const { return error_; }
    bool unreachable() const { return unreachable_; }
    // The last failure of the connection itself (what and fix apart where it names a fix).
    const RedisConn::Failure &failure() const { return failure_; }
    const RedisUrl &url() const { return conn_->url(); }

  private:
    // Runs the private loop until done() holds or timeout_ms passes; returns done().
    template <typename Done>
    bool run(Done done, int64_t timeout_ms);
    void failed(int status, const std::string &message, bool unreachable = false);

    event_base *base_;
    bool own_base_;
    std::unique_ptr<RedisConn> conn_;
    std::deque<ReplyPtr> replies_;
    size_t awaited_ = 0;  // replies sent for and not yet received
    bool ready_ = false, lost_ = false;
    int status_ = 0;
    std::string error_;
    bool unreachable_ = false;
    RedisConn::Failure failure_;
};

}  // namespace keywatch
