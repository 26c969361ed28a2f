// The daemon's HTTP server: libevent's evhttp on its own thread and event base, serving
// routes by path (a route may serve every path under its own, "/api/v1/", and its own
// without the last '/'): GET and HEAD,
// POST only to a route that takes it (which answers 405 itself where it does not), any
// other method 405 with "Allow", an unknown path 404, a route that throws 500. With a bearer
// token set, every route not marked open requires "Authorization: Bearer <token>" (else
// 401 with "WWW-Authenticate: Bearer realm="keywatch"", unknown paths included); without a
// token on a loopback address, a request whose Host header names another server (localhost,
// 127.0.0.1, [::1] and the bound address are this one) is refused 403: DNS rebinding. Requests
// are bounded (10 s timeout, 8 KiB of headers, 4 KiB of body). Routes are called on the
// server's thread, one request at a time.
// Thread-safety: start/stop from one thread (the daemon's main thread); routes run on the
// server's thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace keywatch::cli {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

struct HttpRequest {
    std::string method;                        // "GET", "HEAD" or "POST"
    std::string path;                          // decoded, without the query string
    std::map<std::string, std::string> query;  // decoded; a name given twice: the last value
    std::string content_type;                  // "" when not sent
    std::string body;                          // at most 4 KiB
};

struct HttpRoute {
    std::function<HttpResponse(const HttpRequest &)> handle;
    bool open = false;    // served without the token (e.g. /healthz)
    bool prefix = false;  // also serves every path under this one (the route ends with '/')
    bool post = false;    // POST reaches the route too
    bool json = false;    // its 401 and 405 as {"error": "..."} (application/json)
};

class HttpServer {
  public:
    struct Options {
        std::string listen = "127.0.0.1:9464";  // "host:port", "[::1]:port"; port 0 = any
        std::string token;                      // "" = no authentication
    };

    HttpServer();
    ~HttpServer();  // stops
    HttpServer(const HttpServer &) = delete;
    HttpServer &operator=(const HttpServer &) = delete;

    // Binds and starts serving routes ("/metrics" -> route). False with *err naming the
    // address and the reason (bad address, port in use) when it cannot listen.
    bool start(const Options &opts, std::map<std::string, HttpRoute> routes, std::string *err);
    // Stops serving and joins the thread. Idempotent.
    void stop();
    // The address bound ("127.0.0.1:9464"; the real port when 0 was asked).
    std::string address() const;
    // True when the listen address is not a loopback address.
    bool beyond_loopback() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace keywatch::cli
