#include "core/redis/redis_conn.h"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <hiredis/read.h>
#include <openssl/err.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/redis/reply_error.h"
#include "core/redis/tls.h"
#include "keywatch_types.h"

namespace keywatch {
namespace {

// Dead peers are noticed by the heartbeat long before this, but keepalive also covers a
// connection that carries nothing at all. No Nagle: commands are small and pipelined.
void tune_tcp(evutil_socket_t fd) {
    int on = 1, idle = 15, intvl = 5, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

// What kind of pub/sub push a reply is (RESP2 arrays led by their kind).
enum class Push { None, Message, Confirmation };

Push push_kind(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return Push::None;
    const std::string_view k(r->element[0]->str, r->element[0]->len);
    if (k == "pmessage" || k == "message") return Push::Message;
    if (k == "psubscribe" || k == "subscribe" || k == "punsubscribe" || k == "unsubscribe")
        return Push::Confirmation;
    return Push::None;
}

RedisConn::Failure refused(const std::string &endpoint, const std::string &why) {
    return RedisConn::Failure::advised("cannot connect to Redis at " + endpoint + ": " + why,
                                       "is redis-server running there? check redis.url", false,
                                       KW_ERR_CONNECT, true);
}

// What a connection of this role is for, in the words of a message about losing it.
std::string activity(const std::string &role) {
    static const std::pair<const char *, const char *> kWords[] = {
        {"topology", "reading the cluster topology"},
        {"subscriber", "listening for notifications"},
        {"queue", "working the queues"},
        {"client", "running commands"},
        {"check", "checking the server"},
    };
    for (const auto &w : kWords)
        if (role == w.first) return w.second;
    return "talking to it (" + role + ")";
}

// "CLUSTER SHARDS", "AUTH": a command's name (with the subcommand of a container command),
// never its arguments (a password).
std::string command_name(int argc, const char **argv, const size_t *lens) {
    std::string name(argv[0], lens[0]);
    for (auto &c : name) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    static const char *kContainers[] = {"CLUSTER", "CONFIG", "CLIENT", "ACL", "SCRIPT"};
    for (const char *c : kContainers)
        if (argc > 1 && name == c) return name + " " + std::string(argv[1], lens[1]);
    return name;
}

// The resolved addresses of url, as raw sockaddr bytes; empty with *err on failure.
std::vector<std::vector<char>> resolve(const RedisUrl &url, std::string *err) {
    std::vector<std::vector<char>> out;
    if (url.is_unix()) {
        sockaddr_un sun{};
        sun.sun_family = AF_UNIX;
        if (url.unix_path.size() >= sizeof sun.sun_path) {
            *err = "the socket path is longer than " + std::to_string(sizeof sun.sun_path - 1) +
                   " bytes";
            return out;
        }
        memcpy(sun.sun_path, url.unix_path.c_str(), url.unix_path.size() + 1);
        const char *p = reinterpret_cast<const char *>(&sun);
        out.emplace_back(p, p + sizeof sun);
        return out;
    }
    evutil_addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    const std::string port = std::to_string(url.port);
    int rc = evutil_getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
        *err = "cannot resolve '" + url.host + "': " + evutil_gai_strerror(rc);
        return out;
    }
    for (evutil_addrinfo *a = res; a; a = a->ai_next) {
        const char *p = reinterpret_cast<const char *>(a->ai_addr);
        out.emplace_back(p, p + a->ai_addrlen);
    }
    evutil_freeaddrinfo(res);
    return out;
}

}  // namespace

RedisConn::Failure RedisConn::Failure::advised(std::string what, std::string fix, bool perm, int st,
                                               bool unreach) {
    Failure f(what + "; " + fix, perm, st, unreach);
    f.what = std::move(what);
    f.fix = std::move(fix);
    return f;
}

RedisConn::RedisConn(event_base *base, RedisUrl url, std::string role, bool select_db)
    : base_(base),
      url_(std::move(url)),
      role_(std::move(role)),
      endpoint_(url_.endpoint()),
      select_db_(select_db),
      handshake_timer_(base, [this] {
          if (has_deferred_) {
              has_deferred_ = false;
              fail(deferred_);
              return;
          }
          if (state_ == State::Connecting || state_ == State::Authing) fail(timed_out());
      }) {}

RedisConn::~RedisConn() {
    if (destroyed_) *destroyed_ = true;
    drop();
}

RedisConn::Failure RedisConn::timed_out() const {
    // A TLS hello unanswered by a port that never spoke TLS to us: most likely a plain one
    // (one that did before is a server paused or overloaded).
    if (tcp_connected_ && tls_ && !tls_ready_ && !ever_received_) return tls_->no_answer();
    // No connection at all within the time: unreachable, like a refused one.
    return {"timed out connecting to Redis at " + endpoint_ +
                (state_ == State::Authing ? " (no answer to AUTH)" : "") +
                ": is the server up and reachable? check redis.url and redis.connect_timeout",
            false, KW_ERR_TIMEOUT, !tcp_connected_};
}

void RedisConn::connect(int64_t timeout_ms, std::function<void()> on_ready,
                        std::function<void(const Failure &)> on_lost) {
    drop();
    on_ready_ = std::move(on_ready);
    on_lost_ = std::move(on_lost);
    state_ = State::Connecting;
    has_deferred_ = false;
    handshake_timer_.arm(timeout_ms);
    // Failures found here are reported from the timer, never from inside connect().
    auto defer = [this](Failure f) {
        drop();
        deferred_ = std::move(f);
        has_deferred_ = true;
        handshake_timer_.arm(0);
    };
    std::string err;
    if (url_.tls && !(tls_ = TlsContext::make(url_, &err))) {
        defer({err, true, KW_ERR_CONNECT});
        return;
    }
    if (tls_ && !trace_) trace_ = std::make_unique<TlsTrace>();
    addrs_ = resolve(url_, &err);
    if (addrs_.empty()) {
        defer(refused(endpoint_, err));
        return;
    }
    open_next_address();
    if (!bev_) defer(refused(endpoint_, last_connect_error_));
}

void RedisConn::open_next_address() {
    while (!addrs_.empty()) {
        std::vector<char> a = std::move(addrs_.front());
        addrs_.erase(addrs_.begin());
        if (open(reinterpret_cast<const sockaddr *>(a.data()), static_cast<int>(a.size()),
                 &last_connect_error_))
            return;
    }
}

bool RedisConn::open(const sockaddr *addr, int len, std::string *err) {
    // TLS starts once the socket is connected (start_tls): a refused connection is then
    // told apart from a failed handshake, and retried like one over plain TCP.
    bev_ = bufferevent_socket_new(base_, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev_) {
        *err = "out of memory";
        return false;
    }
    bufferevent_setcb(bev_, &RedisConn::on_read, nullptr, &RedisConn::on_event, this);
    if (bufferevent_socket_connect(bev_, const_cast<sockaddr *>(addr), len) != 0) {
        *err = evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
        bufferevent_free(bev_);
        bev_ = nullptr;
        return false;
    }
    if (!url_.is_unix()) tune_tcp(bufferevent_getfd(bev_));
    // A subscriber under a flood reads in large gulps: fewer trips through the loop. A plain
    // socket is read by read_ev_ once connected (see own_reads()); TLS through the bufferevent.
    bufferevent_set_max_single_read(bev_, kReadSize);
    bufferevent_enable(bev_, EV_WRITE);
    reader_ = redisReaderCreate();
    read_buf_.resize(kReadSize);  // once: never reallocated while a read is parsed
    return true;
}

void RedisConn::start_tls() {
    std::string err;
    SSL *ssl = tls_->new_session(trace_.get(), &err);
    if (!ssl) {
        fail({err, false, KW_ERR_CONNECT});
        return;
    }
    // The connected socket moves from the plain bufferevent to a TLS one.
    const evutil_socket_t fd = bufferevent_getfd(bev_);
    bufferevent_setfd(bev_, -1);  // freeing it must not close the socket
    bufferevent_free(bev_);       // safe inside its own callback (reference counted)
    bev_ = bufferevent_openssl_socket_new(base_, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                          BEV_OPT_CLOSE_ON_FREE);
    if (!bev_) {
        SSL_free(ssl);
        evutil_closesocket(fd);
        fail({"cannot start TLS to " + endpoint_ + ": out of memory", false, KW_ERR_CONNECT});
        return;
    }
    // A server that closes without close_notify (a killed redis-server) is a lost
    // connection like any EOF, not a TLS error.
    bufferevent_openssl_set_allow_dirty_shutdown(bev_, 1);
    bufferevent_setcb(bev_, &RedisConn::on_read, nullptr, &RedisConn::on_event, this);
    bufferevent_set_max_single_read(bev_, kReadSize);
    bufferevent_enable(bev_, EV_READ | EV_WRITE);
}

void RedisConn::own_reads() {
    // libevent 2.1's evbuffer_read() reads at most 4 KB per call, each after a FIONREAD
    // ioctl: under a flood, many more reads, loop trips and intake flushes per event than
    // hiredis' own I/O (one 16 KB read). Plain sockets are read here instead: one recv()
    // of up to kReadSize per readable event.
    read_ev_ = event_new(base_, bufferevent_getfd(bev_), EV_READ | EV_PERSIST,
                         &RedisConn::on_readable, this);
    if (read_ev_) event_add(read_ev_, nullptr);
}

void RedisConn::close() {
    handshake_timer_.cancel();
    has_deferred_ = false;
    drop();
    state_ = State::Idle;
}

void RedisConn::drop() {
    generation_++;
    if (read_ev_) event_free(read_ev_);  // safe inside its own callback
    read_ev_ = nullptr;
    // A TLS session freed later (its bufferevent is reference counted) records no more.
    if (SSL *ssl = bev_ ? bufferevent_openssl_get_ssl(bev_) : nullptr)
        SSL_set_msg_callback_arg(ssl, nullptr);
    if (bev_) bufferevent_free(bev_);  // safe inside its own callbacks (reference counted)
    bev_ = nullptr;
    if (reader_) redisReaderFree(reader_);
    reader_ = nullptr;
    tls_.reset();
    addrs_.clear();
    pending_.clear();
    in_pubsub_ = false;
    tcp_connected_ = tls_ready_ = received_ = false;
    first_command_.clear();
}

void RedisConn::on_event(bufferevent *, short what, void *arg) {
    auto *self = static_cast<RedisConn *>(arg);
    if (what & BEV_EVENT_CONNECTED) {
        self->addrs_.clear();
        if (self->tls_ && !self->tcp_connected_) {
            self->tcp_connected_ = true;
            self->start_tls();
            return;
        }
        self->tcp_connected_ = true;
        self->tls_ready_ = self->tls_ != nullptr;
        if (!self->tls_) {
            self->own_reads();
            if (!self->read_ev_) {
                self->fail({"cannot watch the " + self->role_ + " connection to " +
                                self->endpoint_ + " for reading: out of memory",
                            false, KW_ERR_CONNECT});
                return;
            }
        }
        self->authenticate();
    } else if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
        self->transport_failed(what);
    }
}

