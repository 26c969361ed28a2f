// Endpoint: the one parser and spelling of host:port (IPv6 in brackets).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/redis/endpoint.h"

namespace keywatch {
namespace {

using Form = Endpoint::Form;

Endpoint parse_ok(const std::string &text, Form form = Form::Strict) {
    std::string why;
    auto e = Endpoint::parse(text, form, &why);
    EXPECT_TRUE(e) << text << ": " << why;
    return e ? *e : Endpoint{};
}

// Refused in `form`, with a reason that contains `words`.
void expect_refused(const std::string &text, Form form, const std::string &words) {
    std::string why;
    EXPECT_FALSE(Endpoint::parse(text, form, &why)) << "accepted: " << text;
    EXPECT_NE(why.find(words), std::string::npos) << text << ": " << why;
}

TEST(Endpoint, ParsesHostAndPort) {
    Endpoint e = parse_ok("127.0.0.1:6379");
    EXPECT_EQ(e.host, "127.0.0.1");
    EXPECT_EQ(e.port, 6379);
    EXPECT_FALSE(e.is_unix());
    EXPECT_EQ(e.str(), "127.0.0.1:6379");
    EXPECT_EQ(parse_ok("redis-1.example:7000").host, "redis-1.example");
    EXPECT_EQ(parse_ok("0.0.0.0:0").port, 0);  // a listen address: any free port
}

TEST(Endpoint, Ipv6IsBracketedInBothDirections) {
    Endpoint e = parse_ok("[::1]:7001");
    EXPECT_EQ(e.host, "::1");
    EXPECT_EQ(e.port, 7001);
    EXPECT_EQ(e.str(), "[::1]:7001");
    EXPECT_EQ((Endpoint{"fd00::2", 6379, ""}.str()), "[fd00::2]:6379");
}

TEST(Endpoint, RedisFormAlsoReadsTheUnbracketedV6RedisPrints) {
    // MOVED 3999 ::1:7001 and CLUSTER NODES's "::1:7001@17001" (after the '@').
    Endpoint e = parse_ok("::1:7001", Form::Redis);
    EXPECT_EQ(e.host, "::1");
    EXPECT_EQ(e.port, 7001);
    EXPECT_EQ(e, parse_ok("[::1]:7001", Form::Redis));
    EXPECT_EQ(e.str(), "[::1]:7001");
    expect_refused("::1:7001", Form::Strict, "an IPv6 address needs brackets");
}

TEST(Endpoint, RefusalsSayWhatIsWrongAndHowToWriteIt) {
    expect_refused("127.0.0.1", Form::Strict, "no port: write host:port");
    expect_refused(":9464", Form::Strict, "no host");
    expect_refused("[::1]", Form::Strict, "an IPv6 address is written [address]:port");
    expect_refused("[::1:9464", Form::Strict, "an IPv6 address is written [address]:port");
    expect_refused("[localhost]:9464", Form::Strict, "brackets hold only an IPv6 address");
    expect_refused("[]:9464", Form::Redis, "brackets hold only an IPv6 address");
    for (const char *bad : {"h:", "h:x", "h:65536", "h:-1", "h:123456", "h:99999"})
        expect_refused(bad, Form::Redis, "the port is not a number from 0 to 65535");
    expect_refused("a b:1", Form::Strict, "a character a host cannot have");
    EXPECT_FALSE(Endpoint::parse("nope", Form::Strict));  // no *why: only the answer
}

TEST(Endpoint, ComparesByValueAndOrdersForMaps) {
    EXPECT_EQ(parse_ok("h:1"), (Endpoint{"h", 1, ""}));
    EXPECT_NE(parse_ok("h:1"), parse_ok("h:2"));
    EXPECT_NE(parse_ok("h:1"), parse_ok("g:1"));
    EXPECT_LT(parse_ok("a:9"), parse_ok("b:1"));
    EXPECT_LT(parse_ok("a:1"), parse_ok("a:2"));
    std::map<Endpoint, int> m;
    m[parse_ok("[::1]:7000")] = 1;
    m[parse_ok("::1:7000", Form::Redis)] = 2;  // the same node
    EXPECT_EQ(m.size(), 1u);
    EXPECT_EQ(m.begin()->second, 2);
}

TEST(Endpoint, SocketIsItsPath) {
    Endpoint e;
    e.unix_path = "/run/redis.sock";
    EXPECT_TRUE(e.is_unix());
    EXPECT_EQ(e.str(), "/run/redis.sock");
}

}  // namespace
}  // namespace keywatch
