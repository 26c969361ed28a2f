// The connection layer (core/redis/redis_conn.h, core/redis/blocking_redis.h) against real
// servers: the error replies Redis really sends map to their kinds (classify) and to the
// right status, pub/sub pushes and command replies share a subscribed connection without
// mixing, and a callback may close its own connection.
#include <event2/event.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/redis/blocking_redis.h"
#include "core/redis/event_loop.h"
#include "core/redis/redis_conn.h"
#include "core/redis/url.h"
#include "redis_fixture.h"

namespace kwtest {
namespace {

using keywatch::BlockingRedis;
using keywatch::classify;
using keywatch::RedisConn;
using keywatch::RedisUrl;
using keywatch::ReplyError;
using keywatch::ReplyPtr;

RedisUrl url_of(const std::string &text) {
    RedisUrl u;
    std::string err;
    if (!keywatch::parse_redis_url(text, &u, &err)) throw std::runtime_error(err);
    return u;
}

class ConnLayer : public RedisTest {
  protected:
    // A connected BlockingRedis to the test server (URL text: redis().url() by default).
    std::unique_ptr<BlockingRedis> connect(const std::string &url = "",
                                           event_base *base = nullptr) {
        auto c = std::make_unique<BlockingRedis>(url_of(url.empty() ? redis().url() : url), "test",
                                                 true, base);
        int rc = c->connect(5000);
        if (rc != KW_OK) ADD_FAILURE() << "status " << rc << ": " << c->error();
        return c;
    }
    ReplyError kind(BlockingRedis &c, const std::vector<std::string> &args) {
        ReplyPtr r = c.command(args, 5000);
        if (!r) ADD_FAILURE() << "no reply to " << args[0] << ": " << c.error();
        return classify(r.get());
    }
};

TEST_F(ConnLayer, RealErrorRepliesMapToTheirKinds) {
    auto c = connect();
    EXPECT_EQ(kind(*c, {"SET", "k", "v"}), ReplyError::None);
    EXPECT_EQ(kind(*c, {"EVALSHA", "0123456789012345678901234567890123456789", "0"}),
              ReplyError::NoScript);
    EXPECT_EQ(kind(*c, {"GET"}), ReplyError::Other);
    EXPECT_EQ(kind(*c, {"CLUSTER", "SHARDS"}), ReplyError::Other);  // not a cluster node
    // An ACL user without GET: NOPERM.
    auto admin = client();
    ASSERT_EQ(admin->command({"ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "-get"}),
              "OK");
    auto limited = connect("redis://limited:pw@127.0.0.1:" + std::to_string(redis().port()));
    EXPECT_EQ(kind(*limited, {"GET", "k"}), ReplyError::NoPerm);
    EXPECT_EQ(kind(*limited, {"SET", "k", "w"}), ReplyError::None);
}

TEST_F(ConnLayer, BusyScriptIsTransientAndReadonlyReplicaIsNot) {
    auto admin = client();
    ASSERT_EQ(admin->command({"CONFIG", "SET", "busy-reply-threshold", "50"}), "OK");
    // Two connections on one event_base: waiting on one also sends the other's EVAL.
    std::unique_ptr<event_base, void (*)(event_base *)> base(event_base_new(), &event_base_free);
    auto runner = connect("", base.get());
    auto c = connect("", base.get());
    ASSERT_TRUE(runner->send({"EVAL", "while true do end", "0"}));
    // A GET may be served before the script starts: ask until the server is busy.
    ReplyError k = ReplyError::None;
    ASSERT_TRUE(wait_until([&] {
        k = kind(*c, {"GET", "k"});
        return k == ReplyError::Busy;
    })) << keywatch::reply_error_name(k);
    EXPECT_TRUE(keywatch::is_transient(k));
    EXPECT_EQ(kind(*c, {"SCRIPT", "KILL"}), ReplyError::None);
    ReplyPtr killed = runner->receive(5000);
    ASSERT_TRUE(killed) << runner->error();
    EXPECT_EQ(killed->type, REDIS_REPLY_ERROR) << keywatch::reply_to_string(killed.get());
    runner.reset();
    c.reset();

    // A replica refuses writes: READONLY, not transient.
    keywatch::RedisProcess::Options o;
    o.extra = {"--replicaof", "127.0.0.1", std::to_string(redis().port())};
    keywatch::RedisProcess replica(o);
    replica.start();
    auto r = connect(replica.url());
    ReplyError w = kind(*r, {"SET", "k", "v"});
    EXPECT_EQ(w, ReplyError::ReadOnly) << keywatch::reply_error_name(w);
    EXPECT_FALSE(keywatch::is_transient(w));
}

// A server with a password: the handshake's refusals and a connection without AUTH.
class ConnLayerAuth : public ConnLayer {
  protected:
    keywatch::RedisProcess::Options options() override {
        keywatch::RedisProcess::Options o;
        o.password = "s3cret";
        return o;
    }
};

TEST_F(ConnLayerAuth, HandshakeRefusalsAndNoauthHaveTheirStatus) {
    const std::string at = "127.0.0.1:" + std::to_string(redis().port());
    BlockingRedis wrong(url_of("redis://:nope@" + at), "test", true);
    EXPECT_EQ(wrong.connect(5000), KW_ERR_AUTH) << wrong.error();
    EXPECT_TRUE(contains(wrong.error(), at)) << wrong.error();

    BlockingRedis none(url_of("redis://" + at), "test", true);
    ASSERT_EQ(none.connect(5000), KW_OK) << none.error();  // nothing to send yet
    EXPECT_EQ(kind(none, {"GET", "k"}), ReplyError::Auth);

    BlockingRedis db(url_of("redis://:s3cret@" + at + "/99"), "test", true);
    EXPECT_EQ(db.connect(5000), KW_ERR_REDIS) << db.error();
    EXPECT_TRUE(contains(db.error(), "SELECT 99")) << db.error();

    BlockingRedis right(url_of("redis://:s3cret@" + at + "/3"), "test", true);
    ASSERT_EQ(right.connect(5000), KW_OK) << right.error();
    ReplyPtr r = right.command({"CLIENT", "INFO"}, 5000);
    ASSERT_TRUE(r);
    EXPECT_TRUE(contains(std::string(r->str, r->len), " db=3 ")) << r->str;
}

// On the loop: a subscribed connection hands messages and confirmations to the push
// handler and a PING's reply to the PING's callback (hiredis 0.14 lost it), in order.
TEST_F(ConnLayer, SubscribedConnectionKeepsPushesAndRepliesApart) {
    keywatch::EventLoop loop;
    loop.start();
    std::mutex mu;
    std::vector<std::string> pushes, replies;
    std::atomic<bool> ready{false};
    std::unique_ptr<RedisConn> conn;
    ASSERT_TRUE(loop.run_sync([&] {
        conn = std::make_unique<RedisConn>(loop.base(), url_of(redis().url()), "subscriber");
        conn->set_push_handler([&](redisReply *r) {
            std::lock_guard<std::mutex> lock(mu);
            pushes.push_back(keywatch::reply_to_string(r));
        });
        conn->connect(
            5000,
            [&] {
                conn->subscribe({"SUBSCRIBE", "ch1", "ch2"});
                conn->command({"PING"}, [&](redisReply *r) {
                    std::lock_guard<std::mutex> lock(mu);
                    replies.push_back(keywatch::reply_to_string(r));
                    ready = true;
                });
            },
            [&](const RedisConn::Failure &f) { ADD_FAILURE() << f.message; });
    }));
    ASSERT_TRUE(wait_until([&] { return ready.load(); }));
    auto pub = client();
    EXPECT_EQ(pub->command({"PUBLISH", "ch2", "hello"}), "1");
    ASSERT_TRUE(wait_until([&] {
        std::lock_guard<std::mutex> lock(mu);
        return pushes.size() == 3;
    }));
    loop.run_sync([&] { conn.reset(); });
    loop.stop();
    EXPECT_EQ(replies, std::vector<std::string>({"[pong, ]"}));
    EXPECT_EQ(pushes, std::vector<std::string>(
                          {"[subscribe, ch1, 1]", "[subscribe, ch2, 2]", "[message, ch2, hello]"}));
}

// A reply callback may destroy its own connection; the replies after it are dropped.
TEST_F(ConnLayer, CallbackMayDestroyItsConnection) {
    keywatch::EventLoop loop;
    loop.start();
    std::atomic<int> calls{0};
    std::atomic<bool> done{false};
    std::unique_ptr<RedisConn> conn;
    loop.run_sync([&] {
        conn = std::make_unique<RedisConn>(loop.base(), url_of(redis().url()), "command");
        conn->connect(
            5000,
            [&] {
                for (int i = 0; i < 3; i++)
                    conn->command({"PING"}, [&](redisReply *) {
                        calls++;
                        conn.reset();
                        done = true;
                    });
            },
            [&](const RedisConn::Failure &f) { ADD_FAILURE() << f.message; });
    });
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    loop.stop();
    EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace kwtest
