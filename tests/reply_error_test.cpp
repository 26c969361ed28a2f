// classify(): every error reply keywatch acts on maps to its kind, by its whole first word.
#include <gtest/gtest.h>

#include <string>

#include "core/redis/reply_error.h"

namespace keywatch {
namespace {

// An error reply over `text` (which must outlive it).
redisReply error_reply(std::string &text) {
    redisReply r{};
    r.type = REDIS_REPLY_ERROR;
    r.str = text.data();
    r.len = text.size();
    return r;
}

ReplyError kind_of(std::string text) {
    redisReply r = error_reply(text);
    return classify(&r);
}

TEST(ReplyError, EachErrorKeywatchActsOnHasItsKind) {
    EXPECT_EQ(kind_of("MOVED 3999 127.0.0.1:6381"), ReplyError::Moved);
    EXPECT_EQ(kind_of("ASK 3999 127.0.0.1:6381"), ReplyError::Ask);
    EXPECT_EQ(kind_of("TRYAGAIN Multiple keys request during rehashing of slot"),
              ReplyError::TryAgain);
    EXPECT_EQ(kind_of("CLUSTERDOWN The cluster is down"), ReplyError::ClusterDown);
    EXPECT_EQ(kind_of("NOSCRIPT No matching script. Please use EVAL."), ReplyError::NoScript);
    EXPECT_EQ(kind_of("LOADING Redis is loading the dataset in memory"), ReplyError::Loading);
    EXPECT_EQ(kind_of("BUSY Redis is busy running a script."), ReplyError::Busy);
    EXPECT_EQ(kind_of("MASTERDOWN Link with MASTER is down"), ReplyError::Busy);
    EXPECT_EQ(kind_of("NOAUTH Authentication required."), ReplyError::Auth);
    EXPECT_EQ(kind_of("WRONGPASS invalid username-password pair"), ReplyError::Auth);
    EXPECT_EQ(kind_of("NOPERM this user has no permissions to run the 'eval' command"),
              ReplyError::NoPerm);
    EXPECT_EQ(kind_of("READONLY You can't write against a read only replica."),
              ReplyError::ReadOnly);
    EXPECT_EQ(kind_of("ERR unknown command"), ReplyError::Other);
}

TEST(ReplyError, TheWholeFirstWordCounts) {
    EXPECT_EQ(kind_of("ASKING is not an error"), ReplyError::Other);
    EXPECT_EQ(kind_of("BUSYKEY Target key name already exists."), ReplyError::Other);
    EXPECT_EQ(kind_of("MOVEDX 1 h:1"), ReplyError::Other);
    EXPECT_EQ(kind_of("MOVED"), ReplyError::Moved);
    EXPECT_EQ(kind_of(""), ReplyError::Other);
}

TEST(ReplyError, OnlyErrorRepliesAreErrors) {
    std::string text = "MOVED 1 h:1";
    redisReply status{};
    status.type = REDIS_REPLY_STATUS;
    status.str = text.data();
    status.len = text.size();
    EXPECT_EQ(classify(&status), ReplyError::None);
    EXPECT_EQ(classify(nullptr), ReplyError::None);
}

TEST(ReplyError, RetryCanFixOnlyTransientKinds) {
    for (ReplyError e :
         {ReplyError::TryAgain, ReplyError::ClusterDown, ReplyError::Loading, ReplyError::Busy})
        EXPECT_TRUE(is_transient(e)) << reply_error_name(e);
    for (ReplyError e : {ReplyError::Moved, ReplyError::Ask, ReplyError::NoScript, ReplyError::Auth,
                         ReplyError::NoPerm, ReplyError::Other})
        EXPECT_FALSE(is_transient(e)) << reply_error_name(e);
}

TEST(ReplyError, AWholeClusterDownIsToldFromOneSlotWithoutAMaster) {
    auto whole = [](std::string text) {
        redisReply r = error_reply(text);
        return whole_cluster_down(&r);
    };
    EXPECT_TRUE(whole("CLUSTERDOWN The cluster is down"));
    EXPECT_TRUE(whole("CLUSTERDOWN The cluster is down and only accepts read commands"));
    EXPECT_FALSE(whole("CLUSTERDOWN Hash slot not served"));
    EXPECT_FALSE(whole("CLUSTERDOWN"));
    EXPECT_FALSE(whole("LOADING Redis is loading the dataset in memory"));
    EXPECT_FALSE(whole_cluster_down(nullptr));
}

TEST(ReplyError, RedirectTargetIsTheNodeNamedLast) {
    std::string moved = "MOVED 3999 127.0.0.1:6381", ask = "ASK 12 [::1]:7000", other = "ERR 1 h:1";
    redisReply m = error_reply(moved), a = error_reply(ask), o = error_reply(other);
    EXPECT_EQ(redirect_target(&m), "127.0.0.1:6381");
    EXPECT_EQ(redirect_target(&a), "[::1]:7000");
    EXPECT_EQ(redirect_target(&o), "");
    // Redis prints an IPv6 node unbracketed: it is named as CLUSTER SHARDS's node is.
    std::string v6 = "MOVED 3999 ::1:7001";
    redisReply r6 = error_reply(v6);
    EXPECT_EQ(redirect_target(&r6), "[::1]:7001");
}

}  // namespace
}  // namespace keywatch