void RedisConn::transport_failed(short what) {
    const int sock_err = EVUTIL_SOCKET_ERROR();
    std::string why = (what & BEV_EVENT_EOF) || !sock_err ? "closed by the server"
                                                          : evutil_socket_error_to_string(sock_err);
    if (!tcp_connected_) {
        // Refused or unreachable (over TLS too: the handshake starts once connected): the
        // next address of the name, if any.
        last_connect_error_ = why;
        generation_++;
        bufferevent_free(bev_);
        bev_ = nullptr;
        redisReaderFree(reader_);
        reader_ = nullptr;
        open_next_address();
        if (!bev_) fail(refused(endpoint_, last_connect_error_));
        return;
    }
    if (tls_) {
        std::string tls_errors;
        while (unsigned long e = bufferevent_get_openssl_error(bev_)) {
            char buf[256];
            ERR_error_string_n(e, buf, sizeof buf);
            tls_errors += (tls_errors.empty() ? "" : "; ") + std::string(buf);
        }
        if (!tls_errors.empty()) why += " (TLS: " + tls_errors + ")";
        // Nothing answered yet: the handshake, or the server's verdict on our certificate.
        if (!received_) {
            fail(tls_->explain(bufferevent_openssl_get_ssl(bev_), *trace_, tls_ready_, why));
            return;
        }
    } else if (!received_ && !ever_received_ && !pending_.empty() && !url_.is_unix()) {
        // A TLS port drops a connection that sends it plain RESP without a word. (A port
        // that answered this object before is not one: that is a server going away.)
        fail(tls_expected(url_, first_command_, false));
        return;
    }
    fail(lost(why));
}

