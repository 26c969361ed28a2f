// RedisConn: one hiredis async connection on the event loop, from TCP/unix connect through
// AUTH (password or ACL user) to ready, with a deadline on the whole handshake.
// Loop thread only. Not thread-safe.
//
// Lifetime rules (hiredis 0.14): hiredis frees a context itself after its connect-failure
// or disconnect callback, and a context must never be freed inside one of its own
// callbacks. close() therefore detaches the context (it stops being current: its callbacks
// do nothing from then on) and a timer frees it outside any hiredis callback; if hiredis
// frees it first, the detached entry is simply forgotten.
#pragma once

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/event_loop.h"
#include "core/reply_error.h"
#include "core/url.h"

namespace keywatch {

class RedisConn {
  public:
    enum class State { Idle, Connecting, Authing, Ready, Closing };

    // Why a connection attempt failed or a ready connection was lost. permanent = retrying
    // cannot help until someone changes something: credentials refused, the URL's db does
    // not exist, the ACL user lacks a permission keywatch needs. At start such a failure
    // ends kw_engine_start at once with `status` (a KW_ERR_* code); while running it backs
    // off like any reconnect.
    struct Failure {
        Failure() = default;
        Failure(std::string m, bool perm, int st = 0, ReplyError e = ReplyError::None,
                std::string server = "")
            : message(std::move(m)),
              permanent(perm),
              status(st),
              error(e),
              server_error(std::move(server)) {}
        std::string message;
        bool permanent = false;
        int status = 0;  // KW_ERR_* for kw_engine_start; 0: derived from the failure
        // When the server's error reply ended the connection (hiredis drops a subscribed
        // connection on an error reply it cannot route, e.g. NOPERM to PSUBSCRIBE): its
        // kind and text, so the owner can say what was refused.
        ReplyError error = ReplyError::None;
        std::string server_error;
    };
    // Called with the reply. Never called if the connection goes away first: the owner
    // hears of that through on_lost.
    using ReplyFn = std::function<void(redisReply *reply)>;

    // select_db: SELECT the URL's db once connected (not for subscribers: pub/sub ignores
    // the db).
    RedisConn(event_base *base, RedisUrl url, std::string role, bool select_db = false);
    ~RedisConn();
    RedisConn(const RedisConn &) = delete;
    RedisConn &operator=(const RedisConn &) = delete;

    // Start connecting; exactly one of on_ready / on_lost follows, and on_lost again if a
    // ready connection breaks. Callbacks may call close() and connect() again.
    void connect(int64_t timeout_ms, std::function<void()> on_ready,
                 std::function<void(const Failure &)> on_lost);
    // Drop the connection now; no callback follows. Pending reply callbacks run with null.
    void close();

    // Send a command (binary-safe arguments). Returns false when not connected.
    bool command(const std::vector<std::string> &args, ReplyFn fn);
    // Same with a raw hiredis callback that stays registered (SUBSCRIBE/PSUBSCRIBE
    // messages). The callback must check live_owner() before touching its privdata.
    bool command_raw(int argc, const char **argv, const size_t *lens, redisCallbackFn *fn,
                     void *privdata);
    // The RedisConn whose current context ac is, or null (detached or being freed).
    static RedisConn *live_owner(const redisAsyncContext *ac);

    State state() const { return state_; }
    const RedisUrl &url() const { return url_; }
    const std::string &endpoint() const { return endpoint_; }
    redisAsyncContext *context() const { return ctx_; }

  private:
    static void on_connect(const redisAsyncContext *ac, int status);
    static void on_disconnect(const redisAsyncContext *ac, int status);
    static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

    void authenticate();
    void select();
    void become_ready();
    void fail(Failure f);  // during the handshake or after: drop, then report
    void detach();
    void reap();

    event_base *base_;
    RedisUrl url_;
    std::string role_, endpoint_;
    bool select_db_;
    State state_ = State::Idle;
    redisAsyncContext *ctx_ = nullptr;
    std::function<void()> on_ready_;
    std::function<void(const Failure &)> on_lost_;
    Timer handshake_timer_;  // deadline of the handshake; at 0 ms: a deferred failure
    Failure deferred_;       // failure found inside connect(), reported from the timer
    bool has_deferred_ = false;
    Timer reaper_;                            // frees detached contexts outside callbacks
    std::set<redisAsyncContext *> detached_;  // waiting for the reaper
};

// Text of a reply for messages ("(nil)", the error text, ...).
std::string reply_to_string(const redisReply *r);

}  // namespace keywatch
