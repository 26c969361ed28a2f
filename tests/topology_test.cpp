// Parsing of CLUSTER SHARDS and CLUSTER SLOTS replies, built by hand as hiredis would
// deliver them in RESP2 (maps as flat arrays). No Redis.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/redis/topology.h"
#include "core/redis/url.h"

namespace {

using namespace keywatch;

// Owns a tree of redisReply built for a test.
class Reply {
  public:
    static Reply str(const std::string &s) {
        Reply r;
        r.r_->type = REDIS_REPLY_STRING;
        r.text_ = std::make_shared<std::string>(s);
        r.r_->str = const_cast<char *>(r.text_->data());
        r.r_->len = s.size();
        return r;
    }
    static Reply num(long long n) {
        Reply r;
        r.r_->type = REDIS_REPLY_INTEGER;
        r.r_->integer = n;
        return r;
    }
    static Reply arr(std::vector<Reply> items) {
        Reply r;
        r.r_->type = REDIS_REPLY_ARRAY;
        r.items_ = std::move(items);
        r.ptrs_ = std::make_shared<std::vector<redisReply *>>();
        for (auto &i : r.items_) r.ptrs_->push_back(i.get());
        r.r_->elements = r.ptrs_->size();
        r.r_->element = r.ptrs_->data();
        return r;
    }
    redisReply *get() const { return r_.get(); }

  private:
    Reply() : r_(std::make_shared<redisReply>()) { *r_ = redisReply{}; }
    std::shared_ptr<redisReply> r_;
    std::shared_ptr<std::string> text_;
    std::vector<Reply> items_;
    std::shared_ptr<std::vector<redisReply *>> ptrs_;
};

Reply node(const std::string &ip, int port, const std::string &role, const std::string &health) {
    return Reply::arr({Reply::str("id"), Reply::str("id-" + std::to_string(port)),
                       Reply::str("port"), Reply::num(port), Reply::str("ip"), Reply::str(ip),
                       Reply::str("endpoint"), Reply::str(ip), Reply::str("role"), Reply::str(role),
                       Reply::str("replication-offset"), Reply::num(0), Reply::str("health"),
                       Reply::str(health)});
}

Reply shard(std::vector<long long> ranges, std::vector<Reply> nodes) {
    std::vector<Reply> slots;
    for (long long v : ranges) slots.push_back(Reply::num(v));
    return Reply::arr({Reply::str("slots"), Reply::arr(slots), Reply::str("nodes"),
                       Reply::arr(std::move(nodes))});
}

// A node as CLUSTER SHARDS lists it with its own ports: plain (`port`) and TLS (`tls-port`),
// 0 for one it does not have (Redis then leaves the field out); `hostname` if announced.
Reply node_with_ports(int port, int tls_port, const std::string &hostname = "") {
    std::vector<Reply> f = {Reply::str("id"), Reply::str("id-" + std::to_string(port + tls_port))};
    if (port) f.insert(f.end(), {Reply::str("port"), Reply::num(port)});
    if (tls_port) f.insert(f.end(), {Reply::str("tls-port"), Reply::num(tls_port)});
    f.insert(f.end(), {Reply::str("ip"), Reply::str("127.0.0.1")});
    if (!hostname.empty()) f.insert(f.end(), {Reply::str("hostname"), Reply::str(hostname)});
    f.insert(f.end(), {Reply::str("role"), Reply::str("master"), Reply::str("health"),
                       Reply::str("online")});
    return Reply::arr(std::move(f));
}

// With both ports open (tls-cluster yes), a rediss:// seed reaches every node at its
// tls-port and a redis:// seed at its plain port (before: the plain port for both).
TEST(ParseClusterShards, TheSeedsSchemeChoosesThePort) {
    Reply r = Reply::arr({shard({0, 8191}, {node_with_ports(7000, 8000)}),
                          shard({8192, 16383}, {node_with_ports(7001, 8001)})});
    Topology plain, tls;
    std::string err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "seed", &plain, &err, false)) << err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "seed", &tls, &err, true)) << err;
    EXPECT_EQ(plain.master_for_slot(0)->port, 7000);
    EXPECT_EQ(plain.master_for_slot(9000)->port, 7001);
    EXPECT_EQ(tls.master_for_slot(0)->port, 8000);
    EXPECT_EQ(tls.master_for_slot(9000)->port, 8001);
}

