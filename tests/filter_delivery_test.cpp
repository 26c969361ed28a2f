// Handler filters end to end: events list, key prefix (text and binary), glob, db, and
// events from several dbs carrying their db number.
//
// To prove that an event was *not* delivered, each test writes the filtered-out events
// first and a matching marker last, with one worker: the dispatch queue is FIFO, so once
// the marker has been handled every earlier event has been too.
#include <string>
#include <vector>

#include "redis_fixture.h"

namespace kwtest {
namespace {

using namespace std::string_literals;

class FilterDelivery : public RedisTest {
  protected:
    // Keys (with their db) the sink received, in order.
    static std::vector<std::pair<int, std::string>> keys_of(const EventSink &sink) {
        std::vector<std::pair<int, std::string>> out;
        for (const auto &e : sink.events()) out.emplace_back(e.db, e.key);
        return out;
    }
    static std::vector<std::string> names_and_keys(const EventSink &sink) {
        std::vector<std::string> out;
        for (const auto &e : sink.events()) out.push_back(e.name + " " + e.key);
        return out;
    }
};

TEST_F(FilterDelivery, EventsFilterSelectsOnlyListedEvents) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "expire,del"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "k", "v"}), "OK");      // set: filtered out
    ASSERT_EQ(c->command({"EXPIRE", "k", "100"}), "1");  // expire
    ASSERT_EQ(c->command({"PERSIST", "k"}), "1");        // persist: filtered out
    ASSERT_EQ(c->command({"RENAME", "k", "k2"}), "OK");  // rename_*: filtered out
    ASSERT_EQ(c->command({"DEL", "k2"}), "1");           // del
    ASSERT_TRUE(sink.wait_for("del", "k2")) << sink.describe();
    EXPECT_EQ(names_and_keys(sink), (std::vector<std::string>{"expire k", "del k2"}));
}

TEST_F(FilterDelivery, PrefixFilterSelectsKeysStartingWithIt) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}, {"prefix", "user:"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (const char *k : {"user:1", "users:1", "xuser:1", "user", "User:1", "user:2"})
        ASSERT_EQ(c->command({"SET", k, "v"}), "OK");
    ASSERT_TRUE(sink.wait_for("set", "user:2")) << sink.describe();
    EXPECT_EQ(keys_of(sink),
              (std::vector<std::pair<int, std::string>>{{0, "user:1"}, {0, "user:2"}}));
}

TEST_F(FilterDelivery, BinaryPrefixFilterMatchesNulBytes) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    kw_filter_t *f = kw_filter_new();
    ASSERT_NE(f, nullptr);
    char err[256] = "";
    ASSERT_EQ(kw_filter_set(f, "events", "set", err, sizeof err), KW_OK) << err;
    const std::string prefix = "bin\0"s;
    ASSERT_EQ(kw_filter_set_bytes(f, "prefix", prefix.data(), prefix.size(), err, sizeof err),
              KW_OK)
        << err;
    int rc = kw_engine_add_handler(engine.get(), f, &EventSink::handler, &sink, nullptr);
    kw_filter_free(f);
    ASSERT_EQ(rc, KW_OK);
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (const auto &k : {"bin\0x"s, "bin"s, "binx"s, "bi\0n"s, "bin\0"s})
        ASSERT_EQ(c->command({"SET", k, "v"}), "OK");
    ASSERT_TRUE(sink.wait_for("set", "bin\0"s)) << sink.describe();
    EXPECT_EQ(keys_of(sink),
              (std::vector<std::pair<int, std::string>>{{0, "bin\0x"s}, {0, "bin\0"s}}));
}

TEST_F(FilterDelivery, GlobFilterSelectsMatchingKeys) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}, {"glob", "order:[0-9]*:paid"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (const char *k : {"order:1:paid", "order:1:open", "order:x:paid", "invoice:1:paid",
                          "order:1:paid:late", "order:22:paid"})
        ASSERT_EQ(c->command({"SET", k, "v"}), "OK");
    ASSERT_TRUE(sink.wait_for("set", "order:22:paid")) << sink.describe();
    EXPECT_EQ(keys_of(sink), (std::vector<std::pair<int, std::string>>{{0, "order:1:paid"},
                                                                       {0, "order:22:paid"}}));
}

