// Redis connection URLs. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/redis/endpoint.h"

namespace keywatch {

// TLS settings for rediss:// (options tls.*). Every connection of an engine or client
// carries the same ones.
struct TlsOptions {
    std::string ca_file;      // PEM CA bundle that signed the server's cert; empty: system CAs
    std::string cert_file;    // client certificate (PEM), for servers that check clients
    std::string key_file;     // its private key (PEM)
    std::string server_name;  // name to verify and send as SNI; empty: the URL's host
    bool verify = true;       // verify the server's certificate and name
};

// How keywatch talks to the sentinels themselves (options sentinel.*), apart from the
// master's credentials and TLS (the URL's and redis.* / tls.*).
struct SentinelOptions {
    std::string username;  // the sentinels' ACL user; empty: the default user
    std::string password;  // empty: no AUTH to the sentinels
    bool tls = false;      // the sentinels listen for TLS (verified with the tls.* options)
};

struct RedisUrl {
    std::string host;  // empty for a unix socket (and for a sentinel URL until discovered)
    int port = 6379;
    std::string unix_path;  // empty for TCP
    std::string user;       // ACL user; empty: the default user
    std::string password;   // empty: no AUTH
    int db = 0;
    bool tls = false;  // rediss://
    TlsOptions tls_options;
    // redis+sentinel://: the sentinels to ask, in order, for the address of master_name.
    // host and port are that master once found (core/redis/sentinel.h).
    std::vector<Endpoint> sentinels;
    std::string master_name;
    SentinelOptions sentinel;

    bool is_sentinel() const { return !sentinels.empty(); }
    // How to reach sentinel i: its address, the sentinel.* credentials and TLS, db 0.
    RedisUrl sentinel_at(size_t i) const;
    bool is_unix() const { return !unix_path.empty(); }
    // Where the server is: host and port, or the socket.
    Endpoint address() const { return {host, port, unix_path}; }
    // "host:port", "[v6]:port" or the socket path: how logs, stats and events name the node.
    std::string endpoint() const { return address().str(); }
    // The same server settings (credentials, db, TLS) for another node, `at`.
    RedisUrl at(const Endpoint &node) const;
};

// Parses redis://[user:password@]host[:port][/db][?db=N] (also [::1] for IPv6), the same
// with rediss:// (TLS, settings from the tls.* options) and
// unix:///path/to.sock[?db=N] (also unix://[user:password@]/path). A ?db=N query wins over
// a /db path (as in redis-py); db=N is the only query. Percent-escapes in the user and
// password are decoded. On failure returns false with a message in *err that
// names the problem and shows the accepted forms.
// Also redis+sentinel://[user:password@]host1[:port],host2[:port]/MASTERNAME[/db]
// (rediss+sentinel:// for TLS to the master; a sentinel's port defaults to 26379): the
// user and password are the master's, the sentinels' own come from sentinel.*.
bool parse_redis_url(const std::string &text, RedisUrl *out, std::string *err);

// The URLs of a redis.url value: several comma-separated seeds of one cluster, or one URL
// (a sentinel URL's commas separate its sentinels: it is never split).
std::vector<std::string> split_url_list(const std::string &text);

// The messages every connection gives for the two ways AUTH goes wrong, so they read the
// same whichever part of keywatch met them.
std::string auth_refused_message(const RedisUrl &url, const std::string &server_error);
std::string password_required_message(const RedisUrl &url);

// A server that did not answer a handshake command (`command`) within redis.connect_timeout:
// names the server and the timeout that ran out, not an internal probe.
std::string no_answer_message(const RedisUrl &url, int64_t timeout_ms, const std::string &command);
// Something that answered in another protocol (an HTTP server, a TLS port, ...).
std::string not_redis_message(const RedisUrl &url, const std::string &detail);
// SELECT refused: the URL's db does not exist there (retrying cannot help).
std::string select_refused_message(const RedisUrl &url, const std::string &server_error);
// A server that still answered -LOADING (its data set is being loaded into memory) when the
// wait for it, redis.connect_timeout (waited_ms), ran out.
std::string still_loading_message(const RedisUrl &url, int64_t waited_ms);
// NOPERM for something keywatch needs: which ACL user, what was refused (`what`), the
// server's words and the ACL SETUSER rule (`grant`, without "ACL SETUSER user") that fixes it.
std::string permission_message(const RedisUrl &url, const std::string &what,
                               const std::string &server_error, const std::string &grant);
// NOPERM for keywatch's queue scripts (EVAL/EVALSHA on the queue keys of namespace ns), met
// by the engine's start check and by the client's calls alike: the same words and rule.
std::string scripts_permission_message(const RedisUrl &url, const std::string &ns,
                                       const std::string &server_error);

}  // namespace keywatch
