// TLS for rediss:// connections: builds an OpenSSL client context from the tls.* options,
// records what each session's server sent (TlsTrace) and explains a failed connection
// from it: which side refused which certificate (and its subject), TLS on one side only, a
// name the certificate does not list; each message ends with what to check. The message
// does not depend on how OpenSSL happened to report the failure (an alert or a reset).
// Used by RedisConn only. Each object is used by one thread at a time.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "core/redis/redis_conn.h"
#include "core/redis/url.h"

namespace keywatch {

// What the server of one TLS session sent, recorded by OpenSSL's message callback.
struct TlsTrace {
    unsigned char first[5] = {};  // the first bytes of its first record (its header)
    size_t first_len = 0;
    bool cert_requested = false;  // it asked for a client certificate
    int alert = -1;               // the last alert it sent (the description); -1: none
};

class TlsContext {
  public:
    // Loads the CA, client certificate and key named in url.tls_options. Null with *err
    // naming the file that could not be used and what to do.
    static std::unique_ptr<TlsContext> make(const RedisUrl &url, std::string *err);
    ~TlsContext();
    TlsContext(const TlsContext &) = delete;
    TlsContext &operator=(const TlsContext &) = delete;

    // A new session for one connection to url (SNI and the name to verify set), recording
    // into *trace (emptied here; it must outlive the session). Owned by the caller (the
    // bufferevent frees it). Null with *err on failure.
    SSL *new_session(TlsTrace *trace, std::string *err) const;

    // Why a TLS connection ended before the server answered anything: during the handshake
    // (handshake_done false) or right after it. `ssl` may be null; `detail`: what the
    // transport reported (the socket error, OpenSSL's error queue).
    RedisConn::Failure explain(SSL *ssl, const TlsTrace &trace, bool handshake_done,
                               const std::string &detail) const;
    // The server said nothing in answer to the TLS hello within redis.connect_timeout.
    RedisConn::Failure no_answer() const;

  private:
    TlsContext(const RedisUrl &url, SSL_CTX *ctx) : url_(url), ctx_(ctx) {}
    RedisConn::Failure refused_server_certificate(SSL *ssl, long verify_result) const;
    RedisConn::Failure refused_client_certificate() const;
    RedisConn::Failure plain_text_server(const TlsTrace &trace) const;

    RedisUrl url_;
    SSL_CTX *ctx_;
    std::string cert_subject_;  // of tls.cert_file; empty without one
};

// redis:// at a port that most likely expects TLS: it closed the connection without
// answering `command` (tls_bytes false), or answered it with a TLS record (then certain:
// permanent).
RedisConn::Failure tls_expected(const RedisUrl &url, const std::string &command, bool tls_bytes);

// Whether data begins with a TLS record header (what a TLS port sends back to plain RESP).
bool starts_tls_record(const char *data, size_t size);

// The text of OpenSSL's error queue (emptied), "; "-separated; empty if there is none.
std::string drain_openssl_errors();

}  // namespace keywatch
