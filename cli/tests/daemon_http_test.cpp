// The daemon's HTTP server (cli/daemon/http_server.h) over real sockets: routes, 404 and
// 405, the bearer token (401 with WWW-Authenticate, open routes without it), the address
// bound and whether it is beyond loopback, and clear errors for an address in use or not
// an address.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "cli/daemon/http_server.h"
#include "cli/tests/http_get.h"

namespace keywatch::cli {
namespace {

using kwtest::http_get;
using kwtest::http_request;

HttpRoute route(const std::string &body, bool open = false) {
    return {[body](const HttpRequest &) {
                HttpResponse r;
                r.body = body;
                return r;
            },
            open};
}

std::map<std::string, HttpRoute> two_routes() {
    return {{"/metrics", route("metrics body\n")}, {"/healthz", route("ok\n", true)}};
}

TEST(HttpServer, ServesItsRoutesAnd404ForOtherPaths) {
    HttpServer server;
    std::string err;
    ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
    auto r = http_get(server.address(), "/metrics");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "metrics body\n");
    EXPECT_EQ(r.headers["content-type"], "text/plain; charset=utf-8");
    EXPECT_EQ(http_get(server.address(), "/metrics?x=1").body, "metrics body\n");
    auto missing = http_get(server.address(), "/nothing");
    EXPECT_EQ(missing.status, 404);
    EXPECT_NE(missing.body.find("/nothing"), std::string::npos) << missing.body;
}

TEST(HttpServer, OtherMethodsThanGetAre405WithAllow) {
    HttpServer server;
    std::string err;
    ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
    for (const char *method : {"POST", "PUT", "DELETE"}) {
        auto r = http_request(server.address(), method, "/metrics");
        EXPECT_EQ(r.status, 405) << method << ": " << r.body;
        EXPECT_EQ(r.headers["allow"], "GET, HEAD") << method;
    }
    auto head = http_request(server.address(), "HEAD", "/metrics");
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.body, "");
}

TEST(HttpServer, TokenIsRequiredByEveryRouteButOpenOnes) {
    HttpServer server;
    std::string err;
    ASSERT_TRUE(server.start({"127.0.0.1:0", "s3cret"}, two_routes(), &err)) << err;
    auto none = http_get(server.address(), "/metrics");
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(none.headers["www-authenticate"], "Bearer realm=\"keywatch\"");
    EXPECT_EQ(http_get(server.address(), "/metrics", "Authorization: Bearer wrong\r\n").status,
              401);
    EXPECT_EQ(http_get(server.address(), "/metrics", "Authorization: Bearer s3cre\r\n").status,
              401);
    EXPECT_EQ(http_get(server.address(), "/metrics", "Authorization: Basic s3cret\r\n").status,
              401);
    auto good = http_get(server.address(), "/metrics", "Authorization: Bearer s3cret\r\n");
    EXPECT_EQ(good.status, 200);
    EXPECT_EQ(good.body, "metrics body\n");
    // An unknown path says nothing about what exists to a caller without the token.
    EXPECT_EQ(http_get(server.address(), "/nothing").status, 401);
    EXPECT_EQ(http_get(server.address(), "/nothing", "Authorization: Bearer s3cret\r\n").status,
              404);
    auto health = http_get(server.address(), "/healthz");
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.body, "ok\n");
}

TEST(HttpServer, ARouteThatThrowsAnswers500AndTheServerGoesOn) {
    HttpServer server;
    std::string err;
    std::map<std::string, HttpRoute> routes = two_routes();
    routes["/boom"] = {
        [](const HttpRequest &) -> HttpResponse { throw std::runtime_error("no snapshot"); },
        false};
    ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, std::move(routes), &err)) << err;
    auto r = http_get(server.address(), "/boom");
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.body.find("no snapshot"), std::string::npos) << r.body;
    EXPECT_EQ(http_get(server.address(), "/metrics").status, 200);
}

