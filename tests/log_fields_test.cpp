// Structured log lines (kw_engine_set_log_fields_cb) against a real redis-server: lines about
// a node carry its name, lines about a queue its name, with the same messages kw_log_fn gets;
// an engine has one log callback, whichever function set it. Faults are real (CLIENT KILL,
// a queue key of the wrong type).
#include <gtest/gtest.h>

#include <string>

#include "redis_fixture.h"

namespace kwtest {
namespace {

class LogFieldsTest : public RedisTest {
  protected:
    std::string node() { return redis().host() + ":" + std::to_string(redis().port()); }
    // Waits for a line whose message contains `part`; a failure describes what came.
    FieldsLog::Line line(const FieldsLog &log, const std::string &part) {
        FieldsLog::Line out;
        EXPECT_TRUE(wait_until([&] { return log.find(part, &out); }))
            << "no line with \"" << part << "\"; got:\n"
            << log.describe();
        return out;
    }
};

TEST_F(LogFieldsTest, LinesAboutANodeOrAQueueNameThem) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.set("sweep.interval", "50ms");
    EventSink jobs;
    engine.add(&jobs, {{"events", "task"}, {"queue", "jobs"}});
    FieldsLog log;
    engine.watch_log_fields(&log);
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto raw = client();

    // The queue's due key of the wrong type: its claims fail, and say so about the queue.
    ASSERT_EQ(raw->command({"SET", "kw:jobs:{0}:due", "not a sorted set"}), "OK");
    FieldsLog::Line failing = line(log, "claims on ");
    EXPECT_EQ(failing.level, KW_LOG_WARN);
    EXPECT_EQ(failing.fields["queue"], "jobs") << failing.message;
    EXPECT_EQ(failing.fields["node"], node()) << failing.message;
    EXPECT_EQ(failing.field_count, 2u) << "each field once";
    ASSERT_EQ(raw->command({"DEL", "kw:jobs:{0}:due"}), "1");
    FieldsLog::Line again = line(log, "work again");
    EXPECT_EQ(again.fields["queue"], "jobs");
    EXPECT_EQ(again.fields["node"], node());

    // The subscriber's connection killed: its line names the node.
    raw->command({"CLIENT", "KILL", "TYPE", "pubsub"});
    FieldsLog::Line lost = line(log, "reconnecting in");
    EXPECT_EQ(lost.fields["node"], node()) << lost.message;
    EXPECT_EQ(lost.fields.count("queue"), 0u);
    // The sweeper's connection killed too (every normal client but this one).
    raw->command({"CLIENT", "KILL", "TYPE", "normal"});
    FieldsLog::Line queue_conn = line(log, "queue connection: ");
    EXPECT_EQ(queue_conn.fields["node"], node()) << queue_conn.message;
    // Every line passed fields as name, value pairs, no name twice.
    for (auto &l : log.lines()) EXPECT_EQ(l.field_count, l.fields.size()) << l.message;
}

TEST_F(LogFieldsTest, AnEngineHasOneLogCallbackWhicheverFunctionSetIt) {
    // Fields first, then the plain callback: the plain one replaces it.
    FieldsLog replaced;
    LogSink plain;
    Engine a(redis().url());
    EventSink sink_a;
    a.add(&sink_a, {});
    a.watch_log_fields(&replaced);
    a.watch_logs(&plain);
    ASSERT_EQ(a.start(), KW_OK) << a.last_error();
    // The plain callback first, then fields: the fields one replaces it.
    LogSink replaced_plain;
    FieldsLog fields;
    Engine b(redis().url());
    EventSink sink_b;
    b.add(&sink_b, {});
    b.watch_logs(&replaced_plain);
    b.watch_log_fields(&fields);
    ASSERT_EQ(b.start(), KW_OK) << b.last_error();

    client()->command({"CLIENT", "KILL", "TYPE", "pubsub"});
    FieldsLog::Line with_fields = line(fields, "reconnecting in");
    std::string plain_line;
    ASSERT_TRUE(wait_until([&] {
        plain_line = plain.find(KW_LOG_INFO, [](const std::string &m) {
            return m.find("reconnecting in") != std::string::npos;
        });
        return !plain_line.empty();
    })) << plain.describe();
    // The same message either way (up to the jittered delay at its end).
    auto head = [](const std::string &m) { return m.substr(0, m.find("; reconnecting in")); };
    EXPECT_EQ(head(with_fields.message), head(plain_line));
    EXPECT_EQ(with_fields.fields["node"], node());
    EXPECT_TRUE(replaced.lines().empty()) << replaced.describe();
    EXPECT_TRUE(replaced_plain.lines().empty()) << replaced_plain.describe();
    // After start neither can be changed.
    EXPECT_EQ(kw_engine_set_log_fields_cb(b.get(), nullptr, nullptr), KW_ERR_STATE);
    EXPECT_EQ(kw_engine_set_log_fields_cb(nullptr, &FieldsLog::callback, &fields),
              KW_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace kwtest
