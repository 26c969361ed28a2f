// TLS (rediss://) end to end against a real redis-server 7.0 built with TLS: a throw-away
// CA and server certificate made with the openssl CLI, a server listening on a plain and a
// TLS port, an engine and a client that talk only TLS, and the refusals (wrong CA, wrong
// name, unreadable file) with messages that name what failed and what to do.
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "redis_fixture.h"

namespace kwtest {
namespace {

// Runs a shell command; a failure is a test set-up failure with the command's output.
void run(const std::string &cmd) {
    const std::string full = cmd + " >/dev/null 2>&1";
    if (std::system(full.c_str()) != 0) throw std::runtime_error("set-up command failed: " + cmd);
}

// A CA (and a second, unrelated one) and a server certificate for 127.0.0.1 and localhost,
// in a private directory removed afterwards.
class Certificates {
  public:
    Certificates() {
        char tmpl[] = "/tmp/keywatch-tls-XXXXXX";
        if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        for (const char *ca : {"ca", "other-ca"})
            run("openssl req -x509 -new " + ec + " -days 2 -subj /CN=keywatch-test-" + ca +
                " -keyout " + path(std::string(ca) + ".key") + " -out " +
                path(std::string(ca) + ".crt"));
        run("openssl req -new " + ec + " -subj /CN=localhost -keyout " + path("server.key") +
            " -out " + path("server.csr"));
        std::ofstream(path("ext.cnf")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
        run("openssl x509 -req -in " + path("server.csr") + " -CA " + path("ca.crt") + " -CAkey " +
            path("ca.key") + " -CAcreateserial -days 2 -extfile " + path("ext.cnf") + " -out " +
            path("server.crt"));
        // A client certificate signed by the same CA.
        run("openssl req -new " + ec + " -subj /CN=keywatch-client -keyout " + path("client.key") +
            " -out " + path("client.csr"));
        run("openssl x509 -req -in " + path("client.csr") + " -CA " + path("ca.crt") + " -CAkey " +
            path("ca.key") + " -CAcreateserial -days 2 -out " + path("client.crt"));
    }
    ~Certificates() {
        if (dir_.rfind("/tmp/keywatch-tls-", 0) == 0) (void)std::system(("rm -rf " + dir_).c_str());
    }
    std::string path(const std::string &name) const { return dir_ + "/" + name; }

  private:
    std::string dir_;
};

class Tls : public ::testing::Test {
  protected:
    // The server's tls-auth-clients.
    virtual std::string auth_clients() const { return "optional"; }
    void SetUp() override {
        certs_ = std::make_unique<Certificates>();
        tls_port_ = keywatch::RedisProcess::free_port();
        keywatch::RedisProcess::Options o;
        o.extra = {"--tls-port",         std::to_string(tls_port_),
                   "--tls-cert-file",    certs_->path("server.crt"),
                   "--tls-key-file",     certs_->path("server.key"),
                   "--tls-ca-cert-file", certs_->path("ca.crt"),
                   "--tls-auth-clients", auth_clients()};
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
    // The plain port, for setting up data.
    std::unique_ptr<RedisClient> plain() {
        return std::make_unique<RedisClient>(redis_->host(), redis_->port());
    }

    std::unique_ptr<Certificates> certs_;
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

TEST_F(Tls, PlainRedisUrlAtTheTlsPortIsAClearError) {
    EventSink sink;
    Engine engine("redis://127.0.0.1:" + std::to_string(tls_port_));
    engine.set("redis.connect_timeout", "2s");
    engine.add(&sink, {});
    int rc = engine.start();
    EXPECT_TRUE(rc == KW_ERR_CONNECT || rc == KW_ERR_TIMEOUT) << kw_err_name(rc);
    EXPECT_TRUE(contains(engine.last_error(), std::to_string(tls_port_))) << engine.last_error();
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
        EXPECT_EQ(rc, KW_ERR_CONNECT) << kw_err_name(rc) << ": " << engine.last_error();
        EXPECT_TRUE(contains(engine.last_error(), "tls.cert_file")) << engine.last_error();
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

}  // namespace
}  // namespace kwtest
