// TLS (rediss://) end to end against a real redis-server 7.0 built with TLS: a throw-away
// CA and server certificate made with the openssl CLI, a server listening on a plain and a
// TLS port, an engine and a client that talk only TLS, and the refusals (wrong CA, wrong
// name, unreadable file, a client certificate the server refuses, TLS on one side only) with
// messages that name what failed, which side refused it and what to do.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis_fixture.h"
#include "tests/support/test_certificates.h"

namespace kwtest {
namespace {

class Tls : public ::testing::Test {
  protected:
    // The server's tls-auth-clients.
    virtual std::string auth_clients() const { return "optional"; }
    void SetUp() override {
        certs_ = std::make_unique<keywatch::TestCertificates>();
        tls_port_ = keywatch::RedisProcess::free_port();
        keywatch::RedisProcess::Options o;
        o.extra = certs_->server_args(tls_port_, auth_clients());
        redis_ = std::make_unique<keywatch::RedisProcess>(o);
        redis_->start();
    }
    void TearDown() override {
        if (HasFailure() && redis_)
            std::cerr << "redis-server log tail:\n" << redis_->log_tail(2000) << "\n";
        redis_.reset();
        certs_.reset();
    }

    std::string tls_url() const { return "rediss://127.0.0.1:" + std::to_string(tls_port_); }
    // Starts an engine at url (the test CA, redis.connect_timeout `timeout`) that must fail
    // with KW_ERR_CONNECT: its message; *took_ms: how long the start took.
    std::string failed_start(const std::string &url, const std::string &timeout,
                             int64_t *took_ms = nullptr) {
        EventSink sink;
        Engine engine(url);
        engine.set("tls.ca_file", certs_->path("ca.crt"));
        engine.set("redis.connect_timeout", timeout);
        engine.add(&sink, {});
        const auto t0 = std::chrono::steady_clock::now();
        const int rc = engine.start();
        if (took_ms)
            *took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
        const std::string err = engine.last_error();
        EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << err;
        return err;
    }
    // The plain port, for setting up data.
    std::unique_ptr<RedisClient> plain() {
        return std::make_unique<RedisClient>(redis_->host(), redis_->port());
    }

    std::unique_ptr<keywatch::TestCertificates> certs_;
    std::unique_ptr<keywatch::RedisProcess> redis_;
    int tls_port_ = 0;
};

TEST_F(Tls, EngineOverRedissReceivesExpired) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("ca.crt"));
    engine.add(&sink, {{"events", "expired"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = plain();
    ASSERT_EQ(c->command({"SET", "over-tls", "v", "PX", "50"}), "OK");
    ASSERT_TRUE(sink.wait_for("expired", "over-tls")) << sink.describe();
    EXPECT_EQ(kw_engine_stop(engine.get(), 5000), KW_OK);
}

TEST_F(Tls, ClientCertificateIsAcceptedAndClientTracksAKey) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("ca.crt"));
    engine.set("tls.cert_file", certs_->path("client.crt"));
    engine.set("tls.key_file", certs_->path("client.key"));
    engine.add(&sink, {{"events", "expired"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();

    char err[512] = "";
    kw_client_t *client = nullptr;
    ASSERT_EQ(kw_client_new(engine.conf(), &client, err, sizeof err), KW_OK) << err;
    int64_t deadline = 0;
    const std::string key = "tracked-over-tls";
    int rc = kw_client_track(client, key.data(), key.size(), "v", 1, 200, 0, &deadline);
    EXPECT_EQ(rc, KW_OK) << kw_client_last_error(client);
    kw_client_free(client);
    ASSERT_EQ(rc, KW_OK);
    EXPECT_GT(deadline, 0);
    ASSERT_TRUE(sink.wait_for("expired", key)) << sink.describe();
    EXPECT_EQ(kw_engine_stop(engine.get(), 5000), KW_OK);
}

TEST_F(Tls, WrongCaIsRefusedAtStartNamingTheFile) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("other-ca.crt"));
    engine.add(&sink, {});
    int rc = engine.start();
    EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << engine.last_error();
    const std::string err = engine.last_error();
    EXPECT_TRUE(contains(err, "we refused the server's certificate ('CN=localhost')")) << err;
    EXPECT_TRUE(contains(err, "certificate verify failed")) << err;
    EXPECT_TRUE(contains(err, certs_->path("other-ca.crt"))) << err;
    EXPECT_TRUE(contains(err, "tls.ca_file")) << err;
    EXPECT_TRUE(contains(err, std::to_string(tls_port_))) << err;

    // The same check by the client.
    char cerr[512] = "";
    kw_client_t *client = nullptr;
    int crc = kw_client_new(engine.conf(), &client, cerr, sizeof cerr);
    if (crc == KW_OK) {
        crc = kw_client_track(client, "k", 1, "v", 1, 1000, 0, nullptr);
        snprintf(cerr, sizeof cerr, "%s", kw_client_last_error(client));
        kw_client_free(client);
    }
    EXPECT_EQ(crc, KW_ERR_CONNECT) << kw_err_name(crc) << ": " << cerr;
    EXPECT_TRUE(contains(cerr, "certificate verify failed")) << cerr;
}

TEST_F(Tls, VerifyOffAcceptsAnUnknownCa) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("other-ca.crt"));
    engine.set("tls.verify", "false");
    engine.add(&sink, {{"events", "set"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    ASSERT_EQ(plain()->command({"SET", "unverified", "v"}), "OK");
    EXPECT_TRUE(sink.wait_for("set", "unverified")) << sink.describe();
}

TEST_F(Tls, NameNotInTheCertificateIsRefusedNamingIt) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("ca.crt"));
    engine.set("tls.server_name", "redis.example.com");
    engine.add(&sink, {});
    int rc = engine.start();
    EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc);
    const std::string err = engine.last_error();
    EXPECT_TRUE(contains(err, "redis.example.com")) << err;
    EXPECT_TRUE(contains(err, "(it is for 127.0.0.1, localhost)")) << err;
    EXPECT_TRUE(contains(err, "tls.server_name")) << err;
}