RedisConn::Failure RedisConn::lost(const std::string &why) const {
    return {
        "lost the connection to Redis at " + endpoint_ + " while " + activity(role_) + ": " + why,
        false, KW_ERR_CONNECT};
}

void RedisConn::on_read(bufferevent *bev, void *arg) {
    // TLS: the bufferevent holds the decrypted bytes.
    auto *self = static_cast<RedisConn *>(arg);
    evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        const int n = evbuffer_remove(in, self->read_buf_.data(), self->read_buf_.size());
        if (n <= 0 || !self->parse(self->read_buf_.data(), static_cast<size_t>(n))) return;
    }
}

void RedisConn::on_readable(evutil_socket_t fd, short, void *arg) {
    auto *self = static_cast<RedisConn *>(arg);
    const ssize_t n = recv(fd, self->read_buf_.data(), self->read_buf_.size(), 0);
    if (n > 0) {
        self->parse(self->read_buf_.data(), static_cast<size_t>(n));
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    self->transport_failed(BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR));
}

bool RedisConn::parse(const char *data, size_t size) {
    // Feed the parser in small slices, taking the complete replies after each: hiredis'
    // reader moves its unread bytes down after every reply once 1 KB is consumed, so a
    // large feed would cost a memmove of the whole rest per reply.
    constexpr size_t kSlice = 2048;
    if (!received_) {
        if (!tls_ && starts_tls_record(data, size)) {  // a TLS port's alert
            fail(tls_expected(url_, first_command_, true));
            return false;
        }
        received_ = ever_received_ = true;
        first_command_.clear();
    }
    bool destroyed = false;
    destroyed_ = &destroyed;
    const uint64_t generation = generation_;
    for (size_t off = 0; off < size; off += kSlice) {
        redisReaderFeed(reader_, data + off, std::min(kSlice, size - off));
        for (;;) {
            void *raw = nullptr;
            if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
                const std::string e = reader_->errstr;
                destroyed_ = nullptr;
                fail({not_redis_message(url_, "its answer is not RESP: " + e), false,
                      KW_ERR_CONNECT});
                return false;
            }
            if (!raw) break;
            auto *r = static_cast<redisReply *>(raw);
            current_ = &r;
            deliver(r);
            if (r) freeReplyObject(r);    // not taken
            if (destroyed) return false;  // a callback destroyed this connection
            current_ = nullptr;
            if (generation != generation_) {  // a callback closed or reconnected it
                destroyed_ = nullptr;
                return false;
            }
        }
    }
    destroyed_ = nullptr;
    return true;
}

