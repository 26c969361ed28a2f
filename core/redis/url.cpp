#include "core/redis/url.h"

#include <cstdlib>

namespace keywatch {
namespace {

const char *kForms =
    "use redis://[user:password@]host[:port][/db][?db=N] (rediss:// for TLS) or "
    "unix:///path/to.sock[?db=N]";

bool fail(std::string *err, const std::string &text, const std::string &what) {
    *err = "bad Redis URL '" + text + "': " + what + "; " + kForms;
    return false;
}

bool percent_decode(const std::string &in, std::string *out) {
    out->clear();
    for (size_t i = 0; i < in.size(); i++) {
        if (in[i] != '%') {
            out->push_back(in[i]);
            continue;
        }
        if (i + 2 >= in.size()) return false;
        auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
        if (hi < 0 || lo < 0) return false;
        out->push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return true;
}

// Parses a non-negative decimal number in [min, max]; the whole string must be digits.
bool parse_int(const std::string &s, long min, long max, long *out) {
    if (s.empty() || s.size() > 10) return false;
    long v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    if (v < min || v > max) return false;
    *out = v;
    return true;
}

// The query after '?': only db=N is accepted (what redis-py and most clients write).
bool parse_query(const std::string &text, const std::string &query, RedisUrl *u, std::string *err) {
    long db;
    if (query.rfind("db=", 0) != 0 || !parse_int(query.substr(3), 0, 1000000, &db))
        return fail(err, text, "the only query accepted is ?db=N with N >= 0");
    u->db = static_cast<int>(db);
    return true;
}

// "user:password@" (both optional) before the host part.
bool parse_userinfo(const std::string &text, const std::string &info, RedisUrl *u,
                    std::string *err) {
    size_t colon = info.find(':');
    std::string user = colon == std::string::npos ? info : info.substr(0, colon);
    std::string pass = colon == std::string::npos ? "" : info.substr(colon + 1);
    if (colon == std::string::npos) {
        // "redis://secret@host" is the common short form for a password alone.
        pass = user;
        user.clear();
    }
    if (!percent_decode(user, &u->user) || !percent_decode(pass, &u->password))
        return fail(err, text, "bad %-escape in the user or password");
    return true;
}

}  // namespace

RedisUrl RedisUrl::at(const Endpoint &node) const {
    RedisUrl url = *this;
    url.host = node.host;
    url.port = node.port;
    url.unix_path = node.unix_path;
    return url;
}

std::string auth_refused_message(const RedisUrl &url, const std::string &server_error) {
    return "Redis at " + url.endpoint() + " refused AUTH" +
           (url.user.empty() ? "" : " for user '" + url.user + "'") + ": " + server_error +
           "; check the password (redis://[user:]password@host:port or redis.password)";
}

std::string password_required_message(const RedisUrl &url) {
    return "Redis at " + url.endpoint() +
           " requires a password: give it in the URL (redis://:PASSWORD@host:port or "
           "redis://USER:PASSWORD@host:port) or set redis.password";
}

std::string no_answer_message(const RedisUrl &url, int64_t timeout_ms, const std::string &command) {
    const std::string limit = timeout_ms % 1000 == 0 ? std::to_string(timeout_ms / 1000) + "s"
                                                     : std::to_string(timeout_ms) + "ms";
    return "Redis at " + url.endpoint() + " accepted the connection but did not answer" +
           (command.empty() ? "" : " " + command) + " within redis.connect_timeout (" + limit +
           "): is the server paused, overloaded or still starting? check redis.url, or raise "
           "redis.connect_timeout";
}

std::string not_redis_message(const RedisUrl &url, const std::string &detail) {
    return "the server at " + url.endpoint() + " does not speak the Redis protocol (" + detail +
           "): is it another service (HTTP, TLS, a proxy's admin port)? check redis.url";
}

std::string select_refused_message(const RedisUrl &url, const std::string &server_error) {
    return "SELECT " + std::to_string(url.db) + " failed on " + url.endpoint() + ": " +
           server_error + "; check the db in redis.url (the server's 'databases' setting says " +
           "how many it has, numbered from 0)";
}

std::string still_loading_message(const RedisUrl &url, int64_t waited_ms) {
    return "Redis at " + url.endpoint() +
           " is still loading its data set into memory after redis.connect_timeout (" +
           std::to_string(waited_ms) +
           "ms): try again once it has loaded (INFO persistence shows loading:0), or raise "
           "redis.connect_timeout";
}

std::string permission_message(const RedisUrl &url, const std::string &what,
                               const std::string &server_error, const std::string &grant) {
    const std::string user = url.user.empty() ? "default" : url.user;
    return "the ACL user '" + user + "' may not " + what + " on " + url.endpoint() + " (" +
           server_error + "); grant it with: ACL SETUSER " + user + " " + grant;
}

std::string scripts_permission_message(const RedisUrl &url, const std::string &ns,
                                       const std::string &server_error) {
    return permission_message(url, "run keywatch's queue scripts on its keys", server_error,
                              "+@scripting +@read +@write +time ~" + ns +
                                  ":* (and read access to the keys you track, e.g. %R~PATTERN)");
}

bool parse_redis_url(const std::string &text, RedisUrl *out, std::string *err) {
    RedisUrl u;
    std::string rest;
    bool is_unix = false;
    if (text.rfind("redis://", 0) == 0) {
        rest = text.substr(8);
    } else if (text.rfind("unix://", 0) == 0) {
        rest = text.substr(7);
        is_unix = true;
    } else if (text.rfind("rediss://", 0) == 0) {
        rest = text.substr(9);
        u.tls = true;
    } else {
        return fail(err, text, "unknown scheme (expected redis://, rediss:// or unix://)");
    }

    size_t at = rest.rfind('@');
    if (at != std::string::npos) {
        if (!parse_userinfo(text, rest.substr(0, at), &u, err)) return false;
        rest = rest.substr(at + 1);
    }

    // A query names the db (?db=N); it wins over a /db path, as in redis-py. An empty
    // query is none.
    std::string query;
    const size_t q = rest.find('?');
    if (q != std::string::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const bool has_query = !query.empty();

    if (is_unix) {
        if (rest.empty() || rest[0] != '/')
            return fail(err, text, "a unix socket path must be absolute (unix:///path)");
        u.unix_path = rest;
        if (has_query && !parse_query(text, query, &u, err)) return false;
        *out = u;
        return true;
    }

    std::string hostport = rest, dbpart;
    size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        hostport = rest.substr(0, slash);
        dbpart = rest.substr(slash + 1);
    }
    std::string portpart;
    if (!hostport.empty() && hostport[0] == '[') {
        size_t close = hostport.find(']');
        if (close == std::string::npos) return fail(err, text, "unclosed '[' in an IPv6 host");
        u.host = hostport.substr(1, close - 1);
        if (u.host.find(':') == std::string::npos || u.host.find('[') != std::string::npos)
            return fail(err, text,
                        "'[" + u.host + "]' is not an IPv6 address (brackets hold only those)");
        std::string after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') return fail(err, text, "junk after the IPv6 host");
            portpart = after.substr(1);
            if (portpart.empty()) return fail(err, text, "empty port after ':'");
        }
    } else {
        size_t colon = hostport.find(':');
        u.host = hostport.substr(0, colon);
        if (colon != std::string::npos) {
            portpart = hostport.substr(colon + 1);
            if (portpart.empty()) return fail(err, text, "empty port after ':'");
        }
    }
    if (u.host.empty()) return fail(err, text, "missing host");
    if (u.host.find_first_of(" \t\r\n?#[]") != std::string::npos)
        return fail(err, text, "the host contains a character a host cannot have");
    if (!portpart.empty()) {
        long port;
        if (!parse_int(portpart, 1, 65535, &port))
            return fail(err, text, "port '" + portpart + "' is not a number from 1 to 65535");
        u.port = static_cast<int>(port);
    }
    if (!dbpart.empty()) {
        long db;
        if (!parse_int(dbpart, 0, 1000000, &db))
            return fail(err, text, "database '" + dbpart + "' is not a number >= 0");
        u.db = static_cast<int>(db);
    }
    if (has_query && !parse_query(text, query, &u, err)) return false;
    *out = u;
    return true;
}

}  // namespace keywatch
