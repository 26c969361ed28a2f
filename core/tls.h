// TLS for rediss:// connections: builds an OpenSSL client context from the tls.* options
// and explains a failed handshake (which check failed, against which file or name, and
// what to do). Used by RedisConn only. Each object is used by one thread at a time.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "core/url.h"

namespace keywatch {

class TlsContext {
  public:
    // Loads the CA, client certificate and key named in url.tls_options. Null with *err
    // naming the file that could not be used and what to do.
    static std::unique_ptr<TlsContext> make(const RedisUrl &url, std::string *err);
    ~TlsContext();
    TlsContext(const TlsContext &) = delete;
    TlsContext &operator=(const TlsContext &) = delete;

    // A new session for one connection to url (SNI and the name to verify set). Owned by
    // the caller (the bufferevent frees it). Null with *err on failure.
    SSL *new_session(std::string *err) const;

    // Why the handshake of `ssl` failed, for a message that ends with what to do.
    // `detail`: what the transport reported (OpenSSL's error queue, errno).
    std::string handshake_failure(SSL *ssl, const std::string &detail) const;

  private:
    TlsContext(const RedisUrl &url, SSL_CTX *ctx) : url_(url), ctx_(ctx) {}
    RedisUrl url_;
    SSL_CTX *ctx_;
};

// The text of OpenSSL's error queue (emptied), "; "-separated; empty if there is none.
std::string drain_openssl_errors();

}  // namespace keywatch
