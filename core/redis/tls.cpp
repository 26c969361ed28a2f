#include "core/redis/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include "keywatch_types.h"

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

// "CN=keywatch-client,O=..." (RFC 2253); "" for no certificate.
std::string subject_of(X509 *cert) {
    if (!cert) return "";
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return "";
    X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char *data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n > 0 ? n : 0));
    BIO_free(bio);
    return out;
}

// The names a certificate is for: its DNS and IP entries ("127.0.0.1, localhost").
std::string names_of(X509 *cert) {
    std::string out;
    auto *names = static_cast<GENERAL_NAMES *>(
        X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *n = sk_GENERAL_NAME_value(names, i);
        std::string name;
        if (n->type == GEN_DNS) {
            name.assign(reinterpret_cast<const char *>(ASN1_STRING_get0_data(n->d.dNSName)),
                        static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
        } else if (n->type == GEN_IPADD) {
            char text[INET6_ADDRSTRLEN] = "";
            const int len = ASN1_STRING_length(n->d.iPAddress);
            if (len == 4 || len == 16)
                inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.iPAddress),
                          text, sizeof text);
            name = text;
        }
        if (!name.empty()) out += (out.empty() ? "" : ", ") + name;
    }
    GENERAL_NAMES_free(names);
    return out;
}

// Alerts a server sends when it does not accept the client's certificate (or has none).
bool certificate_alert(int alert) {
    switch (alert) {
        case SSL_AD_BAD_CERTIFICATE:
        case SSL_AD_UNSUPPORTED_CERTIFICATE:
        case SSL_AD_CERTIFICATE_REVOKED:
        case SSL_AD_CERTIFICATE_EXPIRED:
        case SSL_AD_CERTIFICATE_UNKNOWN:
        case SSL_AD_UNKNOWN_CA:
        case SSL_AD_ACCESS_DENIED:
        case SSL_AD_CERTIFICATE_REQUIRED:
            return true;
        default:
            return false;
    }
}

// Records what the server sends (write_p 0): its first record header, a certificate
// request, alerts. OpenSSL calls it for every record header and protocol message.
void trace_message(int write_p, int, int content_type, const void *buf, size_t len, SSL *,
                   void *arg) {
    auto *trace = static_cast<TlsTrace *>(arg);
    const auto *bytes = static_cast<const unsigned char *>(buf);
    if (write_p || !trace || len == 0) return;
    if (content_type == SSL3_RT_HEADER && trace->first_len == 0) {
        trace->first_len = std::min(len, sizeof trace->first);
        std::copy(bytes, bytes + trace->first_len, trace->first);
    } else if (content_type == SSL3_RT_HANDSHAKE && bytes[0] == SSL3_MT_CERTIFICATE_REQUEST) {
        trace->cert_requested = true;
    } else if (content_type == SSL3_RT_ALERT && len >= 2) {
        trace->alert = bytes[1];
    }
}

bool tls_record_type(unsigned char type) {
    return type >= SSL3_RT_CHANGE_CIPHER_SPEC && type <= SSL3_RT_APPLICATION_DATA;
}

}  // namespace

bool starts_tls_record(const char *data, size_t size) {
    return size >= 2 && tls_record_type(static_cast<unsigned char>(data[0])) && data[1] == 3;
}

RedisConn::Failure tls_expected(const RedisUrl &url, const std::string &command, bool tls_bytes) {
    const std::string what = command.empty() ? "the first command" : command;
    return RedisConn::Failure::advised(
        "TLS on one side only: the server at " + url.endpoint() +
            (tls_bytes ? " answered " + what + " with TLS"
                       : " closed the connection without answering " + what +
                             ", as a TLS port does to plain RESP"),
        "it most likely expects TLS: use rediss:// (with tls.ca_file for a private CA)", tls_bytes,
        KW_ERR_CONNECT);
}

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
    out->cert_subject_ = subject_of(SSL_CTX_get0_certificate(ctx));
    return out;
}

TlsContext::~TlsContext() {
    SSL_CTX_free(ctx_);
}