redisReply *RedisConn::take_reply() {
    if (!current_) return nullptr;
    redisReply *r = *current_;
    *current_ = nullptr;
    return r;
}

void RedisConn::deliver(redisReply *r) {
    const Push push = in_pubsub_ || !pending_.empty() ? push_kind(r) : Push::None;
    if (!pending_.empty() && pending_.front().confirmations > 0) {
        // A subscribe() is owed its confirmations; an error refuses it whole.
        Pending &p = pending_.front();
        if (r->type == REDIS_REPLY_ERROR || push == Push::Confirmation) {
            if (push == Push::Confirmation) in_pubsub_ = true;
            if (r->type == REDIS_REPLY_ERROR || --p.confirmations == 0) pending_.pop_front();
            if (push_) push_(r);
            return;
        }
    }
    if (in_pubsub_ && push != Push::None) {
        if (push_) push_(r);
        return;
    }
    if (pending_.empty()) return;  // nothing asked for it (cannot happen with Redis)
    ReplyFn fn = std::move(pending_.front().fn);
    pending_.pop_front();
    if (fn) fn(r);
}

namespace {

// "<prefix><n>\r\n" at out; returns the end.
char *put_header(char *out, char prefix, size_t n) {
    char digits[20];
    int k = 0;
    do {
        digits[k++] = static_cast<char>('0' + n % 10);
        n /= 10;
    } while (n);
    *out++ = prefix;
    while (k) *out++ = digits[--k];
    *out++ = '\r';
    *out++ = '\n';
    return out;
}

size_t header_size(size_t n) {
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d + 3;  // prefix, digits, CRLF
}

}  // namespace

