// The engine's plan (core/engine/plan.h): what the handlers and the configuration ask of
// Redis, worked out without a server.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/engine/plan.h"
#include "core/queue/queue_keys.h"
#include "keywatch_types.h"

#ifndef KW_PRODUCTION_DOC
#error "KW_PRODUCTION_DOC must name docs/production.md"
#endif

namespace keywatch {
namespace {

HandlerNeeds handler(const std::string &events, const std::string &queue = "") {
    Filter f;
    std::string err;
    EXPECT_TRUE(f.set("events", events, false, &err)) << err;
    if (!queue.empty()) {
        EXPECT_TRUE(f.set("queue", queue, false, &err)) << err;
    }
    return HandlerNeeds::of(f);
}

Demand demand_of(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers) {
    Demand d;
    std::string err;
    EXPECT_EQ(plan_demand(c, handlers, &d, &err), KW_OK) << err;
    return d;
}

Plan plan_of(const PlanConfig &c, const std::vector<HandlerNeeds> &handlers,
             const Deployment &dep) {
    Plan p;
    std::string err;
    EXPECT_EQ(make_plan(c, demand_of(c, handlers), dep, &p, &err), KW_OK) << err;
    return p;
}

TEST(Plan, TrackingAddsDelAndRenameFromOnceInTableOrder) {
    const Demand d = demand_of(PlanConfig{}, {handler("rename_from,expired"), handler("del")});
    EXPECT_TRUE(d.track_keys);
    EXPECT_EQ(d.events, (std::vector<std::string>{"expired", "del", "rename_from"}));
    PlanConfig off;
    off.track_enable = false;
    const Demand untracked = demand_of(off, {handler("expired")});
    EXPECT_FALSE(untracked.track_keys);
    EXPECT_EQ(untracked.events, std::vector<std::string>{"expired"});
}

TEST(Plan, EventsOfTaskQueueHandlersAreNotSubscribed) {
    PlanConfig c;
    c.track_enable = false;
    const Demand d = demand_of(c, {handler("task,set", "mail"), handler("zremrangebyscore")});
    EXPECT_EQ(d.events, std::vector<std::string>{"zremrangebyscore"});
    EXPECT_EQ(d.task_queues, std::vector<std::string>{"mail"});
    EXPECT_TRUE(d.sweeps());
}

TEST(Plan, UnknownEventsComeLastAndAreNamed) {
    PlanConfig c;
    c.track_enable = false;
    const Demand d = demand_of(c, {handler("future-event,sortstore,expired")});
    EXPECT_EQ(d.events, (std::vector<std::string>{"expired", "sortstore", "future-event"}));
    EXPECT_EQ(d.unknown_events, std::vector<std::string>{"future-event"});
    Plan p;
    std::string err;
    ASSERT_EQ(make_plan(c, d, Deployment{}, &p, &err), KW_OK) << err;
    EXPECT_EQ(p.notify_flags, "Exl");
}

TEST(Plan, TasksOfAnyQueueNeedTheQueuesOption) {
    Demand d;
    std::string err;
    EXPECT_EQ(plan_demand(PlanConfig{}, {handler("task")}, &d, &err), KW_ERR_STATE);
    EXPECT_EQ(err,
              "a handler takes \"task\" events of any queue, but no queue is named: set the "
              "filter's queue, or list the queues in the `queues` option");
    PlanConfig c;
    c.queues = {"sms", "mail"};
    d = demand_of(c, {handler("task")});
    EXPECT_EQ(d.task_queues, (std::vector<std::string>{"mail", "sms"}));
    EXPECT_FALSE(d.track_keys);
    EXPECT_TRUE(d.events.empty());
}

// A task queue's items are "task" events; an adopt rule's queue holds keys (their expiries).
TEST(Plan, AQueueHandlerWithoutTaskEventsIsRefusedUnlessAnAdoptRuleFillsTheQueue) {
    Demand d;
    std::string err;
    EXPECT_EQ(plan_demand(PlanConfig{}, {handler("expired,del", "mail")}, &d, &err), KW_ERR_STATE);
    EXPECT_EQ(err,
              "a handler names queue \"mail\" but takes no \"task\" events, so nothing would "
              "reach it (a task queue's items are \"task\" events): add \"task\" to its events, "
              "or drop its queue to take live Redis events");
    PlanConfig c;
    ASSERT_TRUE(parse_adopt_rules("prefix=cart: queue=mail", &c.adopt_rules, &err)) << err;
    d = demand_of(c, {handler("expired", "mail")});
    EXPECT_EQ(d.adopt_queues, std::vector<std::string>{"mail"});
    EXPECT_TRUE(d.task_queues.empty());
}

TEST(Plan, NothingToDeliverIsRefused) {
    PlanConfig c;
    c.track_enable = false;
    Demand d;
    std::string err;
    EXPECT_EQ(plan_demand(c, {handler("task", "keys")}, &d, &err), KW_ERR_STATE);
    EXPECT_EQ(err,
              "the handlers ask for nothing keywatch can deliver: register a handler for Redis "
              "events, tracked keys or a task queue");
}

TEST(Plan, AClusterThatSweepsHearsItsDueKeys) {
    PlanConfig c;
    c.ns = "app";
    const Plan p = plan_of(c, {handler("expired")}, Deployment{true, true, 0});
    EXPECT_EQ(p.keyspace_patterns, std::vector<std::string>{"__keyspace@0__:app:*:{*}:due"});
    EXPECT_EQ(p.notify_flags, "ExgKz");  // K and the flags of zadd and restore
    EXPECT_TRUE(p.script_keys.empty());  // the queue keys are in every slot
    EXPECT_NE(p.acl_rule.find(" +asking "), std::string::npos) << p.acl_rule;
    EXPECT_NE(p.channel_rules.find("&__keyspace@0__:app:*:{*}:due "), std::string::npos);

    Plan with_db;
    std::string err;
    EXPECT_EQ(make_plan(c, p.demand, Deployment{true, true, 2}, &with_db, &err), KW_ERR_URL);
    EXPECT_EQ(err, "a Redis Cluster has only database 0: remove the /db from redis.url");
    // A cluster that only listens needs neither.
    c.track_enable = false;
    const Plan listens = plan_of(c, {handler("set")}, Deployment{true, true, 0});
    EXPECT_TRUE(listens.keyspace_patterns.empty());
    EXPECT_EQ(listens.notify_flags, "E$");
}

// Events subscribed only for the queues' bookkeeping (adoption's, tracking's del and
// rename_from) are about tracked keys, which live in redis.url's database: subscribed there
// alone (and granted so), while what a handler takes stays every database's.
TEST(Plan, BookkeepingEventsAreSubscribedInTheTrackedDatabaseAlone) {
    PlanConfig c;
    std::string err;
    ASSERT_TRUE(parse_adopt_rules("prefix=app:", &c.adopt_rules, &err)) << err;
    const Plan p = plan_of(c, {handler("expired,set,rename_from")}, Deployment{false, true, 3});
    ASSERT_FALSE(p.demand.bookkeeping_events.empty());
    for (size_t i = 0; i < p.demand.events.size(); i++) {
        const std::string &e = p.demand.events[i];
        const auto &own = p.demand.bookkeeping_events;
        const bool bookkeeping = std::find(own.begin(), own.end(), e) != own.end();
        EXPECT_EQ(p.keyevent_patterns[i],
                  (bookkeeping ? "__keyevent@3__:" : "__keyevent@*__:") + e);
        EXPECT_NE(p.channel_rules.find("&" + p.keyevent_patterns[i] + " "), std::string::npos)
            << p.channel_rules;
    }
    auto has = [&p](const std::string &pattern) {
        return std::find(p.keyevent_patterns.begin(), p.keyevent_patterns.end(), pattern) !=
               p.keyevent_patterns.end();
    };
    EXPECT_EQ(p.keyevent_patterns[0], "__keyevent@*__:expired");
    EXPECT_TRUE(has("__keyevent@*__:set")) << "a handler takes set";
    EXPECT_TRUE(has("__keyevent@*__:rename_from")) << "a handler takes rename_from";
    EXPECT_TRUE(has("__keyevent@3__:expire"));
    EXPECT_TRUE(has("__keyevent@3__:del")) << "for tracking and adoption alone";
}

// Tracking alone: del and rename_from are subscribed for it, in the tracked database.
TEST(Plan, TrackingsDelAndRenameFromAreSubscribedInTheTrackedDatabaseAlone) {
    const Plan p = plan_of(PlanConfig{}, {handler("expired,evicted")}, Deployment{false, true, 2});
    EXPECT_EQ(p.demand.bookkeeping_events, (std::vector<std::string>{"del", "rename_from"}));
    EXPECT_EQ(p.keyevent_patterns,
              (std::vector<std::string>{"__keyevent@*__:expired", "__keyevent@*__:evicted",
                                        "__keyevent@2__:del", "__keyevent@2__:rename_from"}));
    EXPECT_EQ(p.channel_rules,
              "&__keyevent@*__:expired &__keyevent@*__:evicted &__keyevent@2__:del "
              "&__keyevent@2__:rename_from &__keywatch:heartbeat:*");
    // A handler that takes del hears every database's.
    const Plan wants = plan_of(PlanConfig{}, {handler("expired,del")}, Deployment{false, true, 2});
    EXPECT_EQ(wants.demand.bookkeeping_events, std::vector<std::string>{"rename_from"});
    EXPECT_EQ(wants.keyevent_patterns,
              (std::vector<std::string>{"__keyevent@*__:expired", "__keyevent@*__:del",
                                        "__keyevent@2__:rename_from"}));
    // Without tracking nothing is subscribed for it.
    PlanConfig off;
    off.track_enable = false;
    const Plan untracked = plan_of(off, {handler("expired")}, Deployment{false, true, 2});
    EXPECT_TRUE(untracked.demand.bookkeeping_events.empty());
    EXPECT_EQ(untracked.keyevent_patterns, std::vector<std::string>{"__keyevent@*__:expired"});
}

TEST(Plan, StandaloneChecksTheScriptsOnTheServedQueuesKeys) {
    PlanConfig c;
    c.queues = {"mail"};
    const Plan p = plan_of(c, {handler("expired"), handler("task", "mail")}, Deployment{});
    std::vector<std::string> want = QueueKeys::make("kw", kKeysQueue, kStandaloneTag).keys();
    for (auto &k : QueueKeys::make("kw", "mail", kStandaloneTag).keys()) want.push_back(k);
    EXPECT_EQ(p.script_keys, want);
    EXPECT_TRUE(p.keyspace_patterns.empty());
    EXPECT_EQ(p.demand.queues(), (std::vector<std::string>{"keys", "mail"}));
}

TEST(Plan, TheDefaultRuleIsTheDocumentedOne) {
    // keywatch check's defaults: --events expired,evicted, track.enable, redis.mode auto.
    const Plan p = plan_of(PlanConfig{}, {handler("expired,evicted")}, Deployment{});
    std::ifstream doc(KW_PRODUCTION_DOC);
    std::string line, documented;
    while (std::getline(doc, line))
        if (line.rfind("ACL SETUSER keywatch on ", 0) == 0) documented = line;
    ASSERT_FALSE(documented.empty());
    EXPECT_EQ("ACL SETUSER keywatch " + p.acl_rule, documented);
    // A db other than 0 adds SELECT; without the topology probe, no cluster commands.
    const Plan db = plan_of(PlanConfig{}, {handler("expired")}, Deployment{false, false, 3});
    EXPECT_NE(db.acl_rule.find(" +select "), std::string::npos);
    EXPECT_EQ(db.acl_rule.find("cluster|shards"), std::string::npos);
}

}  // namespace
}  // namespace keywatch
