// RedisConn: keywatch's one connection to Redis. It owns its socket I/O (a libevent
// bufferevent over TCP, a unix socket, or TLS for rediss://; a plain socket's reads are its
// own recv() calls), parses RESP with hiredis' reader and formats commands with hiredis,
// runs the one handshake every conversation uses (AUTH with an optional ACL user, SELECT,
// all under one deadline), keeps the queue of reply callbacks and routes pub/sub pushes
// (messages and (P)SUBSCRIBE confirmations) to a push handler. The loop's connections use
// it on the engine's event_base; BlockingRedis (core/redis/blocking_redis.h) runs the same class
// on a private event_base.
// Loop thread only. Not thread-safe.
#pragma once

#include <event2/bufferevent.h>
#include <hiredis/hiredis.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/redis/event_loop.h"
#include "core/redis/reply_error.h"
#include "core/redis/reply_text.h"
#include "core/redis/url.h"

namespace keywatch {

class TlsContext;
struct TlsTrace;

class RedisConn {
  public:
    enum class State { Idle, Connecting, Authing, Ready };

    // Why a connection attempt failed or a ready connection was lost. permanent = retrying
    // cannot help until someone changes something: credentials refused, the URL's db does
    // not exist, the TLS certificates do not match. At start such a failure ends
    // kw_engine_start at once with `status` (a KW_ERR_* code); while running it backs off
    // like any reconnect.
    struct Failure {
        Failure() = default;
        Failure(std::string m, bool perm, int st = 0, bool unreach = false)
            : message(std::move(m)), permanent(perm), status(st), unreachable(unreach) {}
        // A failure whose message is what happened, then what to do about it ("WHAT; FIX"),
        // both kept apart too (`keywatch check` shows them on two lines).
        static Failure advised(std::string what, std::string fix, bool perm, int st,
                               bool unreach = false);
        std::string message;
        std::string what, fix;  // the two parts of message, when it was made by advised()
        bool permanent = false;
        int status = 0;  // KW_ERR_* for kw_engine_start; 0: derived from the failure
        // No connection could be made at all (refused, unreachable, unknown host): a server
        // that may still be starting, as opposed to one that answered wrongly.
        bool unreachable = false;
    };
    // Called with the reply, which is freed when the callback returns (unless the callback
    // takes it: take_reply). Never called if the connection goes away first: the owner
    // hears of that through on_lost.
    using ReplyFn = std::function<void(redisReply *reply)>;

    // select_db: SELECT the URL's db once connected (not for subscribers: pub/sub ignores
    // the db).
    RedisConn(event_base *base, RedisUrl url, std::string role, bool select_db = false);
    ~RedisConn();
    RedisConn(const RedisConn &) = delete;
    RedisConn &operator=(const RedisConn &) = delete;

    // Start connecting; exactly one of on_ready / on_lost follows, and on_lost again if a
    // ready connection breaks. Callbacks may call close() and connect() again, or destroy
    // this object.
    void connect(int64_t timeout_ms, std::function<void()> on_ready,
                 std::function<void(const Failure &)> on_lost);
    // Drop the connection now; no callback follows (pending reply callbacks are dropped).
    void close();

    // Send a command (binary-safe arguments). Returns false when not connected.
    bool command(const std::vector<std::string> &args, ReplyFn fn);
    bool command_argv(int argc, const char **argv, const size_t *lens, ReplyFn fn);

    // Pub/sub. Pushes are the replies no callback awaits: message, pmessage, and the
    // confirmations of subscribe(). An error refusing a subscribe() goes there too.
    void set_push_handler(ReplyFn fn) { push_ = std::move(fn); }
    // (P)SUBSCRIBE with args[0] the command and one or more channels or patterns after it:
    // one confirmation per channel reaches the push handler. False when not connected.
    bool subscribe(const std::vector<std::string> &args);

    // Inside a reply callback or the push handler: the reply is the caller's from now on
    // (free it with freeReplyObject). Null outside a callback.
    redisReply *take_reply();

    State state() const { return state_; }
    const RedisUrl &url() const { return url_; }
    const std::string &endpoint() const { return endpoint_; }

  private:
    // A reply owed: a callback, or `confirmations` pub/sub confirmations of a subscribe().
    struct Pending {
        ReplyFn fn;
        size_t confirmations = 0;
    };

    static void on_read(bufferevent *bev, void *arg);
    static void on_event(bufferevent *bev, short what, void *arg);
    static void on_readable(evutil_socket_t fd, short what, void *arg);

    bool send(int argc, const char **argv, const size_t *lens);
    void open_next_address();
    bool open(const sockaddr *addr, int len, std::string *err);
    void own_reads();
    bool parse(const char *data, size_t size);  // false once this connection is gone
    void deliver(redisReply *r);
    void start_tls();
    void transport_failed(short what);
    Failure timed_out() const;
    Failure lost(const std::string &why) const;
    void authenticate();
    void select();
    void become_ready();
    void fail(Failure f);  // during the handshake or after: drop, then report
    void drop();           // free the transport; no callback

    event_base *base_;
    RedisUrl url_;
    std::string role_, endpoint_;
    bool select_db_;
    State state_ = State::Idle;
    static constexpr size_t kReadSize = 64 * 1024;  // most bytes one read takes
    bufferevent *bev_ = nullptr;
    event *read_ev_ = nullptr;    // plain sockets, once connected: reads without the bufferevent
    std::vector<char> read_buf_;  // kReadSize bytes, for the read being parsed
    redisReader *reader_ = nullptr;
    std::unique_ptr<TlsContext> tls_;
    std::unique_ptr<TlsTrace> trace_;       // what the TLS layer saw (the SSL points at it)
    std::vector<std::vector<char>> addrs_;  // resolved addresses still to try
    std::string last_connect_error_;
    bool tcp_connected_ = false;  // the socket is connected (a TLS handshake may follow)
    bool tls_ready_ = false;      // the TLS handshake is done
    bool received_ = false;       // the server has sent at least one byte of RESP
    bool ever_received_ = false;  // ... on any connection this object made
    std::string first_command_;   // the first command sent, until something is received
    std::deque<Pending> pending_;
    ReplyFn push_;
    bool in_pubsub_ = false;  // a subscribe() was confirmed: messages may arrive
    std::function<void()> on_ready_;
    std::function<void(const Failure &)> on_lost_;
    Timer handshake_timer_;  // deadline of the handshake; at 0 ms: a deferred failure
    Failure deferred_;       // failure found inside connect(), reported from the timer
    bool has_deferred_ = false;
    uint64_t generation_ = 0;         // bumped by every drop(): a read loop notices and stops
    bool *destroyed_ = nullptr;       // set while parse() runs: tells it this object is gone
    redisReply **current_ = nullptr;  // the reply being delivered; null once taken
};

}  // namespace keywatch