TEST_F(Tls, UnreadableCaFileIsNamed) {
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("no-such-ca.crt"));
    engine.add(&sink, {});
    int rc = engine.start();
    EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc);
    const std::string err = engine.last_error();
    EXPECT_TRUE(contains(err, "no-such-ca.crt")) << err;
    EXPECT_TRUE(contains(err, "tls.ca_file")) << err;
}

// A TLS port drops plain RESP without a word: said at once, and as what it most likely is.
TEST_F(Tls, PlainRedisUrlAtTheTlsPortSaysItExpectsTls) {
    int64_t took = 0;
    const std::string err =
        failed_start("redis://127.0.0.1:" + std::to_string(tls_port_), "10s", &took);
    EXPECT_LT(took, 5000) << "waited out redis.connect_timeout: " << err;
    EXPECT_TRUE(contains(err, "TLS on one side only")) << err;
    EXPECT_TRUE(contains(err, "127.0.0.1:" + std::to_string(tls_port_))) << err;
    EXPECT_TRUE(contains(err, "expects TLS: use rediss://")) << err;
    EXPECT_FALSE(contains(err, "topology")) << "names an internal connection: " << err;
}

// rediss:// at the plain port: Redis says nothing to a TLS hello (it waits for the end of a
// line that never comes), so only the time tells; the message says what it most likely is.
TEST_F(Tls, RedissAtASilentPlainPortSaysTlsOnOneSideOnly) {
    const std::string err =
        failed_start("rediss://127.0.0.1:" + std::to_string(redis_->port()), "1s");
    EXPECT_TRUE(contains(err, "TLS on one side only")) << err;
    EXPECT_TRUE(contains(err, "use redis://")) << err;
    EXPECT_TRUE(contains(err, "within redis.connect_timeout")) << err;
    EXPECT_FALSE(contains(err, "accepted the connection but did not answer")) << err;
}

// A plain server that answers at once (here: maxclients reached, said before it reads) tells
// by its bytes: no waiting for the timeout.
TEST_F(Tls, RedissAtAPlainServerThatAnswersFailsFast) {
    keywatch::RedisProcess::Options o;
    o.extra = {"--maxclients", "1"};
    keywatch::RedisProcess full(o);
    full.start();
    RedisClient holder(full.host(), full.port());  // the one client it takes
    ASSERT_EQ(holder.command({"PING"}), "PONG");
    int64_t took = 0;
    const std::string err =
        failed_start("rediss://127.0.0.1:" + std::to_string(full.port()), "10s", &took);
    EXPECT_LT(took, 5000) << "waited out redis.connect_timeout: " << err;
    EXPECT_TRUE(contains(err, "TLS on one side only: the server at 127.0.0.1:" +
                                  std::to_string(full.port()) + " speaks plain RESP here"))
        << err;
    EXPECT_TRUE(contains(err, "use redis://")) << err;
}

// Nothing listening at a rediss:// URL is a refused connection, as over redis://, and is
// waited for until redis.connect_timeout.
TEST_F(Tls, RefusedConnectionIsNotATlsFailureAndIsRetried) {
    const int port = keywatch::RedisProcess::free_port();
    const std::string err = failed_start("rediss://127.0.0.1:" + std::to_string(port), "600ms");
    EXPECT_TRUE(contains(err, "cannot connect to Redis at 127.0.0.1:" + std::to_string(port) +
                                  ": Connection refused"))
        << err;
    EXPECT_TRUE(contains(err, "kept trying for redis.connect_timeout")) << err;
    EXPECT_FALSE(contains(err, "handshake")) << err;
}