// A node with only the other kind of port is refused, naming it and what to do: over TLS
// a node without tls-port (tls-cluster no hides the others' TLS ports), over plain TCP a
// node with only a TLS port (port 0).
TEST(ParseClusterShards, ANodeWithOnlyTheOtherKindOfPortIsRefusedByName) {
    Reply plain_only = Reply::arr({shard({0, 8191}, {node_with_ports(7000, 8000)}),
                                   shard({8192, 16383}, {node_with_ports(7001, 0)})});
    Topology t;
    std::string err;
    EXPECT_FALSE(parse_cluster_shards(plain_only.get(), "seed", &t, &err, true));
    EXPECT_NE(err.find("cluster node 127.0.0.1:7001 (id-7001) lists no tls-port"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("tls-cluster yes"), std::string::npos) << err;
    Reply tls_only = Reply::arr({shard({0, 16383}, {node_with_ports(0, 8000)})});
    err.clear();
    EXPECT_FALSE(parse_cluster_shards(tls_only.get(), "seed", &t, &err, false));
    EXPECT_NE(err.find("cluster node 127.0.0.1:8000 (id-8000) has only a TLS port"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("use rediss://"), std::string::npos) << err;
    ASSERT_TRUE(parse_cluster_shards(tls_only.get(), "seed", &t, &err, true)) << err;
    EXPECT_EQ(t.master_for_slot(0)->port, 8000);
}

// Over TLS a node is verified (and named in SNI) by the hostname the cluster announces for
// it; without one, by its address; tls.server_name, when set, wins for every node.
TEST(Topology, ANodesTlsNameIsItsAnnouncedHostname) {
    Reply r = Reply::arr({shard({0, 8191}, {node_with_ports(0, 8000, "node-a.example")}),
                          shard({8192, 16383}, {node_with_ports(0, 8001)})});
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "seed", &t, &err, true)) << err;
    RedisUrl seed;
    ASSERT_TRUE(parse_redis_url("rediss://127.0.0.1:8001", &seed, &err)) << err;
    EXPECT_EQ(t.url_of(seed, {"127.0.0.1", 8000, ""}).tls_options.server_name, "node-a.example");
    EXPECT_EQ(t.url_of(seed, {"127.0.0.1", 8001, ""}).tls_options.server_name, "");
    EXPECT_EQ(t.url_of(seed, {"127.0.0.1", 8000, ""}).endpoint(), "127.0.0.1:8000");
    seed.tls_options.server_name = "redis.example";
    EXPECT_EQ(t.url_of(seed, {"127.0.0.1", 8000, ""}).tls_options.server_name, "redis.example");
}

TEST(Topology, Ipv6MasterIsNamedInBrackets) {
    // The same name RedisUrl gives it: Fanout and Client key their nodes by it.
    EXPECT_EQ((ClusterNode{"::1", 7000, "", ""}.endpoint()), "[::1]:7000");
    EXPECT_EQ((ClusterNode{"10.0.0.1", 7000, "", ""}.endpoint()), "10.0.0.1:7000");
}

TEST(ParseClusterShards, MapsEverySlotToItsMaster) {
    Reply r = Reply::arr({
        shard({0, 5460}, {node("127.0.0.1", 7000, "master", "online"),
                          node("127.0.0.1", 7003, "replica", "online")}),
        shard({5461, 10922}, {node("127.0.0.1", 7001, "master", "online")}),
        shard({10923, 16000, 16001, 16383}, {node("127.0.0.1", 7002, "master", "online")}),
    });
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "seed", &t, &err)) << err;
    EXPECT_EQ(t.masters.size(), 3u);
    EXPECT_EQ(t.uncovered(), 0u);
    EXPECT_EQ(t.master_for_slot(0)->endpoint(), "127.0.0.1:7000");
    EXPECT_EQ(t.master_for_slot(5461)->endpoint(), "127.0.0.1:7001");
    EXPECT_EQ(t.master_for_slot(16383)->endpoint(), "127.0.0.1:7002");
}

