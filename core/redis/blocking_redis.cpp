#include "core/redis/blocking_redis.h"

#include <event2/event.h>

#include <optional>

#include "core/redis/sigpipe_guard.h"
#include "keywatch_types.h"

namespace keywatch {

BlockingRedis::BlockingRedis(RedisUrl url, std::string role, bool select_db, event_base *base)
    : base_(base ? base : event_base_new()),
      own_base_(!base),
      conn_(std::make_unique<RedisConn>(base_, std::move(url), std::move(role), select_db)) {}

BlockingRedis::~BlockingRedis() {
    conn_.reset();  // frees its events before the base goes
    if (own_base_) event_base_free(base_);
}

template <typename Done>
bool BlockingRedis::run(Done done, int64_t timeout_ms) {
    // Already done (a reply parsed with an earlier one): no deadline timer to make, arm and
    // free, no loop pass. A pipeline's replies mostly arrive many per read.
    if (done()) return true;
    SigpipeGuard quiet;  // a write to a server that is gone is a lost connection
    bool expired = false;
    Timer deadline(base_, [&expired] { expired = true; });
    deadline.arm(timeout_ms);
    while (!done() && !expired) event_base_loop(base_, EVLOOP_ONCE);
    return done();
}

void BlockingRedis::failed(int status, const std::string &message, bool unreachable) {
    status_ = status;
    error_ = message;
    unreachable_ = unreachable;
    failure_ = RedisConn::Failure(message, false, status, unreachable);
}

int BlockingRedis::connect(int64_t timeout_ms) {
    close();
    ready_ = lost_ = false;
    conn_->connect(
        timeout_ms, [this] { ready_ = true; },
        [this](const RedisConn::Failure &f) {
            lost_ = true;
            failed(f.status ? f.status : (f.permanent ? KW_ERR_AUTH : KW_ERR_CONNECT), f.message,
                   f.unreachable);
            failure_ = f;
            failure_.status = status_;
        });
    // The handshake has its own deadline (timeout_ms); this one is a backstop.
    if (!run([this] { return ready_ || lost_; }, timeout_ms + 1000) || lost_) {
        if (!lost_) failed(KW_ERR_TIMEOUT, "timed out connecting to Redis at " + url().endpoint());
        conn_->close();
        return status_;
    }
    return KW_OK;
}

bool BlockingRedis::send_argv(int argc, const char **argv, const size_t *lens) {
    if (!connected()) return false;
    // OpenSSL's bufferevent may write at once, outside run(); a plain one writes in the loop.
    std::optional<SigpipeGuard> quiet;
    if (url().tls) quiet.emplace();
    bool sent = conn_->command_argv(
        argc, argv, lens, [this](redisReply *) { replies_.emplace_back(conn_->take_reply()); });
    if (sent) awaited_++;
    return sent;
}

bool BlockingRedis::send(const std::vector<std::string> &args) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    return send_argv(static_cast<int>(args.size()), argv.data(), lens.data());
}

ReplyPtr BlockingRedis::receive(int64_t timeout_ms) {
    if (replies_.empty() && awaited_ == 0) {
        failed(KW_ERR_INTERNAL, "no command is waiting for a reply");
        return nullptr;
    }
    if (!run([this] { return !replies_.empty() || lost_; }, timeout_ms)) {
        if (!lost_)
            failed(KW_ERR_TIMEOUT, "Redis at " + url().endpoint() + " did not answer within " +
                                       std::to_string(timeout_ms) + "ms");
        close();
        return nullptr;
    }
    if (replies_.empty()) return nullptr;  // lost_: failed() said why
    ReplyPtr r = std::move(replies_.front());
    replies_.pop_front();
    awaited_--;
    return r;
}

ReplyPtr BlockingRedis::command(const std::vector<std::string> &args, int64_t timeout_ms) {
    if (!send(args)) {
        if (!lost_) failed(KW_ERR_CONNECT, "not connected to Redis at " + url().endpoint());
        return nullptr;
    }
    return receive(timeout_ms);
}

void BlockingRedis::close() {
    std::optional<SigpipeGuard> quiet;  // a TLS close may write its close_notify
    if (url().tls) quiet.emplace();
    conn_->close();
    replies_.clear();
    awaited_ = 0;
    ready_ = false;
}

}  // namespace keywatch
