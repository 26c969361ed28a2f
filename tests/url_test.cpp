// parse_redis_url: the accepted forms, and an error that names the problem for the rest.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "core/redis/url.h"

namespace keywatch {
namespace {

RedisUrl parse_ok(const std::string &text) {
    RedisUrl u;
    std::string err;
    EXPECT_TRUE(parse_redis_url(text, &u, &err)) << text << ": " << err;
    return u;
}

std::string lower(std::string s) {
    for (auto &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Parsing fails and the error mentions `word` (case-insensitive).
void expect_refused(const std::string &text, const std::string &word) {
    RedisUrl u;
    std::string err;
    EXPECT_FALSE(parse_redis_url(text, &u, &err)) << "accepted: " << text;
    EXPECT_NE(lower(err).find(lower(word)), std::string::npos)
        << "error for '" << text << "' does not mention '" << word << "': " << err;
}

TEST(ParseRedisUrl, HostAndPort) {
    RedisUrl u = parse_ok("redis://127.0.0.1:6380");
    EXPECT_EQ(u.host, "127.0.0.1");
    EXPECT_EQ(u.port, 6380);
    EXPECT_EQ(u.db, 0);
    EXPECT_TRUE(u.user.empty());
    EXPECT_TRUE(u.password.empty());
    EXPECT_FALSE(u.is_unix());
    EXPECT_EQ(u.endpoint(), "127.0.0.1:6380");
}

TEST(ParseRedisUrl, PortDefaultsTo6379) {
    RedisUrl u = parse_ok("redis://cache.example.com");
    EXPECT_EQ(u.host, "cache.example.com");
    EXPECT_EQ(u.port, 6379);
    EXPECT_EQ(u.endpoint(), "cache.example.com:6379");
}

TEST(ParseRedisUrl, UserAndPassword) {
    RedisUrl u = parse_ok("redis://alice:s3cret@redis.local:7000");
    EXPECT_EQ(u.user, "alice");
    EXPECT_EQ(u.password, "s3cret");
    EXPECT_EQ(u.host, "redis.local");
    EXPECT_EQ(u.port, 7000);
}

TEST(ParseRedisUrl, PasswordOnlyLeavesUserEmpty) {
    RedisUrl u = parse_ok("redis://:pw@h:1");
    EXPECT_TRUE(u.user.empty());
    EXPECT_EQ(u.password, "pw");
    EXPECT_EQ(u.host, "h");
    EXPECT_EQ(u.port, 1);
}

TEST(ParseRedisUrl, DbFromPath) {
    RedisUrl u = parse_ok("redis://h:6379/2");
    EXPECT_EQ(u.db, 2);
    EXPECT_EQ(u.host, "h");
    EXPECT_EQ(parse_ok("redis://:pw@h:6379/15").db, 15);
    EXPECT_EQ(parse_ok("redis://h:6379/").db, 0);
}

TEST(ParseRedisUrl, UnixSocketWithDbQuery) {
    RedisUrl u = parse_ok("unix:///var/run/redis/redis.sock?db=2");
    EXPECT_TRUE(u.is_unix());
    EXPECT_EQ(u.unix_path, "/var/run/redis/redis.sock");
    EXPECT_EQ(u.db, 2);
    EXPECT_TRUE(u.host.empty());
    EXPECT_EQ(u.endpoint(), "/var/run/redis/redis.sock");
}

TEST(ParseRedisUrl, DbFromQueryAsRedisPyWritesIt) {
    RedisUrl u = parse_ok("redis://h:7961?db=4");
    EXPECT_EQ(u.host, "h");
    EXPECT_EQ(u.port, 7961);
    EXPECT_EQ(u.db, 4);
    EXPECT_EQ(parse_ok("redis://h?db=3").port, 6379);
    EXPECT_EQ(parse_ok("redis://h?db=3").db, 3);
    EXPECT_EQ(parse_ok("rediss://:p%3Fw@h:1/?db=2").db, 2);
    EXPECT_EQ(parse_ok("rediss://:p%3Fw@h:1/?db=2").password, "p?w");
    RedisUrl v6 = parse_ok("redis://[::1]:6380?db=1");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.port, 6380);
    EXPECT_EQ(v6.db, 1);
}

TEST(ParseRedisUrl, DbQueryWinsOverTheDbPath) {
    EXPECT_EQ(parse_ok("redis://h:1/2?db=5").db, 5);
    EXPECT_EQ(parse_ok("redis://h:1/2?db=0").db, 0);
}

TEST(ParseRedisUrl, RefusesAQueryOtherThanDb) {
    expect_refused("redis://h:1?foo=1", "the only query accepted is ?db=N");
    expect_refused("redis://h:1?db=", "?db=N");
    expect_refused("redis://h:1?db=-1", "?db=N");
    expect_refused("redis://h:1/2?db=x", "?db=N");
    expect_refused("redis://h:1?db=1&db=2", "?db=N");
}

TEST(ParseRedisUrl, UnixSocketWithoutDb) {
    RedisUrl u = parse_ok("unix:///tmp/r.sock");
    EXPECT_TRUE(u.is_unix());
    EXPECT_EQ(u.unix_path, "/tmp/r.sock");
    EXPECT_EQ(u.db, 0);
}

TEST(ParseRedisUrl, UnixSocketWithCredentials) {
    RedisUrl u = parse_ok("unix://bob:pw@/tmp/r.sock");
    EXPECT_EQ(u.user, "bob");
    EXPECT_EQ(u.password, "pw");
    EXPECT_EQ(u.unix_path, "/tmp/r.sock");
}

TEST(ParseRedisUrl, Ipv6LiteralInBrackets) {
    RedisUrl u = parse_ok("redis://[::1]:6380");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.port, 6380);
    RedisUrl v = parse_ok("redis://:pw@[fe80::1:2]/3");
    EXPECT_EQ(v.host, "fe80::1:2");
    EXPECT_EQ(v.port, 6379);
    EXPECT_EQ(v.password, "pw");
    EXPECT_EQ(v.db, 3);
}

TEST(ParseRedisUrl, PercentEscapesInCredentialsAreDecoded) {
    RedisUrl u = parse_ok("redis://us%40er:p%3Aw%2F%25%40@h:1");
    EXPECT_EQ(u.user, "us@er");
    EXPECT_EQ(u.password, "p:w/%@");
    EXPECT_EQ(u.host, "h");
    EXPECT_EQ(u.port, 1);
}

TEST(ParseRedisUrl, RefusesMissingHost) {
    expect_refused("redis://", "host");
    expect_refused("redis://:6379", "host");
    expect_refused("redis://:pw@:6379", "host");
    expect_refused("redis:///0", "host");
}

TEST(ParseRedisUrl, RefusesPortZero) {
    expect_refused("redis://h:0", "port");
}

TEST(ParseRedisUrl, RefusesPortAbove65535) {
    expect_refused("redis://h:70000", "port");
    expect_refused("redis://h:65536", "port");
    expect_refused("redis://h:99999999999999999999", "port");
}

TEST(ParseRedisUrl, RefusesNonNumericPort) {
    expect_refused("redis://h:abc", "port");
    expect_refused("redis://h:", "port");
    expect_refused("redis://h:-1", "port");
    expect_refused("redis://h:1junk", "port");
}

TEST(ParseRedisUrl, RefusesUnknownScheme) {
    expect_refused("http://h:6379", "http");
    expect_refused("h:6379", "redis://");
    expect_refused("", "redis://");
    expect_refused("rediss-ish://h", "rediss-ish");
}

TEST(ParseRedisUrl, RefusesBadDb) {
    expect_refused("redis://h:1/abc", "abc");
    expect_refused("redis://h:1/-1", "-1");
    expect_refused("redis://h:1/99999999999999", "99999999999999");
    expect_refused("unix:///tmp/r.sock?db=x", "db");
}

TEST(ParseRedisUrl, RefusesTrailingJunk) {
    expect_refused("redis://h:1/2junk", "junk");
    expect_refused("redis://h:1/2/3", "/3");
}

TEST(ParseRedisUrl, RefusesUnclosedIpv6Bracket) {
    expect_refused("redis://[::1:6380", "]");
}

// Found by kw_fuzz_url: "redis://[[z]" gave the host "[z", which no URL can name again.
TEST(ParseRedisUrl, RefusesBracketsAroundAnythingButAnIpv6Address) {
    expect_refused("redis://[[z]", "not an IPv6 address");
    expect_refused("redis://[localhost]:6379", "not an IPv6 address");
    expect_refused("redis://a]b:6379", "a host cannot have");
    expect_refused("redis://a[b", "a host cannot have");
    EXPECT_EQ(parse_ok("redis://[fe80::1%25eth0]:7000").host, "fe80::1%25eth0");
}

TEST(ParseRedisUrl, RefusesUnixUrlWithoutPath) {
    expect_refused("unix://", "path");
    expect_refused("unix://relative.sock", "path");
}

TEST(ParseRedisUrl, RefusesBadPercentEscape) {
    expect_refused("redis://u:%zz@h:1", "%");
    expect_refused("redis://u:abc%4@h:1", "%");
}

TEST(ParseRedisUrl, ErrorShowsTheAcceptedForms) {
    RedisUrl u;
    std::string err;
    ASSERT_FALSE(parse_redis_url("http://h", &u, &err));
    EXPECT_NE(err.find("redis://"), std::string::npos) << err;
    EXPECT_NE(err.find("unix://"), std::string::npos) << err;
}

// redis+sentinel://: the sentinels (port 26379 unless given), the master's name and db, the
// master's credentials; the commas are the sentinels', never seeds.
TEST(ParseRedisUrl, SentinelUrlListsTheSentinelsAndTheMastersName) {
    RedisUrl u = parse_ok("redis+sentinel://alice:pw@h1:26380,h2,[::1]:26381/mymaster/3");
    ASSERT_EQ(u.sentinels.size(), 3u);
    EXPECT_EQ(u.sentinels[0].str(), "h1:26380");
    EXPECT_EQ(u.sentinels[1].str(), "h2:26379");
    EXPECT_EQ(u.sentinels[2].str(), "[::1]:26381");
    EXPECT_EQ(u.master_name, "mymaster");
    EXPECT_EQ(u.db, 3);
    EXPECT_EQ(u.user, "alice");
    EXPECT_EQ(u.password, "pw");
    EXPECT_FALSE(u.tls);
    EXPECT_TRUE(u.is_sentinel());
    EXPECT_TRUE(parse_ok("rediss+sentinel://h1/m").tls);
    EXPECT_EQ(parse_ok("redis+sentinel://h1:1/m").db, 0);
}

// A sentinel is reached with the sentinel.* credentials and TLS, never the master's, db 0.
TEST(ParseRedisUrl, SentinelIsReachedWithItsOwnCredentials) {
    RedisUrl u = parse_ok("redis+sentinel://alice:pw@h1:1,h2:2/m/4");
    u.sentinel.username = "sen";
    u.sentinel.password = "tinel";
    u.sentinel.tls = true;
    RedisUrl at = u.sentinel_at(1);
    EXPECT_EQ(at.endpoint(), "h2:2");
    EXPECT_EQ(at.user, "sen");
    EXPECT_EQ(at.password, "tinel");
    EXPECT_TRUE(at.tls);
    EXPECT_EQ(at.db, 0);
    EXPECT_FALSE(at.is_sentinel());
    // The master found keeps the URL's own.
    RedisUrl master = u.at(Endpoint{"10.0.0.5", 6390, ""});
    EXPECT_EQ(master.password, "pw");
    EXPECT_EQ(master.db, 4);
}

TEST(ParseRedisUrl, SentinelUrlMistakesAreNamed) {
    expect_refused("redis+sentinel://h1:1,h2:2", "master's name");
    expect_refused("redis+sentinel://h1:1,h2:2/", "master's name");
    expect_refused("redis+sentinel://h1:1,,h2:2/m", "empty sentinel");
    expect_refused("redis+sentinel://h1:1,h2:x/m", "sentinel 'h2:x'");
    expect_refused("redis+sentinel://h1:1/m/x", "database 'x'");
    expect_refused("redis+sentinel://h1:1/m?db=2", "no query");
    expect_refused("redis+sentinel:///m", "no sentinel address");
    expect_refused("redis+sentinel://h1", "MASTERNAME");  // names the form, too
}

// Several seeds are split at their commas; a sentinel URL never is.
TEST(SplitUrlList, SentinelUrlIsOneUrl) {
    EXPECT_EQ(split_url_list("redis://a:1,redis://b:2"),
              (std::vector<std::string>{"redis://a:1", "redis://b:2"}));
    EXPECT_EQ(split_url_list("redis+sentinel://h1:1,h2:2/m"),
              (std::vector<std::string>{"redis+sentinel://h1:1,h2:2/m"}));
    EXPECT_EQ(split_url_list("redis://a"), (std::vector<std::string>{"redis://a"}));
}

}  // namespace
}  // namespace keywatch