// The daemon or a watch started before its TLS Redis (a host booting): start waits.
TEST(TlsLateServer, EngineWaitsForATlsServerThatStartsLate) {
    keywatch::TestCertificates certs;
    const int tls_port = keywatch::RedisProcess::free_port();
    EventSink sink;
    Engine engine("rediss://127.0.0.1:" + std::to_string(tls_port));
    engine.set("tls.ca_file", certs.path("ca.crt"));
    engine.set("redis.connect_timeout", "30s");
    engine.add(&sink, {{"events", "set"}});
    keywatch::RedisProcess::Options o;
    o.extra = certs.server_args(tls_port, "optional");
    keywatch::RedisProcess redis(o);
    // The server dies with the thread that started it (PR_SET_PDEATHSIG): this one.
    int rc = KW_ERR_INTERNAL;
    std::thread starting([&] { rc = engine.start(); });
    std::this_thread::sleep_for(std::chrono::seconds(2));
    redis.start();
    starting.join();
    ASSERT_EQ(rc, KW_OK) << kw_err_name(rc) << ": " << engine.last_error();
    ASSERT_EQ(redis.command({"SET", "late-tls", "v"}), "OK");
    EXPECT_TRUE(sink.wait_for("set", "late-tls")) << sink.describe();
    EXPECT_EQ(kw_engine_stop(engine.get(), 5000), KW_OK);
}

TEST_F(Tls, VerifyOffIsLoggedAsAWarning) {
    EventSink sink;
    LogSink logs;
    Engine engine(tls_url());
    engine.set("tls.verify", "false");
    engine.watch_logs(&logs);
    engine.add(&sink, {});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    EXPECT_NE(logs.find(KW_LOG_WARN,
                        [](const std::string &m) { return contains(m, "tls.verify=false"); }),
              "")
        << logs.describe();
}

// tls.* options beside a redis:// URL would be ignored: said, not silently.
TEST_F(Tls, TlsOptionsWithAPlainUrlAreWarnedAbout) {
    EventSink sink;
    LogSink logs;
    Engine engine(redis_->url());
    engine.set("tls.ca_file", certs_->path("ca.crt"));
    engine.watch_logs(&logs);
    engine.add(&sink, {});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    const std::string warning =
        logs.find(KW_LOG_WARN, [](const std::string &m) { return contains(m, "tls.ca_file set"); });
    EXPECT_TRUE(contains(warning, "not rediss://")) << logs.describe();
}

// A server that requires a client certificate.
class TlsClientCertRequired : public Tls {
  protected:
    std::string auth_clients() const override { return "yes"; }
};

TEST_F(TlsClientCertRequired, MissingClientCertificateIsNamedAndAGivenOneWorks) {
    {
        EventSink sink;
        Engine engine(tls_url());
        engine.set("tls.ca_file", certs_->path("ca.crt"));
        engine.add(&sink, {});
        int rc = engine.start();
        const std::string err = engine.last_error();
        EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << err;
        EXPECT_TRUE(contains(err, "the server requires a client certificate and none is set"))
            << err;
        EXPECT_TRUE(contains(err, "set tls.cert_file and tls.key_file")) << err;
    }
    EventSink sink;
    Engine engine(tls_url());
    engine.set("tls.ca_file", certs_->path("ca.crt"));
    engine.set("tls.cert_file", certs_->path("client.crt"));
    engine.set("tls.key_file", certs_->path("client.key"));
    engine.add(&sink, {{"events", "set"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    ASSERT_EQ(plain()->command({"SET", "with-client-cert", "v"}), "OK");
    EXPECT_TRUE(sink.wait_for("set", "with-client-cert")) << sink.describe();
}

// A certificate the server does not trust: the side that refused, the certificate, what to
// check; the same words however OpenSSL happened to report it (an alert, or a reset that
// overtook it), and never the advice to set what is set.
TEST_F(TlsClientCertRequired, ClientCertificateTheServerRefusesIsNamedWithItsSubject) {
    std::string first;
    for (int i = 0; i < 3; i++) {
        EventSink sink;
        Engine engine(tls_url());
        engine.set("tls.ca_file", certs_->path("ca.crt"));
        engine.set("tls.cert_file", certs_->path("stranger.crt"));
        engine.set("tls.key_file", certs_->path("stranger.key"));
        engine.add(&sink, {});
        const int rc = engine.start();
        const std::string err = engine.last_error();
        EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << err;
        EXPECT_TRUE(contains(err,
                             "the server refused our client certificate "
                             "('CN=keywatch-stranger', tls.cert_file '" +
                                 certs_->path("stranger.crt") + "')"))
            << err;
        EXPECT_TRUE(contains(err, "tls-ca-cert-file")) << err;
        EXPECT_FALSE(contains(err, "set tls.cert_file")) << err;
        if (i == 0) first = err;
        EXPECT_EQ(err, first) << "the message changed between attempts";
    }
}

}  // namespace
}  // namespace kwtest