// A prefix route serves the paths under it with the path and query decoded; POST reaches
// only a route that takes it.
TEST(HttpServer, PrefixRoutesGetTheDecodedRequestAndPostOnlyWhereTaken) {
    HttpServer server;
    std::string err;
    std::map<std::string, HttpRoute> routes = two_routes();
    routes["/api/"] = {[](const HttpRequest &req) {
                           HttpResponse r;
                           r.body = req.method + " " + req.path + " limit=" +
                                    (req.query.count("limit") ? req.query.at("limit") : "-");
                           return r;
                       },
                       false, true, true};
    ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, std::move(routes), &err)) << err;
    auto r = http_get(server.address(), "/api/queues/a%2Fb%20c?limit=5&x=%40");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "GET /api/queues/a/b c limit=5");
    EXPECT_EQ(http_request(server.address(), "POST", "/api/x").body, "POST /api/x limit=-");
    auto put = http_request(server.address(), "PUT", "/api/x");
    EXPECT_EQ(put.status, 405);
    EXPECT_EQ(put.headers["allow"], "GET, HEAD, POST");
    EXPECT_EQ(http_request(server.address(), "POST", "/metrics").status, 405);
    EXPECT_EQ(http_get(server.address(), "/apix").status, 404);
}

TEST(HttpServer, AddressInUseIsAClearError) {
    HttpServer first, second;
    std::string err;
    ASSERT_TRUE(first.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
    EXPECT_FALSE(second.start({first.address(), ""}, two_routes(), &err));
    EXPECT_NE(err.find("cannot listen on " + first.address()), std::string::npos) << err;
    EXPECT_NE(err.find("Address already in use"), std::string::npos) << err;
    EXPECT_EQ(http_get(first.address(), "/metrics").status, 200);
}

TEST(HttpServer, NotAnAddressIsAClearError) {
    HttpServer server;
    std::string err;
    EXPECT_FALSE(server.start({"localhost", ""}, two_routes(), &err));
    EXPECT_NE(err.find("'localhost': no port: write host:port"), std::string::npos) << err;
    EXPECT_FALSE(server.start({"127.0.0.1:99999", ""}, two_routes(), &err));
    EXPECT_NE(err.find("'127.0.0.1:99999'"), std::string::npos) << err;
    EXPECT_FALSE(server.start({"no-such-host.invalid:9464", ""}, two_routes(), &err));
    EXPECT_NE(err.find("cannot listen on no-such-host.invalid:9464: "), std::string::npos) << err;
}

TEST(HttpServer, SaysWhetherItListensBeyondLoopback) {
    HttpServer loopback, any;
    std::string err;
    ASSERT_TRUE(loopback.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
    EXPECT_FALSE(loopback.beyond_loopback());
    EXPECT_EQ(loopback.address().rfind("127.0.0.1:", 0), 0u) << loopback.address();
    EXPECT_NE(loopback.address(), "127.0.0.1:0");
    ASSERT_TRUE(any.start({"0.0.0.0:0", ""}, two_routes(), &err)) << err;
    EXPECT_TRUE(any.beyond_loopback());
    HttpServer v6;
    if (v6.start({"[::1]:0", ""}, two_routes(), &err)) {  // hosts without IPv6 skip this
        EXPECT_FALSE(v6.beyond_loopback());
        EXPECT_EQ(v6.address().rfind("[::1]:", 0), 0u) << v6.address();
        EXPECT_EQ(http_get(v6.address(), "/metrics").status, 200);
    }
}

TEST(HttpServer, StopReleasesThePortAndIsIdempotent) {
    HttpServer server;
    std::string err;
    ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
    const std::string address = server.address();
    server.stop();
    server.stop();
    EXPECT_EQ(http_get(address, "/metrics").status, 0);
    ASSERT_TRUE(server.start({address, ""}, two_routes(), &err)) << err;
    EXPECT_EQ(http_get(address, "/metrics").status, 200);
}

TEST(HttpServer, StopRightAfterStartReturns) {
    for (int i = 0; i < 20; i++) {
        HttpServer server;
        std::string err;
        ASSERT_TRUE(server.start({"127.0.0.1:0", ""}, two_routes(), &err)) << err;
        server.stop();
    }
}

}  // namespace
}  // namespace keywatch::cli
