// /metrics against a real redis-server and a real engine, read back by the Prometheus text
// parser of python3-prometheus-client (cli/tests/daemon/parse_metrics.py): the families and
// types, values that move by what known traffic did, label values escaped so the parser
// reads back the very names, every statistic mapped to a metric, and the queue gauges read
// from Redis (kept, counted and logged once while Redis is down).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>

#include "cli/daemon/daemon_http.h"
#include "cli/daemon/daemon_log.h"
#include "cli/daemon/metrics.h"
#include "cli/daemon/queue_gauges.h"
#include "cli/tests/http_get.h"
#include "redis_fixture.h"

namespace kwtest {
namespace {

using keywatch::cli::Metrics;
using keywatch::cli::QueueGauges;
using json = nlohmann::json;

// The exposition as the real parser reads it (families in order), or a test failure.
json parse_exposition(const std::string &text) {
    char path[] = "/tmp/kw-metrics-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    close(fd);
    std::ofstream(path) << text;
    std::string cmd = std::string("/usr/bin/python3 ") + KW_PARSE_METRICS + " " + path + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    int status = pclose(p);
    std::remove(path);
    if (status != 0) {
        ADD_FAILURE() << "the Prometheus parser refused the exposition: " << out << "\n" << text;
        return json::array();
    }
    return json::parse(out);
}

// The value of the sample `name` with exactly these labels; NaN when absent.
double value(const json &families, const std::string &name,
             const std::map<std::string, std::string> &labels = {}) {
    for (const auto &f : families)
        for (const auto &s : f["samples"]) {
            if (s["name"] != name ||
                s["labels"].get<std::map<std::string, std::string>>() != labels)
                continue;
            return s["value"].is_string() ? HUGE_VAL : s["value"].get<double>();
        }
    return NAN;
}

const json *family(const json &families, const std::string &name) {
    for (const auto &f : families)
        if (f["name"] == name) return &f;
    return nullptr;
}

class DaemonMetricsTest : public RedisTest {
  protected:
    kw_client_t *new_client() {
        kw_conf_t *conf = kw_conf_new();
        kw_conf_set(conf, "redis.url", redis().url().c_str(), nullptr, 0);
        kw_client_t *c = nullptr;
        char err[256] = "";
        EXPECT_EQ(kw_client_new(conf, &c, err, sizeof err), KW_OK) << err;
        kw_conf_free(conf);
        return c;
    }
    void schedule(kw_client_t *c, const std::string &id, int64_t delay_ms) {
        ASSERT_EQ(
            kw_client_schedule(c, "jobs", id.data(), id.size(), "p", 1, 0, delay_ms, 0, nullptr),
            KW_OK)
            << kw_client_last_error(c);
    }
};

TEST_F(DaemonMetricsTest, ParsedByThePrometheusParserWithValuesMovedByKnownTraffic) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.set("max_attempts", "1");
    EventSink keys, jobs, untracked;
    jobs.decide = [](const Event &e) { return e.key == "bad" ? KW_RESULT_REJECT : KW_RESULT_ACK; };
    engine.add(&keys, {{"events", "expired"}, {"queue", "keys"}});
    engine.add(&jobs, {{"events", "task"}, {"queue", "jobs"}});
    engine.add(&untracked, {{"events", "expired"}, {"prefix", "plain:"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    LogSink logs;
    QueueGauges gauges(engine.conf(), 100, [&](kw_log_level level, const std::string &m) {
        LogSink::callback(level, m.c_str(), &logs);
    });
    gauges.start();
    Metrics metrics(engine.get(), {"expired keys", "jobs", "plain"}, &gauges);
    const json before = parse_exposition(metrics.render());
    const std::string node = "127.0.0.1:" + std::to_string(redis().port());
    EXPECT_EQ(value(before, "keywatch_build_info", {{"version", kw_version_string()}}), 1);
    EXPECT_EQ(value(before, "keywatch_node_up", {{"node", node}}), 1);
    EXPECT_EQ(value(before, "keywatch_handler_calls_total", {{"handler", "jobs"}}), 0);

    kw_client_t *c = new_client();
    for (int i = 0; i < 5; i++) {
        std::string key = "tracked:" + std::to_string(i);
        ASSERT_EQ(kw_client_track(c, key.data(), key.size(), "v", 1, 50, 0, nullptr), KW_OK);
    }
    schedule(c, "now-1", 0);
    schedule(c, "now-2", 0);
    schedule(c, "bad", 0);
    for (int i = 0; i < 3; i++) schedule(c, "later-" + std::to_string(i), 3600 * 1000);
    auto rc = client();
    for (int i = 0; i < 4; i++) ASSERT_TRUE(set_and_expire(*rc, "plain:" + std::to_string(i)));
    ASSERT_TRUE(keys.wait_count(5)) << keys.describe();
    ASSERT_TRUE(jobs.wait_count(3)) << jobs.describe();
    ASSERT_TRUE(untracked.wait_count(4)) << untracked.describe();
    kw_client_free(c);

    // Counters move once a handler has returned and its item is acked, and the gauges are
    // read every 100 ms: wait until the figures have settled, then check each.
    const std::vector<std::pair<std::string, std::map<std::string, std::string>>> settled = {
        {"keywatch_handler_calls_total", {{"handler", "expired keys"}}},
        {"keywatch_handler_calls_total", {{"handler", "jobs"}}},
        {"keywatch_handler_calls_total", {{"handler", "plain"}}},
        {"keywatch_queue_items_acked_total", {{"queue", "keys"}}},
        {"keywatch_queue_items_acked_total", {{"queue", "jobs"}}},
        {"keywatch_queue_items_rejected_total", {{"queue", "jobs"}}},
        {"keywatch_queue_due", {{"queue", "jobs"}}},
        {"keywatch_queue_dead_letters", {{"queue", "jobs"}}},
        {"keywatch_queue_in_flight", {{"queue", "jobs"}}},
        {"keywatch_queue_due", {{"queue", "keys"}}}};
    const std::vector<double> expected = {5, 3, 4, 5, 2, 1, 3, 1, 0, 0};
    json after;
    ASSERT_TRUE(wait_until([&] {
        after = parse_exposition(metrics.render());
        for (size_t i = 0; i < settled.size(); i++)
            if (value(after, settled[i].first, settled[i].second) != expected[i]) return false;
        return true;
    })) << metrics.render();
    EXPECT_EQ(value(after, "keywatch_handler_errors_total", {{"handler", "jobs"}}), 1);
    EXPECT_EQ(value(after, "keywatch_handler_duration_seconds_count", {{"handler", "jobs"}}), 3);
    EXPECT_EQ(value(after, "keywatch_handler_duration_seconds_bucket",
                    {{"handler", "jobs"}, {"le", "+Inf"}}),
              3);
    EXPECT_EQ(value(after, "keywatch_expiry_lateness_seconds_count", {{"queue", "keys"}}), 5);
    EXPECT_EQ(value(after, "keywatch_expiry_lateness_seconds_count", {{"queue", "jobs"}}), 3);
    EXPECT_EQ(value(after, "keywatch_items_claimed_total"), 8);
    EXPECT_GE(value(after, "keywatch_notifications_received_total", {{"event", "expired"}}) -
                  value(before, "keywatch_notifications_received_total", {{"event", "expired"}}),
              4);
    EXPECT_EQ(value(after, "keywatch_queue_gauges_read_errors_total"), 0);
    EXPECT_GT(value(after, "keywatch_queue_gauges_read_timestamp_seconds"), 1.7e9);
    EXPECT_EQ(logs.lines().size(), 0u) << logs.describe();

    // Conventional shapes: every family named keywatch_*, with HELP; counters read as such
    // (the parser strips _total), histograms with cumulative buckets ending at +Inf.
    for (const auto &f : after) {
        const std::string name = f["name"];
        EXPECT_EQ(name.rfind("keywatch_", 0), 0u) << name;
        EXPECT_FALSE(f["help"].get<std::string>().empty()) << name;
        if (f["type"] == "histogram") {
            EXPECT_NE(name.find("_seconds"), std::string::npos) << name;
        }
    }
    ASSERT_NE(family(after, "keywatch_handler_calls"), nullptr);
    EXPECT_EQ((*family(after, "keywatch_handler_calls"))["type"], "counter");
    EXPECT_EQ((*family(after, "keywatch_expiry_lateness_seconds"))["type"], "histogram");
    EXPECT_EQ((*family(after, "keywatch_queue_due"))["type"], "gauge");
}

TEST_F(DaemonMetricsTest, LabelValuesAreEscapedSoTheParserReadsBackTheNames) {
    Engine engine(redis().url());
    EventSink a, b;
    engine.add(&a, {{"events", "expired"}});
    engine.add(&b, {{"events", "expired"}});
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    const std::string odd = "say \"hi\" \\ then\nnewline, {braces}=,";
    Metrics metrics(engine.get(), {odd, "bad \xff byte"}, nullptr);
    const json parsed = parse_exposition(metrics.render());
    EXPECT_EQ(value(parsed, "keywatch_handler_calls_total", {{"handler", odd}}), 0)
        << metrics.render();
    EXPECT_EQ(value(parsed, "keywatch_handler_calls_total", {{"handler", "bad \xEF\xBF\xBD byte"}}),
              0)
        << metrics.render();
}

// A built-in plugin instance for the expired events of keys under prefix; it counts.
void add_stream_plugin(Engine &engine, const char *instance, const char *prefix) {
    kw_filter_t *f = kw_filter_new();
    kw_filter_set(f, "prefix", prefix, nullptr, 0);
    const char *options[] = {"stream", "out", nullptr};
    char err[1024] = "";
    const int rc = kw_engine_add_plugin(engine.get(), KW_HANDLERS_DIR "/stream.so", instance, f,
                                        options, err, sizeof err);
    kw_filter_free(f);
    ASSERT_EQ(rc, KW_OK) << err;
}

TEST_F(DaemonMetricsTest, EveryStatisticHasAMetricOfItsOwnType) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    engine.set("adopt.rules", "prefix=app:");  // the catch-up rows
    EventSink a;
    engine.add(&a, {{"events", "expired,task"}});
    add_stream_plugin(engine, "audit", "p:");
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    // A plugin's counter moves (plugin.<counter>) once it handled an event.
    auto rc = client();
    ASSERT_TRUE(set_and_expire(*rc, "p:1"));
    ASSERT_TRUE(engine.stat_reaches("plugin.audit.appended", 1));
    kw_stats_t *s = nullptr;
    ASSERT_EQ(kw_engine_stats(engine.get(), &s), KW_OK);
    std::map<std::string, kw_stat_type> family_type;
    const std::regex valid("[a-zA-Z_:][a-zA-Z0-9_:]*");
    for (size_t i = 0; i < kw_stats_count(s); i++) {
        const std::string row = kw_stats_name(s, i);
        const auto *m = keywatch::cli::metric_mapping(row);
        ASSERT_NE(m, nullptr) << row << " has no entry in kMetricMap (cli/daemon/metrics.cpp)";
        if (!m->metric) continue;
        EXPECT_TRUE(std::regex_match(m->metric, valid)) << m->metric;
        const kw_stat_type type = kw_stats_type(s, i);
        auto [it, fresh] = family_type.emplace(m->metric, type);
        EXPECT_EQ(it->second, type) << m->metric << " mixes statistics of different types";
        const std::string name = m->metric;
        const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
        EXPECT_EQ(total, type == KW_STAT_COUNTER) << name;
    }
    kw_stats_free(s);
    // Rows the table names that the engine does not have: a typo or a renamed row.
    std::set<std::string> rows;
    ASSERT_EQ(kw_engine_stats(engine.get(), &s), KW_OK);
    for (size_t i = 0; i < kw_stats_count(s); i++) rows.insert(kw_stats_name(s, i));
    kw_stats_free(s);
    for (const auto &m : keywatch::cli::metric_map())
        EXPECT_TRUE(rows.count(m.row)) << m.row << " is mapped but the engine has no such row";
}

// A plugin's own counters are one family, labelled by instance and counter, read back by
// the Prometheus parser.
TEST_F(DaemonMetricsTest, PluginCountersAreOneFamilyByInstanceAndCounter) {
    Engine engine(redis().url());
    add_stream_plugin(engine, "audit", "a:");
    add_stream_plugin(engine, "mirror", "m:");
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    Metrics metrics(engine.get(), {"audit", "mirror"}, nullptr);
    auto rc = client();
    for (const char *key : {"a:1", "a:2", "m:1"}) ASSERT_TRUE(set_and_expire(*rc, key));
    json parsed;
    ASSERT_TRUE(wait_until([&] {
        parsed = parse_exposition(metrics.render());
        return value(parsed, "keywatch_plugin_counter_total",
                     {{"instance", "audit"}, {"counter", "appended"}}) == 2 &&
               value(parsed, "keywatch_plugin_counter_total",
                     {{"instance", "mirror"}, {"counter", "appended"}}) == 1;
    })) << metrics.render();
    const json *f = family(parsed, "keywatch_plugin_counter");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ((*f)["type"], "counter");
}

// docs/metrics.md names every family /metrics serves (engine statistics, build info and
// the queue gauges), so the page stays true to the code.
TEST_F(DaemonMetricsTest, EveryMetricServedIsInDocsMetricsMd) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    EventSink a;
    engine.add(&a, {{"events", "expired,task"}});
    add_stream_plugin(engine, "audit", "p:");
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto rc = client();
    ASSERT_TRUE(set_and_expire(*rc, "p:1"));
    ASSERT_TRUE(engine.stat_reaches("plugin.audit.appended", 1));
    QueueGauges gauges(engine.conf(), 50, {});
    gauges.start();
    ASSERT_TRUE(wait_until([&] { return gauges.figures().read_ms > 0; }));
    Metrics metrics(engine.get(), {"a"}, &gauges);
    const std::string text = metrics.render();
    std::ifstream in(KW_METRICS_DOC);
    ASSERT_TRUE(in) << "cannot read " << KW_METRICS_DOC;
    const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t families = 0;
    for (size_t at = text.find("# TYPE "); at != std::string::npos;
         at = text.find("# TYPE ", at + 1)) {
        const std::string name = text.substr(at + 7, text.find(' ', at + 7) - at - 7);
        EXPECT_TRUE(contains(doc, "`" + name + "`")) << name << " is not in docs/metrics.md";
        families++;
    }
    EXPECT_GT(families, 30u) << text;
}

// A server that keeps its data over a restart (AOF).
class DaemonMetricsAofTest : public DaemonMetricsTest {
  protected:
    keywatch::RedisProcess::Options options() override {
        keywatch::RedisProcess::Options o;
        o.appendonly = true;
        return o;
    }
};

TEST_F(DaemonMetricsAofTest, QueueGaugesKeepTheirFiguresWhileRedisIsDownAndLogItOnce) {
    Engine engine(redis().url());
    engine.set("queues", "jobs");
    kw_client_t *c = new_client();
    schedule(c, "a", 3600 * 1000);
    schedule(c, "b", 3600 * 1000);
    kw_client_free(c);
    LogSink logs;
    QueueGauges gauges(engine.conf(), 50, [&](kw_log_level level, const std::string &m) {
        LogSink::callback(level, m.c_str(), &logs);
    });
    gauges.start();
    auto due = [&] {
        for (const auto &q : gauges.figures().queues)
            if (q.queue == "jobs") return q.due;
        return int64_t{-1};
    };
    ASSERT_TRUE(wait_until([&] { return due() == 2; }));
    redis().stop();
    ASSERT_TRUE(wait_until([&] { return gauges.figures().errors >= 3; }));
    EXPECT_EQ(due(), 2);
    auto lines = logs.lines();
    ASSERT_EQ(lines.size(), 1u) << logs.describe();
    EXPECT_EQ(lines[0].level, KW_LOG_WARN);
    EXPECT_TRUE(contains(lines[0].message, "cannot read the queues' figures")) << lines[0].message;
    redis().start();
    ASSERT_TRUE(wait_until([&] { return logs.lines().size() == 2; })) << logs.describe();
    EXPECT_TRUE(contains(logs.lines()[1].message, "again")) << logs.describe();
    const int64_t errors = gauges.figures().errors;
    EXPECT_EQ(due(), 2);
    Metrics metrics(engine.get(), {}, &gauges);
    const json parsed = parse_exposition(metrics.render());
    EXPECT_EQ(value(parsed, "keywatch_queue_gauges_read_errors_total"), errors);
    EXPECT_EQ(value(parsed, "keywatch_queue_due", {{"queue", "jobs"}}), 2);
}

// /metrics, /healthz and /readyz as the daemon serves them (DaemonHttp); /readyz flips to
// 503 with the node named while the server is down and back to 200 once the engine is
// subscribed again.
TEST_F(DaemonMetricsTest, RoutesServeMetricsAndReadinessFollowsTheServer) {
    Engine engine(redis().url());
    EventSink a;
    engine.add(&a, {{"events", "expired"}});
    keywatch::cli::DaemonConfig config;
    config.http.listen = "127.0.0.1:0";
    keywatch::cli::DaemonLog log;
    keywatch::cli::DaemonHttp http;
    std::string err;
    ASSERT_TRUE(http.start(config, engine.get(), engine.conf(), {"a"}, &log, &err)) << err;
    const std::string address = http.address();
    auto before = http_get(address, "/readyz");
    EXPECT_EQ(before.status, 503) << before.body;
    EXPECT_TRUE(contains(before.body, "no Redis node connected yet")) << before.body;
    ASSERT_EQ(engine.start(), KW_OK) << engine.last_error();
    auto m = http_get(address, "/metrics");
    EXPECT_EQ(m.status, 200);
    EXPECT_EQ(m.headers["content-type"], Metrics::kContentType);
    EXPECT_FALSE(parse_exposition(m.body).empty());
    EXPECT_EQ(http_get(address, "/healthz").body, "ok\n");
    HttpReply ready;
    ASSERT_TRUE(wait_until([&] {
        ready = http_get(address, "/readyz");
        return ready.status == 200;
    })) << ready.body;
    EXPECT_EQ(ready.headers["content-type"], "application/json");
    EXPECT_TRUE(json::parse(ready.body)["ready"].get<bool>()) << ready.body;
    redis().stop();
    // The subscriber and the sweeper of that node each notice the loss on their own
    // connection, in either order: wait until /readyz names both.
    const std::string node = "127.0.0.1:" + std::to_string(redis().port());
    HttpReply down;
    ASSERT_TRUE(wait_until([&] {
        down = http_get(address, "/readyz");
        return down.status == 503 && contains(down.body, "node " + node + ": subscriber") &&
               contains(down.body, "node " + node + ": sweeper not running");
    })) << down.body;
    EXPECT_FALSE(json::parse(down.body)["ready"].get<bool>()) << down.body;
    EXPECT_EQ(http_get(address, "/healthz").status, 200);
    redis().start();
    ASSERT_TRUE(wait_until([&] { return http_get(address, "/readyz").status == 200; }))
        << http_get(address, "/readyz").body;
}

}  // namespace
}  // namespace kwtest
