#include "core/tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

namespace keywatch {

std::string drain_openssl_errors() {
    std::string out;
    while (unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out;
}

namespace {

std::string where(const RedisUrl &url) {
    return "TLS to " + url.endpoint();
}

std::string verify_name(const RedisUrl &url) {
    return url.tls_options.server_name.empty() ? url.host : url.tls_options.server_name;
}

}  // namespace

std::unique_ptr<TlsContext> TlsContext::make(const RedisUrl &url, std::string *err) {
    const TlsOptions &o = url.tls_options;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        *err = where(url) + ": cannot create an OpenSSL context: " + drain_openssl_errors();
        return nullptr;
    }
    std::unique_ptr<TlsContext> out(new TlsContext(url, ctx));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (!o.ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
            *err = where(url) + ": cannot load tls.ca_file '" + o.ca_file + "' (" +
                   drain_openssl_errors() +
                   "): give a readable PEM file holding the CA certificate that signed the "
                   "server's certificate";
            return nullptr;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        *err = where(url) + ": cannot load the system's CA certificates (" +
               drain_openssl_errors() + "): set tls.ca_file to the server's CA";
        return nullptr;
    }
    if (o.cert_file.empty() != o.key_file.empty()) {
        *err = where(url) +
               ": tls.cert_file and tls.key_file go together (a client certificate "
               "and its private key): set both or neither";
        return nullptr;
    }
    if (!o.cert_file.empty()) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
            *err = where(url) + ": cannot load tls.cert_file '" + o.cert_file + "' (" +
                   drain_openssl_errors() + "): give a readable PEM client certificate";
            return nullptr;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
            *err = where(url) + ": cannot load tls.key_file '" + o.key_file + "' (" +
                   drain_openssl_errors() +
                   "): give the readable, unencrypted PEM private key of tls.cert_file";
            return nullptr;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            *err = where(url) + ": tls.key_file '" + o.key_file +
                   "' is not the key of tls.cert_file '" + o.cert_file + "' (" +
                   drain_openssl_errors() + "): give the matching pair";
            return nullptr;
        }
    }
    SSL_CTX_set_verify(ctx, o.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    return out;
}

TlsContext::~TlsContext() {
    SSL_CTX_free(ctx_);
}

SSL *TlsContext::new_session(std::string *err) const {
    SSL *ssl = SSL_new(ctx_);
    if (!ssl) {
        *err = where(url_) + ": cannot create a TLS session: " + drain_openssl_errors();
        return nullptr;
    }
    const std::string name = verify_name(url_);
    // SNI is for host names, not addresses.
    if (!name.empty() && name.find_first_not_of("0123456789.:") != std::string::npos)
        SSL_set_tlsext_host_name(ssl, name.c_str());
    if (url_.tls_options.verify && !name.empty()) {
        // An address is checked against the certificate's IP entries, a name against its DNS
        // entries (and the common name).
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
            ERR_clear_error();
            SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            SSL_set1_host(ssl, name.c_str());
        }
    }
    return ssl;
}

std::string TlsContext::handshake_failure(SSL *ssl, const std::string &detail) const {
    const TlsOptions &o = url_.tls_options;
    long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (o.verify && v != X509_V_OK) {
        std::string why = X509_verify_cert_error_string(v);
        std::string msg = where(url_) + ": certificate verify failed (" + why + ")";
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            return msg + ": the server's certificate is not for '" + verify_name(url_) +
                   "'; connect by a name the certificate lists, or set tls.server_name to one";
        return msg + " against " +
               (o.ca_file.empty() ? std::string("the system's CA certificates")
                                  : "tls.ca_file '" + o.ca_file + "'") +
               ": set tls.ca_file to the CA that signed the server's certificate (tls.verify=false "
               "skips the check: for tests only)";
    }
    return where(url_) + ": the TLS handshake failed (" + (detail.empty() ? "closed" : detail) +
           "): is this the server's TLS port (tls-port), and does it accept this client's "
           "certificate (tls.cert_file/tls.key_file when tls-auth-clients is yes)?";
}

}  // namespace keywatch