SSL *TlsContext::new_session(TlsTrace *trace, std::string *err) const {
    SSL *ssl = SSL_new(ctx_);
    if (!ssl) {
        *err = where(url_) + ": cannot create a TLS session: " + drain_openssl_errors();
        return nullptr;
    }
    *trace = TlsTrace();
    SSL_set_msg_callback(ssl, &trace_message);
    SSL_set_msg_callback_arg(ssl, trace);
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

RedisConn::Failure TlsContext::explain(SSL *ssl, const TlsTrace &trace, bool handshake_done,
                                       const std::string &detail) const {
    const long verified = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (url_.tls_options.verify && verified != X509_V_OK)
        return refused_server_certificate(ssl, verified);
    if (trace.first_len > 0 && !tls_record_type(trace.first[0])) return plain_text_server(trace);
    // A server that asked for our certificate and then ended the connection before
    // answering anything refused it: with an alert, or by closing the socket (a reset can
    // overtake the alert, so both read the same). TLS 1.2 says handshake_failure when none
    // came.
    const bool none_given = cert_subject_.empty();
    if (trace.cert_requested && (trace.alert < 0 || certificate_alert(trace.alert) ||
                                 (none_given && trace.alert == SSL_AD_HANDSHAKE_FAILURE)))
        return refused_client_certificate();
    const std::string alert = trace.alert >= 0 ? std::string(" (its alert: ") +
                                                     SSL_alert_desc_string_long(trace.alert) + ")"
                                               : "";
    if (handshake_done)
        return {"lost the connection to Redis at " + url_.endpoint() +
                    " right after the TLS handshake, before it answered" + alert + ": " +
                    (detail.empty() ? "closed by the server" : detail),
                false, KW_ERR_CONNECT};
    return RedisConn::Failure::advised(
        where(url_) + ": the TLS handshake failed" + alert + " (" +
            (detail.empty() ? "closed by the server" : detail) + ")",
        "is this the server's TLS port (tls-port), and does it accept TLS 1.2 or later?", false,
        KW_ERR_CONNECT);
}

RedisConn::Failure TlsContext::no_answer() const {
    return RedisConn::Failure::advised(
        where(url_) +
            ": the server said nothing in answer to the TLS hello within redis.connect_timeout: "
            "most likely TLS on one side only (a plain Redis port stays silent when greeted "
            "with TLS)",
        "if " + url_.endpoint() +
            " is the server's plain port, use redis:// (or rediss:// with its tls-port); "
            "otherwise, is the server paused or overloaded?",
        false, KW_ERR_CONNECT);
}

RedisConn::Failure TlsContext::refused_server_certificate(SSL *ssl, long v) const {
    const TlsOptions &o = url_.tls_options;
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
    X509 *cert = chain && sk_X509_num(chain) > 0 ? sk_X509_value(chain, 0) : nullptr;
    const std::string subject = subject_of(cert);
    const std::string refused = where(url_) + ": we refused the server's certificate" +
                                (subject.empty() ? "" : " ('" + subject + "')") + ": ";
    if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        const std::string names = cert ? names_of(cert) : "";
        return RedisConn::Failure::advised(
            refused + "it is not for '" + verify_name(url_) + "'" +
                (names.empty() ? "" : " (it is for " + names + ")"),
            "connect by a name the certificate lists, or set tls.server_name to one", true,
            KW_ERR_CONNECT);
    }
    const std::string why =
        std::string("certificate verify failed (") + X509_verify_cert_error_string(v) + ")";
    if (v == X509_V_ERR_CERT_HAS_EXPIRED || v == X509_V_ERR_CERT_NOT_YET_VALID)
        return RedisConn::Failure::advised(
            refused + why, "renew the server's certificate (or check this host's clock)", true,
            KW_ERR_CONNECT);
    return RedisConn::Failure::advised(
        refused + why + " against " +
            (o.ca_file.empty() ? std::string("the system's CA certificates")
                               : "tls.ca_file '" + o.ca_file + "'"),
        "set tls.ca_file to the CA that signed the server's certificate (tls.verify=false "
        "skips the check: for tests only)",
        true, KW_ERR_CONNECT);
}

RedisConn::Failure TlsContext::refused_client_certificate() const {
    const TlsOptions &o = url_.tls_options;
    if (cert_subject_.empty())
        return RedisConn::Failure::advised(
            where(url_) + ": the server requires a client certificate and none is set",
            "set tls.cert_file and tls.key_file to a certificate signed by a CA the server "
            "trusts (its tls-ca-cert-file) and its key",
            true, KW_ERR_CONNECT);
    return RedisConn::Failure::advised(
        where(url_) + ": the server refused our client certificate ('" + cert_subject_ +
            "', tls.cert_file '" + o.cert_file + "')",
        "check that the server trusts the CA that signed it (its tls-ca-cert-file or "
        "tls-ca-cert-dir) and that it has not expired",
        true, KW_ERR_CONNECT);
}

RedisConn::Failure TlsContext::plain_text_server(const TlsTrace &trace) const {
    const char first = static_cast<char>(trace.first[0]);
    const bool resp = std::string("+-:$*").find(first) != std::string::npos;
    return RedisConn::Failure::advised(
        "TLS on one side only: the server at " + url_.endpoint() +
            (resp ? " speaks plain RESP here" : " does not speak TLS here") +
            " (it answered the TLS hello in plain text)",
        "use redis:// for this port (or rediss:// with the server's tls-port)", true,
        KW_ERR_CONNECT);
}

}  // namespace keywatch