bool RedisConn::send(int argc, const char **argv, const size_t *lens) {
    // The RESP request is formatted straight into the output buffer: no allocation and no
    // sprintf per argument (hiredis' redisFormatCommandArgv), one copy of each argument.
    if (!bev_ || argc < 0) return false;
    if (!received_ && first_command_.empty() && argc > 0)
        first_command_ = command_name(argc, argv, lens);
    size_t total = header_size(static_cast<size_t>(argc));
    for (int i = 0; i < argc; i++) total += header_size(lens[i]) + lens[i] + 2;
    evbuffer *out = bufferevent_get_output(bev_);
    evbuffer_iovec vec;
    if (evbuffer_reserve_space(out, static_cast<ev_ssize_t>(total), &vec, 1) != 1 ||
        vec.iov_len < total)
        return false;
    char *p = put_header(static_cast<char *>(vec.iov_base), '*', static_cast<size_t>(argc));
    for (int i = 0; i < argc; i++) {
        p = put_header(p, '$', lens[i]);
        if (lens[i]) std::memcpy(p, argv[i], lens[i]);
        p += lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    vec.iov_len = total;
    return evbuffer_commit_space(out, &vec, 1) == 0;
}

bool RedisConn::command_argv(int argc, const char **argv, const size_t *lens, ReplyFn fn) {
    if (!send(argc, argv, lens)) return false;
    pending_.push_back({std::move(fn), 0});
    return true;
}

bool RedisConn::command(const std::vector<std::string> &args, ReplyFn fn) {
    constexpr size_t kInline = 16;
    const char *argv_small[kInline];
    size_t lens_small[kInline];
    std::vector<const char *> argv_big;
    std::vector<size_t> lens_big;
    const char **argv = argv_small;
    size_t *lens = lens_small;
    if (args.size() > kInline) {
        argv_big.resize(args.size());
        lens_big.resize(args.size());
        argv = argv_big.data();
        lens = lens_big.data();
    }
    for (size_t i = 0; i < args.size(); i++) {
        argv[i] = args[i].data();
        lens[i] = args[i].size();
    }
    return command_argv(static_cast<int>(args.size()), argv, lens, std::move(fn));
}

bool RedisConn::subscribe(const std::vector<std::string> &args) {
    if (args.size() < 2 || !command(args, nullptr)) return false;
    pending_.back().confirmations = args.size() - 1;
    return true;
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
        const ReplyError kind = classify(r);
        if (kind == ReplyError::None) {
            select();
            return;
        }
        // WRONGPASS, "invalid password", "called without any password configured": none
        // goes away by itself. Only a server still loading is worth another try.
        fail({auth_refused_message(url_, std::string(r->str, r->len)), !is_transient(kind),
              KW_ERR_AUTH});
    });
}

void RedisConn::select() {
    if (!select_db_ || url_.db == 0) {
        become_ready();
        return;
    }
    command({"SELECT", std::to_string(url_.db)}, [this](redisReply *r) {
        const ReplyError kind = classify(r);
        if (kind == ReplyError::None) {
            become_ready();
            return;
        }
        // A db out of range ("ERR DB index is out of range"), NOAUTH or NOPERM: none goes
        // away by itself. Only a server still loading is worth another try.
        const std::string e(r->str, r->len);
        if (kind == ReplyError::Auth)
            fail({password_required_message(url_), true, KW_ERR_AUTH});
        else if (kind == ReplyError::NoPerm)
            fail({permission_message(url_, "SELECT db " + std::to_string(url_.db), e, "+select"),
                  true, KW_ERR_AUTH});
        else
            fail({select_refused_message(url_, e), !is_transient(kind), KW_ERR_REDIS});
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
    drop();
    state_ = State::Idle;
    auto cb = on_lost_;  // the callback may reconnect and replace on_lost_
    if (cb) cb(f);
}

}  // namespace keywatch
