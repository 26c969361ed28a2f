#include "core/redis_conn.h"

#include <hiredis/adapters/libevent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "core/reply_error.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

// Dead peers are noticed by the heartbeat long before this, but keepalive also covers a
// connection that carries nothing at all.
void enable_keepalive(int fd) {
    int on = 1, idle = 15, intvl = 5, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

bool is_auth_error(const std::string &e) {
    return e.rfind("WRONGPASS", 0) == 0 || e.rfind("NOAUTH", 0) == 0 ||
           e.find("invalid password") != std::string::npos ||
           e.find("invalid username-password") != std::string::npos ||
           e.find("without any password configured") != std::string::npos;
}

}  // namespace

std::string reply_to_string(const redisReply *r) {
    if (!r) return "(no reply)";
    switch (r->type) {
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
        case REDIS_REPLY_ERROR:
            return std::string(r->str, r->len);
        case REDIS_REPLY_INTEGER:
            return std::to_string(r->integer);
        case REDIS_REPLY_NIL:
            return "(nil)";
        case REDIS_REPLY_ARRAY: {
            std::string out = "[";
            for (size_t i = 0; i < r->elements; i++)
                out += (i ? ", " : "") + reply_to_string(r->element[i]);
            return out + "]";
        }
        default:
            return "(unknown reply)";
    }
}

RedisConn::RedisConn(event_base *base, RedisUrl url, std::string role, bool select_db)
    : base_(base),
      url_(std::move(url)),
      role_(std::move(role)),
      endpoint_(url_.endpoint()),
      select_db_(select_db),
      handshake_timer_(base,
                       [this] {
                           if (has_deferred_) {
                               has_deferred_ = false;
                               fail(deferred_);
                               return;
                           }
                           if (state_ == State::Connecting || state_ == State::Authing)
                               fail({"timed out connecting to Redis at " + endpoint_ +
                                         (state_ == State::Authing ? " (no answer to AUTH)" : "") +
                                         ": is the server up and reachable? check redis.url and "
                                         "redis.connect_timeout",
                                     false});
                       }),
      reaper_(base, [this] { reap(); }) {}

RedisConn::~RedisConn() {
    detach();
    reap();
}

RedisConn *RedisConn::live_owner(const redisAsyncContext *ac) {
    auto *self = static_cast<RedisConn *>(ac->data);
    return (self && self->ctx_ == ac) ? self : nullptr;
}

void RedisConn::connect(int64_t timeout_ms, std::function<void()> on_ready,
                        std::function<void(const Failure &)> on_lost) {
    detach();
    on_ready_ = std::move(on_ready);
    on_lost_ = std::move(on_lost);
    state_ = State::Connecting;
    redisAsyncContext *ac = url_.is_unix() ? redisAsyncConnectUnix(url_.unix_path.c_str())
                                           : redisAsyncConnect(url_.host.c_str(), url_.port);
    if (!ac || ac->err) {
        deferred_ = {"cannot connect to Redis at " + endpoint_ + ": " +
                         (ac ? ac->errstr : "out of memory") +
                         "; is redis-server running there? check redis.url",
                     false};
        has_deferred_ = true;
        if (ac) redisAsyncFree(ac);
        handshake_timer_.arm(0);
        return;
    }
    ac->data = this;
    ctx_ = ac;
    if (!url_.is_unix()) enable_keepalive(ac->c.fd);
    redisLibeventAttach(ac, base_);
    redisAsyncSetConnectCallback(ac, &RedisConn::on_connect);
    redisAsyncSetDisconnectCallback(ac, &RedisConn::on_disconnect);
    handshake_timer_.arm(timeout_ms);
}

void RedisConn::close() {
    handshake_timer_.cancel();
    has_deferred_ = false;
    detach();
    state_ = State::Idle;
}

void RedisConn::detach() {
    if (!ctx_) return;
    detached_.insert(ctx_);
    ctx_ = nullptr;
    reaper_.arm(0);
}

void RedisConn::reap() {
    // redisAsyncFree runs the context's callbacks; they find it is not current and
    // return, so detached_ is not touched while we walk it.
    while (!detached_.empty()) {
        redisAsyncContext *ac = *detached_.begin();
        detached_.erase(detached_.begin());
        redisAsyncFree(ac);
    }
}

void RedisConn::on_connect(const redisAsyncContext *ac, int status) {
    auto *self = static_cast<RedisConn *>(ac->data);
    if (!self) return;
    if (status != REDIS_OK) {
        // hiredis frees the context after this callback.
        self->detached_.erase(const_cast<redisAsyncContext *>(ac));
        if (self->ctx_ != ac) return;
        self->ctx_ = nullptr;
        self->fail({"cannot connect to Redis at " + self->endpoint_ + ": " + ac->errstr +
                        "; is redis-server running there? check redis.url",
                    false});
        return;
    }
    if (self->ctx_ == ac) self->authenticate();
}

