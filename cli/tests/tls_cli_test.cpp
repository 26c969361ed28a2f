// TLS through the real `keywatch` binary: `watch` waiting for a TLS server that starts
// late, TLS on one side only, `check`'s fix for each cause (wrong CA, wrong name, a client
// certificate missing or refused, plain RESP at the TLS port and TLS at the plain port), the
// warnings about TLS settings that protect nothing, and the daemon reading its [tls] files
// relative to its config. A real redis-server with a TLS port and a throw-away CA
// (tests/support/test_certificates.h); Redis is never mocked.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/tests/cli_process.h"
#include "embedded/redis_process.h"
#include "tests/support/test_certificates.h"

#ifndef KW_CLI_PATH
#error "KW_CLI_PATH must name the keywatch binary"
#endif
#ifndef KW_PRINT_PLUGIN
#error "KW_PRINT_PLUGIN must name the print plugin"
#endif

namespace {

using kwclitest::Process;
using kwclitest::Result;
using namespace std::chrono_literals;

bool has(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

// A redis-server with a plain and a TLS port that requires a client certificate.
class TlsCli : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/kwcli-tls.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        tls_port_ = keywatch::RedisProcess::free_port();
        keywatch::RedisProcess::Options o;
        o.extra = certs_.server_args(tls_port_, "yes");
        server_ = std::make_unique<keywatch::RedisProcess>(o);
        server_->start();
    }
    void TearDown() override {
        server_.reset();
        std::filesystem::remove_all(dir_);
    }

    Result kw(const std::vector<std::string> &args) {
        Process p(KW_CLI_PATH, args, dir_, "run" + std::to_string(runs_++), Process::Options{});
        return p.finish(60s, false);
    }
    std::string tls_url() const { return "rediss://127.0.0.1:" + std::to_string(tls_port_); }
    std::string plain_url() const { return "redis://127.0.0.1:" + std::to_string(server_->port()); }
    // -c options for the CA and (client) a client certificate the server accepts.
    std::vector<std::string> tls_conf(bool client = true, const std::string &ca = "ca.crt") const {
        std::vector<std::string> out = {"-c", "tls.ca_file=" + certs_.path(ca)};
        if (client)
            out.insert(out.end(), {"-c", "tls.cert_file=" + certs_.path("client.crt"), "-c",
                                   "tls.key_file=" + certs_.path("client.key")});
        return out;
    }

