// Fuzz target: Redis URLs (parse_redis_url) and seed lists (the redis.url option).
// Properties: a refused URL has a message; an accepted one has a usable endpoint, and the
// URL rebuilt from its parts (user and password percent-escaped) parses to the same parts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "core/redis/url.h"
#include "fuzz/check.h"

namespace {

std::string escape(const std::string &s) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

std::string rebuild(const keywatch::RedisUrl &u) {
    std::string auth;
    if (!u.user.empty() || !u.password.empty())
        auth = escape(u.user) + ":" + escape(u.password) + "@";  // "user:@" keeps a user alone
    if (u.is_unix()) return "unix://" + auth + u.unix_path + "?db=" + std::to_string(u.db);
    std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
    return "redis://" + auth + host + ":" + std::to_string(u.port) + "/" + std::to_string(u.db);
}

void check_one(const std::string &text) {
    keywatch::RedisUrl u;
    std::string err;
    if (!keywatch::parse_redis_url(text, &u, &err)) {
        KW_FUZZ_CHECK(!err.empty(), "a refused URL says why");
        return;
    }
    KW_FUZZ_CHECK(u.db >= 0, "db is not negative");
    if (!u.sentinels.empty()) {  // the master's address comes from the sentinels later
        KW_FUZZ_CHECK(!u.master_name.empty(), "a sentinel URL names its master");
        return;
    }
    KW_FUZZ_CHECK(u.is_unix() ? u.host.empty() : !u.host.empty(), "host xor socket path");
    KW_FUZZ_CHECK(u.is_unix() || (u.port > 0 && u.port < 65536), "port in 1..65535");
    KW_FUZZ_CHECK(!u.endpoint().empty(), "an endpoint to name the node");
    keywatch::RedisUrl again;
    std::string err2;
    const std::string rebuilt = rebuild(u);
    KW_FUZZ_CHECK(keywatch::parse_redis_url(rebuilt, &again, &err2), err2.c_str());
    KW_FUZZ_CHECK(again.host == u.host && again.port == u.port && again.db == u.db &&
                      again.unix_path == u.unix_path && again.user == u.user &&
                      again.password == u.password,
                  "the rebuilt URL parses to the same parts");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    check_one(text);

    keywatch::Config conf;
    std::string before, after, err;
    conf.get("redis.url", &before);
    if (conf.set("redis.url", text, &err) != 0) {
        KW_FUZZ_CHECK(!err.empty(), "a refused seed list says why");
        conf.get("redis.url", &after);
        KW_FUZZ_CHECK(after == before, "a refused seed list changes nothing");
        return 0;
    }
    // A sentinel URL's commas are its sentinels': it is one seed (split_url_list).
    KW_FUZZ_CHECK(conf.seeds.size() == keywatch::split_url_list(text).size(),
                  "one seed per comma-separated URL");
    KW_FUZZ_CHECK(conf.url.endpoint() == conf.seeds.front().endpoint(), "url is the first seed");
    return 0;
}
