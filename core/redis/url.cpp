#include "core/redis/url.h"

#include <algorithm>
#include <cstdlib>

namespace keywatch {
namespace {

const char *kForms =
    "use redis://[user:password@]host[:port][/db][?db=N] (rediss:// for TLS), "
    "unix:///path/to.sock[?db=N] or "
    "redis+sentinel://[user:password@]host1:26379,host2:26379/MASTERNAME[/db]";

const char *kSentinelForm =
    "redis+sentinel://[user:password@]host1:26379,host2:26379/MASTERNAME[/db]";

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

// "host[:port]" or "[v6][:port]"; *port keeps its default when none is written. False with
// *what saying what is wrong.
bool parse_host_port(const std::string &hostport, std::string *host, int *port, std::string *what) {
    auto fail = [what](const std::string &why) {
        *what = why;
        return false;
    };
    std::string portpart;
    if (!hostport.empty() && hostport[0] == '[') {
        size_t close = hostport.find(']');
        if (close == std::string::npos) return fail("unclosed '[' in an IPv6 host");
        *host = hostport.substr(1, close - 1);
        if (host->find(':') == std::string::npos || host->find('[') != std::string::npos)
            return fail("'[" + *host + "]' is not an IPv6 address (brackets hold only those)");
        std::string after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') return fail("junk after the IPv6 host");
            portpart = after.substr(1);
            if (portpart.empty()) return fail("empty port after ':'");
        }
    } else {
        size_t colon = hostport.find(':');
        *host = hostport.substr(0, colon);
        if (colon != std::string::npos) {
            portpart = hostport.substr(colon + 1);
            if (portpart.empty()) return fail("empty port after ':'");
        }
    }
    if (host->empty()) return fail("missing host");
    if (host->find_first_of(" \t\r\n?#[]") != std::string::npos)
        return fail("the host contains a character a host cannot have");
    if (!portpart.empty()) {
        long value;
        if (!parse_int(portpart, 1, 65535, &value))
            return fail("port '" + portpart + "' is not a number from 1 to 65535");
        *port = static_cast<int>(value);
    }
    return true;
}

// The part of a sentinel URL after the scheme: [userinfo@]host1[:port],host2[:port]/NAME[/db].
bool parse_sentinel_url(const std::string &text, std::string rest, RedisUrl u, RedisUrl *out,
                        std::string *err) {
    auto refuse = [&](const std::string &what) {
        *err = "bad Redis URL '" + text + "': " + what + "; use " + kSentinelForm +
               " (rediss+sentinel:// for TLS to the master)";
        return false;
    };
    const size_t at = rest.rfind('@');
    if (at != std::string::npos) {
        if (!parse_userinfo(text, rest.substr(0, at), &u, err)) return false;
        rest = rest.substr(at + 1);
    }
    if (rest.find('?') != std::string::npos)
        return refuse("a sentinel URL takes no query (give the db as /MASTERNAME/db)");
    const size_t slash = rest.find('/');
    const std::string hosts = rest.substr(0, slash);
    const std::string path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const size_t slash2 = path.find('/');
    u.master_name = path.substr(0, slash2);
    if (u.master_name.empty())
        return refuse("missing the master's name after the sentinels (/MASTERNAME)");
    if (slash2 != std::string::npos) {
        long db;
        const std::string dbpart = path.substr(slash2 + 1);
        if (!parse_int(dbpart, 0, 1000000, &db))
            return refuse("database '" + dbpart + "' is not a number >= 0");
        u.db = static_cast<int>(db);
    }
    if (hosts.empty()) return refuse("no sentinel address before /MASTERNAME");
    for (size_t start = 0; start <= hosts.size();) {
        const size_t comma = std::min(hosts.find(',', start), hosts.size());
        const std::string one = hosts.substr(start, comma - start);
        if (one.empty()) return refuse("an empty sentinel address in the list (a stray comma?)");
        Endpoint e;
        e.port = 26379;
        std::string why;
        if (!parse_host_port(one, &e.host, &e.port, &why))
            return refuse("sentinel '" + one + "': " + why);
        u.sentinels.push_back(e);
        start = comma + 1;
    }
    u.host.clear();
    u.port = 0;
    *out = u;
    return true;
}

}  // namespace

std::vector<std::string> split_url_list(const std::string &text) {
    if (text.rfind("redis+sentinel://", 0) == 0 || text.rfind("rediss+sentinel://", 0) == 0)
        return {text};
    std::vector<std::string> out;
    for (size_t start = 0; start <= text.size();) {
        const size_t comma = std::min(text.find(',', start), text.size());
        out.push_back(text.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

RedisUrl RedisUrl::sentinel_at(size_t i) const {
    RedisUrl url;
    url.host = sentinels[i].host;
    url.port = sentinels[i].port;
    url.user = sentinel.username;
    url.password = sentinel.password;
    url.tls = sentinel.tls;
    url.tls_options = tls_options;
    url.tls_options.server_name.clear();
    return url;
}

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
    } else if (text.rfind("redis+sentinel://", 0) == 0 ||
               text.rfind("rediss+sentinel://", 0) == 0) {
        u.tls = text[5] == 's';  // rediss+sentinel://
        return parse_sentinel_url(text, text.substr(text.find("://") + 3), u, out, err);
    } else {
        return fail(err, text,
                    "unknown scheme (expected redis://, rediss://, unix:// or redis+sentinel://)");
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
    std::string why;
    if (!parse_host_port(hostport, &u.host, &u.port, &why)) return fail(err, text, why);
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