    keywatch::TestCertificates certs_;
    std::unique_ptr<keywatch::RedisProcess> server_;
    int tls_port_ = 0;
    std::string dir_;
    int runs_ = 0;
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// A watch (or daemon) started before its TLS Redis waits for it, as over redis://.
TEST(TlsCliLateServer, WatchWaitsForATlsServerThatStartsLate) {
    keywatch::TestCertificates certs;
    const int tls_port = keywatch::RedisProcess::free_port();
    Process watch(
        KW_CLI_PATH,
        {"watch", "--redis", "rediss://127.0.0.1:" + std::to_string(tls_port), "-c",
         "tls.ca_file=" + certs.path("ca.crt"), "--connect-timeout", "30s", "--duration", "1s"},
        certs.dir(), "late", Process::Options{});
    std::this_thread::sleep_for(2s);
    keywatch::RedisProcess::Options o;
    o.extra = certs.server_args(tls_port, "optional");
    keywatch::RedisProcess redis(o);
    redis.start();
    const Result r = watch.finish(60s, false);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(has(r.err, "keywatch: watching")) << describe(r);
}

// Each side's mistake is named as what it most likely is, at once, with no offer of a
// private redis-server (which would not be the TLS server asked for).
TEST_F(TlsCli, WatchSaysTlsOnOneSideOnly) {
    Result r = kw({"watch", "--redis", "redis://127.0.0.1:" + std::to_string(tls_port_),
                   "--connect-timeout", "20s", "--duration", "20s"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_TRUE(has(r.err, "TLS on one side only")) << describe(r);
    EXPECT_TRUE(has(r.err, "expects TLS: use rediss://")) << describe(r);
    EXPECT_FALSE(has(r.err, "topology")) << describe(r);
    EXPECT_FALSE(has(r.err, "leave out --redis")) << describe(r);

    r = kw(std::vector<std::string>{"watch", "--redis",
                                    "rediss://127.0.0.1:" + std::to_string(server_->port()),
                                    "--connect-timeout", "1s", "--duration", "20s"} +
           tls_conf());
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_TRUE(has(r.err, "TLS on one side only")) << describe(r);
    EXPECT_TRUE(has(r.err, "use redis://")) << describe(r);
    EXPECT_FALSE(has(r.err, "accepted the connection but did not answer")) << describe(r);
    EXPECT_FALSE(has(r.err, "leave out --redis")) << describe(r);

    // A certificate error is no reason for a private server either.
    r = kw(std::vector<std::string>{"watch", "--redis", tls_url(), "--duration", "20s"} +
           tls_conf(true, "other-ca.crt"));
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_TRUE(has(r.err, "we refused the server's certificate")) << describe(r);
    EXPECT_FALSE(has(r.err, "leave out --redis")) << describe(r);
}

// `keywatch check` names the fix of the cause, not "start the server" for every failure.
TEST_F(TlsCli, CheckGivesTheFixOfEachCause) {
    struct Case {
        std::string what;
        std::vector<std::string> args;
        std::string fix;
    };
    const std::vector<Case> cases = {
        {"wrong CA",
         std::vector<std::string>{"--redis", tls_url()} + tls_conf(true, "other-ca.crt"),
         "set tls.ca_file to the CA that signed the server's certificate"},
        {"name not in the certificate",
         std::vector<std::string>{"--redis", tls_url(), "-c", "tls.server_name=redis.example.com"} +
             tls_conf(),
         "set tls.server_name"},
        {"no client certificate", std::vector<std::string>{"--redis", tls_url()} + tls_conf(false),
         "set tls.cert_file and tls.key_file"},
        {"a client certificate the server does not trust",
         std::vector<std::string>{"--redis", tls_url(), "-c",
                                  "tls.cert_file=" + certs_.path("stranger.crt"), "-c",
                                  "tls.key_file=" + certs_.path("stranger.key")} +
             tls_conf(false),
         "check that the server trusts the CA that signed it"},
        {"plain RESP at the TLS port",
         {"--redis", "redis://127.0.0.1:" + std::to_string(tls_port_)},
         "use rediss://"},
        {"TLS at the plain port",
         std::vector<std::string>{"--redis",
                                  "rediss://127.0.0.1:" + std::to_string(server_->port()), "-c",
                                  "redis.connect_timeout=1s"} +
             tls_conf(),
         "use redis://"},
    };
    for (const Case &c : cases) {
        const Result r = kw(std::vector<std::string>{"check", "--json"} + c.args);
        EXPECT_EQ(r.status, 1) << c.what << "\n" << describe(r);
        nlohmann::json doc;
        try {
            doc = nlohmann::json::parse(r.out);
        } catch (const std::exception &e) {
            ADD_FAILURE() << c.what << ": not JSON: " << e.what() << "\n" << describe(r);
            continue;
        }
        ASSERT_FALSE(doc["checks"].empty()) << c.what << "\n" << describe(r);
        const auto &line = doc["checks"].back();
        EXPECT_EQ(line.value("check", ""), "connection") << c.what << "\n" << describe(r);
        EXPECT_EQ(line.value("verdict", ""), "fail") << c.what << "\n" << describe(r);
        const std::string fix = line.value("fix", "");
        EXPECT_TRUE(has(fix, c.fix)) << c.what << ": fix '" << fix << "'\n" << describe(r);
        EXPECT_FALSE(has(fix, "start the server")) << c.what << "\n" << describe(r);
    }
}

// Settings that protect nothing are said, not silently accepted: tls.verify=false, and tls.*
// beside a redis:// URL.
TEST_F(TlsCli, WatchWarnsOfTlsSettingsThatProtectNothing) {
    Result r = kw(std::vector<std::string>{"watch", "--redis", tls_url(), "-c", "tls.verify=false",
                                           "--duration", "300ms"} +
                  tls_conf(true, "other-ca.crt"));
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(has(r.err, "warning: tls.verify=false")) << describe(r);

    r = kw(std::vector<std::string>{"watch", "--redis", plain_url(), "--duration", "300ms"} +
           tls_conf());
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(has(r.err,
                    "warning: tls.ca_file, tls.cert_file, tls.key_file set, but "
                    "redis.url is not rediss://"))
        << describe(r);
}

// A service's working directory is usually /: the [tls] files, like every path of the
// config, are found beside it.
TEST_F(TlsCli, DaemonReadsTlsFilesRelativeToItsConfig) {
    const std::string config = certs_.path("kw.toml");
    std::ofstream(config) << "[redis]\nurl = \"" << tls_url()
                          << "\"\n[tls]\nca_file = \"ca.crt\"\ncert_file = \"client.crt\"\n"
                             "key_file = \"client.key\"\n[[handler]]\nplugin = \""
                          << KW_PRINT_PLUGIN << "\"\n";
    const Result r = kw({"run", "--check", "--config", config});  // run in dir_, not beside it
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(has(r.out, "connected and subscribed to: 127.0.0.1:" + std::to_string(tls_port_)))
        << describe(r);
}

}  // namespace