TEST_F(FilterDelivery, PrefixAndGlobMustBothMatch) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}, {"prefix", "a:"}, {"glob", "*:z"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (const char *k : {"a:1:z", "b:1:z", "a:1:y", "a:2:z"})
        ASSERT_EQ(c->command({"SET", k, "v"}), "OK");
    ASSERT_TRUE(sink.wait_for("set", "a:2:z")) << sink.describe();
    EXPECT_EQ(keys_of(sink),
              (std::vector<std::pair<int, std::string>>{{0, "a:1:z"}, {0, "a:2:z"}}));
}

TEST_F(FilterDelivery, DbFilterSelectsOneDatabase) {
    EventSink sink;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&sink, {{"events", "set"}, {"db", "3"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    const std::vector<std::pair<int, std::string>> writes = {
        {0, "in-0"}, {3, "in-3"}, {5, "in-5"}, {1, "in-1"}, {3, "marker"}};
    for (const auto &[db, key] : writes) {
        ASSERT_EQ(c->command({"SELECT", std::to_string(db)}), "OK");
        ASSERT_EQ(c->command({"SET", key, "v"}), "OK");
    }
    ASSERT_TRUE(sink.wait_for("set", "marker", 3)) << sink.describe();
    EXPECT_EQ(keys_of(sink),
              (std::vector<std::pair<int, std::string>>{{3, "in-3"}, {3, "marker"}}));
}

TEST_F(FilterDelivery, EventsFromSeveralDbsCarryTheirDb) {
    EventSink sink;
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "set,del"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    for (int db : {0, 1, 7, 15}) {
        ASSERT_EQ(c->command({"SELECT", std::to_string(db)}), "OK");
        ASSERT_EQ(c->command({"SET", "same-key", std::to_string(db)}), "OK");
        ASSERT_EQ(c->command({"DEL", "same-key"}), "1");
    }
    for (int db : {0, 1, 7, 15}) {
        EXPECT_TRUE(sink.wait_for("set", "same-key", db)) << "db " << db << "\n" << sink.describe();
        EXPECT_TRUE(sink.wait_for("del", "same-key", db)) << "db " << db << "\n" << sink.describe();
    }
    EXPECT_EQ(sink.size(), 8u) << sink.describe();
}

TEST_F(FilterDelivery, ExpiredEventInAnotherDbCarriesThatDb) {
    EventSink sink;
    Engine engine(redis().url());
    engine.add(&sink, {{"events", "expired"}, {"db", "9"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SELECT", "9"}), "OK");
    ASSERT_TRUE(set_and_expire(*c, "exp:db9"));
    EXPECT_TRUE(sink.wait_for("expired", "exp:db9", 9)) << sink.describe();
}

TEST_F(FilterDelivery, HandlersWithDifferentFiltersSplitTheStream) {
    EventSink users, orders, all;
    Engine engine(redis().url());
    engine.set("workers", "1");
    engine.add(&users, {{"events", "set"}, {"prefix", "user:"}});
    engine.add(&orders, {{"events", "set,del"}, {"glob", "order:*"}});
    engine.add(&all, {{"events", "*"}, {"db", "*"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto c = client();
    ASSERT_EQ(c->command({"SET", "user:1", "v"}), "OK");
    ASSERT_EQ(c->command({"SET", "order:1", "v"}), "OK");
    ASSERT_EQ(c->command({"DEL", "order:1"}), "1");
    ASSERT_EQ(c->command({"SET", "other", "v"}), "OK");
    ASSERT_EQ(c->command({"SET", "user:2", "v"}), "OK");
    ASSERT_TRUE(users.wait_for("set", "user:2"))
        << "users:\n"
        << users.describe() << "orders:\n"
        << orders.describe() << "all:\n"
        << all.describe()
        << engine.stats_text({"events.received", "events.delivered", "dispatch.queued"});
    ASSERT_TRUE(all.wait_for("set", "user:2")) << all.describe();
    EXPECT_EQ(names_and_keys(users), (std::vector<std::string>{"set user:1", "set user:2"}));
    EXPECT_EQ(names_and_keys(orders), (std::vector<std::string>{"set order:1", "del order:1"}));
    EXPECT_EQ(all.size(), 5u) << all.describe();
}

}  // namespace
}  // namespace kwtest
