#include "cli/daemon/http_server.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/buffer.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/redis/endpoint.h"

namespace keywatch::cli {
namespace {

// Limits for what a client may send: only the API's actions take a body, a small JSON one.
constexpr int kRequestTimeoutSeconds = 10;
constexpr ev_ssize_t kMaxHeadersSize = 8192;
constexpr ev_ssize_t kMaxBodySize = 4096;

bool is_loopback(const sockaddr_storage &sa) {
    if (sa.ss_family == AF_INET) {
        auto *in = reinterpret_cast<const sockaddr_in *>(&sa);
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    auto *in6 = reinterpret_cast<const sockaddr_in6 *>(&sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
}

// "127.0.0.1:9464" or "[::1]:9464" of a bound socket.
std::string address_text(const sockaddr_storage &sa) {
    char host[INET6_ADDRSTRLEN] = "";
    if (sa.ss_family == AF_INET) {
        auto *in = reinterpret_cast<const sockaddr_in *>(&sa);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        return Endpoint{host, ntohs(in->sin_port), ""}.str();
    }
    auto *in6 = reinterpret_cast<const sockaddr_in6 *>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return Endpoint{host, ntohs(in6->sin6_port), ""}.str();
}

// A listening, non-blocking socket on the first address `listen` resolves to, or -1 with
// *err saying why.
int listen_socket(const std::string &listen, std::string *err) {
    std::string why;
    const auto where = Endpoint::parse(listen, Endpoint::Form::Strict, &why);
    if (!where) {
        *err = "cannot listen on '" + listen + "': " + why;
        return -1;
    }
    const std::string host = where->host, port = std::to_string(where->port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo *res = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
        *err = "cannot listen on " + listen + ": " + gai_strerror(rc);
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
        *err = "cannot listen on " + listen + ": " + std::strerror(errno);
        if (errno == EADDRINUSE)
            *err += " (another process holds the port: choose another [http] listen)";
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

// Compares without stopping at the first difference (the token is a secret). token is
// never empty.
bool same_secret(const std::string &given, const std::string &token) {
    unsigned diff = given.size() != token.size();
    for (size_t i = 0; i < given.size(); i++) diff |= given[i] ^ token[i % token.size()];
    return diff == 0;
}

}  // namespace

struct HttpServer::Impl {
    event_base *base = nullptr;
    evhttp *http = nullptr;
    event *stop_event = nullptr;  // activated by stop() from its thread: breaks the loop
    std::thread thread;
    std::map<std::string, HttpRoute> routes;
    std::string token;
    std::string address;
    bool beyond_loopback = false;

    static void on_request(evhttp_request *req, void *arg) { static_cast<Impl *>(arg)->serve(req); }
    void serve(evhttp_request *req);
    bool authorized(evhttp_request *req) const;
    // Without a token on loopback: whether the Host header names this server (a page of
    // another site whose name was rebound to 127.0.0.1 sends its own name).
    bool host_allowed(evhttp_request *req) const;
    // The route serving path: its own, or the longest prefix route above it.
    const HttpRoute *find(const std::string &path) const;
    void release();
};

namespace {

// The reply; to HEAD without the body (evhttp would send it), with its Content-Length.
void send(evhttp_request *req, const HttpResponse &resp) {
    evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", resp.content_type.c_str());
    evhttp_add_header(headers, "Cache-Control", "no-store");
    evbuffer *body = evbuffer_new();
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)
        evhttp_add_header(headers, "Content-Length", std::to_string(resp.body.size()).c_str());
    else
        evbuffer_add(body, resp.body.data(), resp.body.size());
    evhttp_send_reply(req, resp.status, nullptr, body);
    evbuffer_free(body);
}

HttpResponse text(int status, const std::string &body) {
    HttpResponse r;
    r.status = status;
    r.body = body;
    return r;
}

// An error the server answers itself: a line of text, or for a JSON route {"error": ...}.
HttpResponse error_reply(const HttpRoute *route, int status, const std::string &message) {
    if (!route || !route->json) return text(status, message + "\n");
    HttpResponse r = text(status, nlohmann::json({{"error", message}}).dump() + "\n");
    r.content_type = "application/json";
    return r;
}

}  // namespace

bool HttpServer::Impl::authorized(evhttp_request *req) const {
    if (token.empty()) return true;
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) return false;
    return same_secret(auth + 7, token);
}

bool HttpServer::Impl::host_allowed(evhttp_request *req) const {
    if (!token.empty() || beyond_loopback) return true;
    const char *given = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
    if (!given) return true;  // HTTP/1.0: no name to have been rebound
    std::string host = given;
    for (char &c : host) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    // Without the port: "[::1]:9464" -> "[::1]", "localhost:9464" -> "localhost".
    const size_t colon = host.rfind(':');
    if (colon != std::string::npos && host.find(']', colon) == std::string::npos)
        host.resize(colon);
    const std::string own = address.substr(0, address.rfind(':'));
    return host == "localhost" || host == "127.0.0.1" || host == "[::1]" || host == own;
}

const HttpRoute *HttpServer::Impl::find(const std::string &path) const {
    if (auto it = routes.find(path); it != routes.end()) return &it->second;
    if (auto it = routes.find(path + "/"); it != routes.end() && it->second.prefix)
        return &it->second;
    const HttpRoute *best = nullptr;
    size_t best_len = 0;
    for (const auto &[prefix, route] : routes)
        if (route.prefix && prefix.size() > best_len && path.compare(0, prefix.size(), prefix) == 0)
            best = &route, best_len = prefix.size();
    return best;
}

namespace {

// The request's method, decoded path and query, content type and body.
HttpRequest request_of(evhttp_request *req) {
    HttpRequest r;
    const evhttp_cmd_type cmd = evhttp_request_get_command(req);
    r.method = cmd == EVHTTP_REQ_GET ? "GET" : cmd == EVHTTP_REQ_HEAD ? "HEAD" : "POST";
    const evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : nullptr;
    size_t len = 0;
    if (char *decoded = path ? evhttp_uridecode(path, 0, &len) : nullptr) {
        r.path.assign(decoded, len);
        free(decoded);
    }
    const char *query = uri ? evhttp_uri_get_query(uri) : nullptr;
    evkeyvalq params;
    TAILQ_INIT(&params);
    if (query && evhttp_parse_query_str(query, &params) == 0)
        for (evkeyval *kv = params.tqh_first; kv; kv = kv->next.tqe_next)
            r.query[kv->key] = kv->value;
    evhttp_clear_headers(&params);
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    r.content_type = type ? type : "";
    evbuffer *in = evhttp_request_get_input_buffer(req);
    r.body.resize(evbuffer_get_length(in));
    evbuffer_copyout(in, r.body.data(), r.body.size());
    return r;
}

}  // namespace

void HttpServer::Impl::serve(evhttp_request *req) {
    const HttpRequest request = request_of(req);
    const HttpRoute *route = find(request.path);
    if (!host_allowed(req)) {
        send(req, error_reply(route, 403,
                              "forbidden: the Host header does not name this server (a rebound "
                              "DNS name?): ask for http://" +
                                  address + "/, or set [http] token"));
        return;
    }
    if (!(route && route->open) && !authorized(req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"keywatch\"");
        send(req, error_reply(route, 401,
                              "unauthorized: send the [http] token as "
                              "\"Authorization: Bearer <token>\""));
        return;
    }
    if (!route) {
        send(req, error_reply(route, 404, "not found: " + request.path));
        return;
    }
    evhttp_cmd_type method = evhttp_request_get_command(req);
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD &&
        !(method == EVHTTP_REQ_POST && route->post)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          route->post ? "GET, HEAD, POST" : "GET, HEAD");
        send(req, error_reply(route, 405,
                              route->post ? "method not allowed: use GET or POST"
                                          : "method not allowed: use GET"));
        return;
    }
    HttpResponse resp;
    try {
        resp = route->handle(request);
    } catch (const std::exception &e) {
        resp = error_reply(route, 500, std::string("internal error: ") + e.what());
    }
    send(req, resp);
}

void HttpServer::Impl::release() {
    if (stop_event) event_free(stop_event);
    if (http) evhttp_free(http);
    if (base) event_base_free(base);
    stop_event = nullptr;
    http = nullptr;
    base = nullptr;
}

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {}

HttpServer::~HttpServer() {
    stop();
}

bool HttpServer::start(const Options &opts, std::map<std::string, HttpRoute> routes,
                       std::string *err) {
    if (impl_->base) {
        *err = "the HTTP server is already running on " + impl_->address;
        return false;
    }
    static std::once_flag threads_enabled;  // event_base_loopbreak from stop()'s thread
    std::call_once(threads_enabled, [] { evthread_use_pthreads(); });
    int fd = listen_socket(opts.listen, err);
    if (fd < 0) return false;
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len);
    Impl &s = *impl_;
    s.base = event_base_new();
    s.http = s.base ? evhttp_new(s.base) : nullptr;
    s.stop_event = s.base ? event_new(
                                s.base, -1, 0,
                                [](evutil_socket_t, short, void *base) {
                                    event_base_loopbreak(static_cast<event_base *>(base));
                                },
                                s.base)
                          : nullptr;
    if (!s.http || !s.stop_event || !evhttp_accept_socket_with_handle(s.http, fd)) {
        close(fd);
        s.release();
        *err = "cannot serve HTTP on " + opts.listen + ": libevent could not set up the server";
        return false;
    }
    evhttp_set_timeout(s.http, kRequestTimeoutSeconds);
    evhttp_set_max_headers_size(s.http, kMaxHeadersSize);
    evhttp_set_max_body_size(s.http, kMaxBodySize);
    evhttp_set_allowed_methods(s.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                           EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                           EVHTTP_REQ_PATCH);
    evhttp_set_gencb(s.http, &Impl::on_request, &s);
    s.routes = std::move(routes);
    s.token = opts.token;
    s.address = address_text(bound);
    s.beyond_loopback = !is_loopback(bound);
    s.thread = std::thread([base = s.base] { event_base_dispatch(base); });
    return true;
}

void HttpServer::stop() {
    if (!impl_->base) return;
    // Queued even if the loop has not started yet (a loopbreak before it would be lost).
    event_active(impl_->stop_event, EV_READ, 0);
    if (impl_->thread.joinable()) impl_->thread.join();
    impl_->release();  // evhttp_free closes the listening socket and open connections
}

std::string HttpServer::address() const {
    return impl_->address;
}

bool HttpServer::beyond_loopback() const {
    return impl_->beyond_loopback;
}

}  // namespace keywatch::cli