TEST(ParseClusterShards, AFailedMasterLeavesItsSlotsUncovered) {
    Reply r = Reply::arr({
        shard({0, 8191}, {node("127.0.0.1", 7000, "master", "failed")}),
        shard({8192, 16383}, {node("", 7001, "master", "online")}),
        shard({}, {node("127.0.0.1", 7005, "master", "online")}),  // no slots: ignored
    });
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "10.0.0.9", &t, &err)) << err;
    EXPECT_EQ(t.masters.size(), 1u);
    EXPECT_EQ(t.uncovered(), 8192u);
    EXPECT_EQ(t.master_for_slot(0), nullptr);
    EXPECT_EQ(t.master_for_slot(9000)->host, "10.0.0.9") << "an empty ip means the seed's host";
}

TEST(ParseClusterShards, APromotedReplicaWinsOverItsFailedOldMaster) {
    Reply r = Reply::arr({
        shard({0, 16383}, {node("127.0.0.1", 7003, "master", "online"),
                           node("127.0.0.1", 7000, "master", "failed")}),
    });
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_shards(r.get(), "seed", &t, &err)) << err;
    ASSERT_EQ(t.masters.size(), 1u);
    EXPECT_EQ(t.master_for_slot(0)->port, 7003);
}

TEST(ParseClusterShards, RefusesABadShape) {
    Reply r = Reply::arr({Reply::arr({Reply::str("slots"), Reply::num(3)})});
    Topology t;
    std::string err;
    EXPECT_FALSE(parse_cluster_shards(r.get(), "seed", &t, &err));
    EXPECT_FALSE(err.empty());
    Reply bad_range = Reply::arr({shard({10, 5}, {node("h", 1, "master", "online")})});
    EXPECT_FALSE(parse_cluster_shards(bad_range.get(), "seed", &t, &err));
    EXPECT_NE(err.find("slot range"), std::string::npos) << err;
}

// Found by kw_fuzz_resp: a port outside 1..65535 was taken as given (and truncated to int).
TEST(ParseClusterShards, RefusesANodeWithAPortNoNodeCanHave) {
    for (long long port : {0LL, 65536LL, 4294967296LL + 7000}) {
        Reply r = Reply::arr({shard({0, 16383}, {node("127.0.0.1", 7000, "master", "online")})});
        // Rewrite the port field (index 3 of the node's flat map).
        r.get()->element[0]->element[3]->element[0]->element[3]->integer = port;
        Topology t;
        std::string err;
        EXPECT_FALSE(parse_cluster_shards(r.get(), "seed", &t, &err)) << port;
        EXPECT_NE(err.find("not a port from 1 to 65535"), std::string::npos) << err;
    }
}

// Found by kw_fuzz_resp: a master whose every slot a later entry took over stayed listed,
// though the topology lists only masters that serve a slot.
TEST(ParseClusterSlots, AMasterLeftWithoutSlotsIsNotListed) {
    auto entry = [](long long lo, long long hi, int port) {
        return Reply::arr({Reply::num(lo), Reply::num(hi),
                           Reply::arr({Reply::str("127.0.0.1"), Reply::num(port)})});
    };
    Reply r = Reply::arr({entry(0, 100, 7000), entry(0, 16383, 7001)});
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_slots(r.get(), "seed", &t, &err)) << err;
    ASSERT_EQ(t.masters.size(), 1u);
    EXPECT_EQ(t.master_for_slot(0)->port, 7001);
    EXPECT_EQ(t.master_for_slot(16383)->port, 7001);
}

TEST(ParseClusterSlots, ReadsRangesAndMasters) {
    auto entry = [](long long lo, long long hi, const std::string &ip, int port) {
        return Reply::arr({Reply::num(lo), Reply::num(hi),
                           Reply::arr({Reply::str(ip), Reply::num(port), Reply::str("id")}),
                           Reply::arr({Reply::str(ip), Reply::num(port + 3), Reply::str("r")})});
    };
    Reply r = Reply::arr({entry(0, 100, "127.0.0.1", 7000), entry(101, 16383, "?", 7001)});
    Topology t;
    std::string err;
    ASSERT_TRUE(parse_cluster_slots(r.get(), "seed-host", &t, &err)) << err;
    EXPECT_EQ(t.masters.size(), 2u);
    EXPECT_EQ(t.master_for_slot(100)->port, 7000);
    EXPECT_EQ(t.master_for_slot(101)->host, "seed-host");
}

}  // namespace