void RedisConn::on_disconnect(const redisAsyncContext *ac, int) {
    auto *self = static_cast<RedisConn *>(ac->data);
    if (!self) return;
    // hiredis frees the context after this callback.
    self->detached_.erase(const_cast<redisAsyncContext *>(ac));
    if (self->ctx_ != ac) return;
    self->ctx_ = nullptr;
    std::string why = ac->errstr && *ac->errstr ? ac->errstr : "closed by the server";
    if (ac->err == REDIS_ERR_OTHER) {
        // hiredis 0.14 closes the connection on an error reply that no callback awaits (an
        // error to (P)SUBSCRIBE on a subscribed connection) and keeps its text: that is a
        // refusal, not a lost connection.
        redisReply r{};
        r.type = REDIS_REPLY_ERROR;
        r.str = const_cast<char *>(why.c_str());
        r.len = why.size();
        const ReplyError kind = classify(&r);
        if (kind != ReplyError::None && kind != ReplyError::Other) {
            Failure f{"Redis at " + self->endpoint_ + " refused a command on the " + self->role_ +
                          " connection: " + why,
                      kind == ReplyError::NoPerm || kind == ReplyError::Auth, KW_ERR_AUTH, kind,
                      why};
            self->fail(f);
            return;
        }
    }
    self->fail(
        {"lost the " + self->role_ + " connection to " + self->endpoint_ + ": " + why, false});
}

void RedisConn::on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    std::unique_ptr<ReplyFn> fn(static_cast<ReplyFn *>(privdata));
    if (!reply || !live_owner(ac)) return;
    (*fn)(static_cast<redisReply *>(reply));
}

bool RedisConn::command(const std::vector<std::string> &args, ReplyFn fn) {
    if (!ctx_) return false;
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    auto *heap = new ReplyFn(std::move(fn));
    if (redisAsyncCommandArgv(ctx_, &RedisConn::on_reply, heap, static_cast<int>(argv.size()),
                              argv.data(), lens.data()) != REDIS_OK) {
        delete heap;
        return false;
    }
    return true;
}

bool RedisConn::command_raw(int argc, const char **argv, const size_t *lens, redisCallbackFn *fn,
                            void *privdata) {
    if (!ctx_) return false;
    return redisAsyncCommandArgv(ctx_, fn, privdata, argc, argv, lens) == REDIS_OK;
}

void RedisConn::authenticate() {
    if (url_.password.empty()) {
        select();
        return;
    }
    state_ = State::Authing;
    std::vector<std::string> args = {"AUTH"};
    if (!url_.user.empty()) args.push_back(url_.user);
    args.push_back(url_.password);
    command(args, [this](redisReply *r) {
        if (r->type != REDIS_REPLY_ERROR) {
            select();
            return;
        }
        std::string e(r->str, r->len);
        bool auth = is_auth_error(e) || e.find("AUTH") != std::string::npos;
        fail({auth_refused_message(url_, e), auth, KW_ERR_AUTH});
    });
}

void RedisConn::select() {
    if (!select_db_ || url_.db == 0) {
        become_ready();
        return;
    }
    command({"SELECT", std::to_string(url_.db)}, [this](redisReply *r) {
        if (r->type == REDIS_REPLY_ERROR) {
            // A db out of range ("ERR DB index is out of range"), NOAUTH or NOPERM: none
            // goes away by itself. Only a server still loading is worth another try.
            const ReplyError kind = classify(r);
            const std::string e(r->str, r->len);
            if (kind == ReplyError::Auth)
                fail({password_required_message(url_), true, KW_ERR_AUTH});
            else if (kind == ReplyError::NoPerm)
                fail(
                    {permission_message(url_, "SELECT db " + std::to_string(url_.db), e, "+select"),
                     true, KW_ERR_AUTH});
            else
                fail({select_refused_message(url_, e), !is_transient(kind), KW_ERR_REDIS});
            return;
        }
        become_ready();
    });
}

void RedisConn::become_ready() {
    handshake_timer_.cancel();
    state_ = State::Ready;
    if (on_ready_) on_ready_();
}

void RedisConn::fail(Failure f) {
    if (state_ == State::Idle) return;
    handshake_timer_.cancel();
    detach();
    state_ = State::Idle;
    auto cb = on_lost_;  // the callback may reconnect and replace on_lost_
    if (cb) cb(f);
}

}  // namespace keywatch
