// TestCertificates: a throw-away PKI made with the openssl CLI for the TLS tests (the
// library's and the command's), in a private directory removed afterwards:
//   ca.crt, other-ca.crt        two unrelated CAs
//   server.crt/.key             signed by ca, for 127.0.0.1 and localhost
//   client.crt/.key             CN=keywatch-client, signed by ca
//   stranger.crt/.key           CN=keywatch-stranger, signed by other-ca (a server that
//                               trusts only ca refuses it)
// and the redis-server arguments of a TLS port that uses them. Header-only; not
// thread-safe: one owner thread.
#pragma once

#include <stdlib.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace keywatch {

class TestCertificates {
  public:
    TestCertificates() {
        char tmpl[] = "/tmp/keywatch-tls-XXXXXX";
        if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        for (const char *ca : {"ca", "other-ca"})
            run("openssl req -x509 -new " + kKey + " -days 2 -subj /CN=keywatch-test-" + ca +
                " -keyout " + path(std::string(ca) + ".key") + " -out " +
                path(std::string(ca) + ".crt"));
        std::ofstream(path("ext.cnf")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
        sign("server", "localhost", "ca", "-extfile " + path("ext.cnf"));
        sign("client", "keywatch-client", "ca", "");
        sign("stranger", "keywatch-stranger", "other-ca", "");
    }
    ~TestCertificates() {
        if (dir_.rfind("/tmp/keywatch-tls-", 0) == 0) (void)std::system(("rm -rf " + dir_).c_str());
    }
    TestCertificates(const TestCertificates &) = delete;
    TestCertificates &operator=(const TestCertificates &) = delete;

    std::string path(const std::string &name) const { return dir_ + "/" + name; }
    const std::string &dir() const { return dir_; }

    // redis-server arguments for a TLS port with the server certificate, trusting ca for
    // clients; auth_clients: its tls-auth-clients ("no", "optional", "yes").
    std::vector<std::string> server_args(int tls_port, const std::string &auth_clients) const {
        std::vector<std::string> args = {"--tls-port", std::to_string(tls_port)};
        for (auto &a : server_files(auth_clients)) args.push_back(a);
        return args;
    }
    // The same without the port: the certificate, key and CA arguments alone.
    std::vector<std::string> server_files(const std::string &auth_clients) const {
        return {"--tls-cert-file",    path("server.crt"), "--tls-key-file",     path("server.key"),
                "--tls-ca-cert-file", path("ca.crt"),     "--tls-auth-clients", auth_clients};
    }
    // The keywatch options of a client of those servers: the CA, and the client certificate
    // they may require.
    std::vector<std::pair<std::string, std::string>> client_options() const {
        return {{"tls.ca_file", path("ca.crt")},
                {"tls.cert_file", path("client.crt")},
                {"tls.key_file", path("client.key")}};
    }

  private:
    inline static const std::string kKey =
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

    // Runs a shell command; a failure is a test set-up failure naming the command.
    static void run(const std::string &cmd) {
        const std::string full = cmd + " >/dev/null 2>&1";
        if (std::system(full.c_str()) != 0)
            throw std::runtime_error("set-up command failed: " + cmd);
    }

    // name.crt/.key with CN=cn, signed by ca; extra: more `openssl x509` arguments.
    void sign(const std::string &name, const std::string &cn, const std::string &ca,
              const std::string &extra) {
        run("openssl req -new " + kKey + " -subj /CN=" + cn + " -keyout " + path(name + ".key") +
            " -out " + path(name + ".csr"));
        run("openssl x509 -req -in " + path(name + ".csr") + " -CA " + path(ca + ".crt") +
            " -CAkey " + path(ca + ".key") + " -CAcreateserial -days 2 " + extra + " -out " +
            path(name + ".crt"));
    }

    std::string dir_;
};

}  // namespace keywatch
