// End to end: the real `keywatch` binary against a real redis-server per test
// (keywatch::RedisProcess on a free loopback port, stopped by pid). The verbs (track,
// untrack, adopt, schedule, cancel, reschedule, inspect, dead list|replay|purge), their bad
// input, `watch` delivering tracked keys and tasks, and `demo`. `keywatch inspect` is
// checked after each scenario, as a table and as JSON. Dead letters come from an engine of
// the C API whose handler returns KW_RESULT_REJECT. Redis is never mocked.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/tests/cli_process.h"
#include "cli/time_text.h"
#include "embedded/redis_process.h"
#include "keywatch.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"
#include "tests/wait.h"

#ifndef KW_CLI_PATH
#error "KW_CLI_PATH must name the keywatch binary"
#endif

namespace {

using Json = nlohmann::json;
using kwclitest::Process;
using kwclitest::Result;
using namespace std::chrono_literals;

std::vector<std::string> lines(const std::string &text) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

std::vector<std::string> words(const std::string &line) {
    std::vector<std::string> out;
    std::stringstream in(line);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

bool all_digits(const std::string &s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// One queue's figures from `keywatch inspect --json`; listed false when absent.
struct Figures {
    bool listed = false;
    int64_t due = -1, due_now = -1, inflight = -1, dead = -1, oldest_overdue_ms = -1;
};

class CliTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/kwcli.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        server_.start();
        url_ = server_.url();
    }
    void TearDown() override {
        server_.stop();
        std::filesystem::remove_all(dir_);
    }

    // keywatch ARGS --redis URL, run to completion.
    Result kw(std::vector<std::string> args, const Process::Options &opts = {}) {
        args.push_back("--redis");
        args.push_back(url_);
        Process p(KW_CLI_PATH, args, dir_, "run" + std::to_string(runs_++), opts);
        return p.finish(60s, false);
    }
    // The same, in the background: for watches stopped by the test.
    std::unique_ptr<Process> kw_background(std::vector<std::string> args,
                                           const Process::Options &opts = {}) {
        args.push_back("--redis");
        args.push_back(url_);
        return std::make_unique<Process>(KW_CLI_PATH, args, dir_, "bg" + std::to_string(runs_++),
                                         opts);
    }
    // A watch until it has printed `want` lines (or 15 s), then SIGTERM.
    Result watch_until(std::vector<std::string> args, size_t want) {
        args.insert(args.begin(), "watch");
        auto p = kw_background(args);
        EXPECT_TRUE(p->wait_stderr("keywatch: watching", 15s));
        const auto deadline = std::chrono::steady_clock::now() + 15s;
        Result r;
        for (;;) {
            r = p->peek();
            if (r.status >= 0 || lines(r.out).size() >= want ||
                std::chrono::steady_clock::now() >= deadline)
                break;
            std::this_thread::sleep_for(20ms);
        }
        if (r.status < 0) r = p->finish(20s, true);
        return r;
    }

    // `keywatch inspect --json` (extra options appended) for one queue; the table that
    // `keywatch inspect` prints must show the same counts.
    Figures inspect(const std::string &queue, const std::vector<std::string> &extra = {}) {
        std::vector<std::string> args = {"inspect", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const Result j = kw(args);
        EXPECT_EQ(j.status, 0) << describe(j);
        Figures f;
        const Json doc = Json::parse(j.out);
        for (const auto &q : doc.at("queues")) {
            if (q.at("queue") != queue) continue;
            f.listed = true;
            f.due = q.at("due");
            f.due_now = q.at("due_now");
            f.inflight = q.at("inflight");
            f.dead = q.at("dead");
            f.oldest_overdue_ms = q.at("oldest_overdue_ms");
        }
        args.erase(args.begin() + 1);  // the table
        const Result t = kw(args);
        EXPECT_EQ(t.status, 0) << describe(t);
        const auto rows = lines(t.out);
        EXPECT_FALSE(rows.empty()) << describe(t);
        if (rows.empty()) return f;
        EXPECT_EQ(words(rows[0]), (std::vector<std::string>{"QUEUE", "DUE", "DUE", "NOW", "IN",
                                                            "FLIGHT", "DEAD", "OLDEST", "OVERDUE"}))
            << describe(t);
        bool in_table = false;
        for (size_t i = 1; i < rows.size(); i++) {
            const auto w = words(rows[i]);
            EXPECT_EQ(w.size(), 6u) << rows[i];
            if (w.size() != 6 || w[0] != queue) continue;
            in_table = true;
            // Counts that only engines change (none runs while the test inspects).
            EXPECT_EQ(w[1], std::to_string(f.due)) << describe(t);
            EXPECT_EQ(w[3], std::to_string(f.inflight)) << describe(t);
            EXPECT_EQ(w[4], std::to_string(f.dead)) << describe(t);
        }
        EXPECT_EQ(in_table, f.listed) << describe(t);
        return f;
    }

    int64_t redis_now_ms() {
        const auto t = lines(server_.command({"TIME"}));
        return std::stoll(t.at(0)) * 1000 + std::stoll(t.at(1)) / 1000;
    }

    // Waits until queue has `n` items due now (their deadlines passed, Redis clock).
    void wait_due_now(const std::string &queue, int64_t n) {
        const auto deadline = std::chrono::steady_clock::now() + 15s;
        while (std::chrono::steady_clock::now() < deadline) {
            if (inspect(queue).due_now >= n) return;
            std::this_thread::sleep_for(50ms);
        }
        ADD_FAILURE() << "queue " << queue << " never had " << n << " items due now";
    }

    keywatch::RedisProcess server_;
    std::string url_, dir_;
    int runs_ = 0;
};

// Parses each stdout line of a watch as JSON.
std::vector<Json> json_lines(const Result &r) {
    std::vector<Json> out;
    for (const auto &line : lines(r.out)) {
        try {
            out.push_back(Json::parse(line));
        } catch (const std::exception &e) {
            ADD_FAILURE() << "not JSON: " << line << " (" << e.what() << ")";
        }
    }
    return out;
}

const Json *find_line(const std::vector<Json> &all, const std::string &key) {
    for (const auto &j : all)
        if (j.value("key", "") == key) return &j;
    return nullptr;
}

// ---- track, untrack, adopt ------------------------------------------------------------

TEST_F(CliTest, TrackUntrackAdoptThenWatchDeliversBySweepWithBinarySnapshot) {
    const int64_t before = redis_now_ms();
    Result r = kw({"track", "t:a", "plain", "--ttl", "1s"});
    ASSERT_EQ(r.status, 0) << describe(r);
    ASSERT_TRUE(all_digits(lines(r.out).at(0))) << describe(r);
    const int64_t deadline_a = std::stoll(lines(r.out).at(0));
    EXPECT_GE(deadline_a, before + 1000);
    EXPECT_LE(deadline_a, redis_now_ms() + 1000);
    EXPECT_NE(r.err.find("keywatch track: tracking 't:a': it expires in 1.0s"), std::string::npos)
        << describe(r);

    r = kw({"track", "t:b", "\xCA\xFE", "--ttl", "1s", "--snapshot", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    const Json tb = Json::parse(r.out);
    EXPECT_EQ(tb.at("key"), "t:b");
    EXPECT_EQ(tb.at("ttl_ms"), 1000);
    EXPECT_EQ(tb.at("snapshot"), true);
    EXPECT_GT(tb.at("deadline_ms").get<int64_t>(), before);

    ASSERT_EQ(kw({"track", "t:c", "v", "--ttl", "1s", "-q"}).status, 0);
    // 3 s: adopt must find the key alive, however slowly a sanitized CLI starts.
    ASSERT_EQ(server_.command({"SET", "t:d", "adopted", "PX", "3000"}), "OK");
    r = kw({"adopt", "t:d", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(Json::parse(r.out).at("key"), "t:d");

    Figures f = inspect("keys");
    EXPECT_TRUE(f.listed);
    EXPECT_EQ(f.due, 4);
    EXPECT_EQ(f.inflight, 0);
    EXPECT_EQ(f.dead, 0);

    // untrack --delete: out of the queue and gone from Redis, in one step.
    r = kw({"untrack", "t:c", "--delete"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(server_.command({"EXISTS", "t:c"}), "0");
    EXPECT_EQ(inspect("keys").due, 3);
    r = kw({"untrack", "t:c"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("'t:c' was not tracked"), std::string::npos) << describe(r);

    // NX/XX conditions and adopt's refusals are failures (1) that write nothing. (The NX key
    // has no TTL: t:a's second may be over by now on a slow, sanitized build.)
    ASSERT_EQ(server_.command({"SET", "t:nx", "plain"}), "OK");
    r = kw({"track", "t:nx", "other", "--ttl", "5s", "--nx"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("the key exists; nothing was written"), std::string::npos) << describe(r);
    EXPECT_EQ(server_.command({"GET", "t:nx"}), "plain");
    EXPECT_EQ(server_.command({"TTL", "t:nx"}), "-1");
    r = kw({"track", "t:x", "v", "--ttl", "5s", "--xx"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_EQ(server_.command({"EXISTS", "t:x"}), "0");
    r = kw({"adopt", "t:missing"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("no such key"), std::string::npos) << describe(r);
    ASSERT_EQ(server_.command({"SET", "t:forever", "v"}), "OK");
    r = kw({"adopt", "t:forever"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("has no TTL"), std::string::npos) << describe(r);
    EXPECT_EQ(inspect("keys").due, 3);

    // Expired while no watcher ran: Redis deletes them now and nobody hears it...
    wait_due_now("keys", 3);
    server_.command({"EXISTS", "t:a", "t:b", "t:d"});
    f = inspect("keys");
    EXPECT_EQ(f.due_now, 3);
    EXPECT_GE(f.oldest_overdue_ms, 0);
    // ...and the watch started afterwards still prints each one, found by its sweeper.
    r = watch_until({}, 3);
    EXPECT_EQ(r.status, 0) << describe(r);
    const auto got = json_lines(r);
    ASSERT_EQ(got.size(), 3u) << describe(r);
    for (const auto &j : got) {
        EXPECT_EQ(j.at("event"), "expired") << j;
        EXPECT_EQ(j.at("source"), "sweep") << j;
        EXPECT_EQ(j.at("queue"), "keys") << j;
        EXPECT_EQ(j.at("attempt"), 1) << j;
        EXPECT_EQ(j.at("db"), 0) << j;
        EXPECT_GT(j.at("deadline_ms").get<int64_t>(), 0) << j;
        EXPECT_GE(j.at("ts_ms").get<int64_t>(), j.at("deadline_ms").get<int64_t>()) << j;
        EXPECT_EQ(j.at("id").get<std::string>().rfind("q:keys:", 0), 0u) << j;
        EXPECT_EQ(j.at("node"), "127.0.0.1:" + std::to_string(server_.port())) << j;
    }
    const Json *a = find_line(got, "t:a");
    ASSERT_NE(a, nullptr) << describe(r);
    EXPECT_EQ(a->at("deadline_ms"), deadline_a);
    EXPECT_FALSE(a->contains("value")) << "no snapshot was asked for: " << *a;
    const Json *b = find_line(got, "t:b");
    ASSERT_NE(b, nullptr) << describe(r);
    EXPECT_EQ(b->at("value_b64"), "yv4=") << "the binary snapshot, base64";
    EXPECT_FALSE(b->contains("value"));
    ASSERT_NE(find_line(got, "t:d"), nullptr) << describe(r);

    f = inspect("keys");
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.due_now, 0);
    EXPECT_EQ(f.inflight, 0) << "watch acknowledged every line it printed";
    EXPECT_EQ(f.dead, 0);
}

TEST_F(CliTest, TrackBadInputIsRefusedAndWritesNothing) {
    struct Case {
        std::vector<std::string> args;
        int status;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"track", "k", "v", "--ttl", "0"}, 2, "--ttl: '0' is zero: a tracked key needs a TTL"},
        {{"track", "k", "v", "--ttl=-5s"}, 2, "--ttl: '-5s' is negative"},
        {{"track", "k", "v", "--ttl", "5x"}, 2, "--ttl: '5x' is not a duration"},
        {{"track", "k", "v"}, 2, "--ttl is required"},
        {{"track", "k", "v", "--ttl", "1s", "--nx", "--xx"}, 2, "--nx excludes --xx"},
        {{"track", "", "v", "--ttl", "1s"}, 2, "KEY is empty"},
        {{"track", "k", "12345", "--ttl", "1s", "--conf", "limits.value_bytes=4"},
         2,
         "the value is 5 bytes; limits.value_bytes is 4.*--conf limits.value_bytes="},
        {{"track", "kkkkk", "v", "--ttl", "1s", "-c", "limits.key_bytes=4"},
         2,
         "the key is 5 bytes; limits.key_bytes is 4"},
        {{"track", "k", "v", "--ttl", "1s", "--conf", "limits.value_bytes"},
         2,
         "--conf 'limits.value_bytes': write NAME=VALUE"},
        {{"track", "k", "v", "--ttl", "1s", "--conf", "no.such=1"}, 2, "--conf no.such: "},
        {{"track", "k", "v", "--ttl", "1s", "--namespace", "a:{b}"}, 2, "--namespace: "},
        {{"untrack", ""}, 2, "KEY is empty"},
        {{"adopt", ""}, 2, "KEY is empty"},
    };
    for (const auto &c : cases) {
        const Result r = kw(c.args);
        EXPECT_EQ(r.status, c.status) << describe(r);
        EXPECT_TRUE(std::regex_search(r.err, std::regex(c.message))) << c.message << "\n"
                                                                     << describe(r);
    }
    // A URL that does not parse is bad input; one nobody answers at is a failure.
    Process bad_url(KW_CLI_PATH, {"track", "k", "v", "--ttl", "1s", "--redis", "http://x"}, dir_,
                    "badurl", {});
    Result r = bad_url.finish(30s, false);
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_NE(r.err.find("--redis: bad Redis URL 'http://x'"), std::string::npos) << describe(r);
    Process refused(KW_CLI_PATH,
                    {"track", "k", "v", "--ttl", "1s", "--redis", "redis://127.0.0.1:1"}, dir_,
                    "refused", {});
    r = refused.finish(30s, false);
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("cannot connect to Redis at 127.0.0.1:1"), std::string::npos)
        << describe(r);
    EXPECT_NE(r.err.find("check --redis URL (or KEYWATCH_REDIS_URL)"), std::string::npos)
        << describe(r);

    EXPECT_EQ(server_.command({"DBSIZE"}), "0") << "bad input must write nothing";
    const Figures f = inspect("keys");
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.dead, 0);
}

TEST_F(CliTest, RedisUrlComesFromTheEnvironment) {
    Process::Options opts;
    opts.env["KEYWATCH_REDIS_URL"] = url_;
    // (-c before the positionals takes one NAME=VALUE, not KEY and VALUE too.)
    Process p(KW_CLI_PATH, {"track", "-c", "limits.value_bytes=100", "env:k", "v", "--ttl", "1h"},
              dir_, "env", opts);
    const Result r = p.finish(30s, false);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(server_.command({"GET", "env:k"}), "v");
    EXPECT_EQ(inspect("keys").due, 1);
}

// ---- what cannot work is said at once, with what to do ---------------------------------

// keywatch ARGS --redis URL for another URL than the test server's plain one.
Result run_with_url(const std::string &url, std::vector<std::string> args, const std::string &dir,
                    const std::string &name) {
    args.push_back("--redis");
    args.push_back(url);
    Process p(KW_CLI_PATH, args, dir, name, Process::Options{});
    return p.finish(60s, false);
}

TEST_F(CliTest, WatchWithAMissingDbExitsAtOnceNamingTheDb) {
    const Result r = run_with_url(url_ + "/99", {"watch", "--duration", "20s"}, dir_, "missing-db");
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("SELECT 99"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("out of range"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("reconnecting"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("leave out --redis"), std::string::npos) << describe(r);
}

TEST_F(CliTest, WatchAsAnAclUserWithoutPsubscribeNamesTheRuleNotAPrivateServer) {
    ASSERT_EQ(
        server_.command({"ACL", "SETUSER", "w", "on", ">wpw", "~*", "&*", "+@all", "-psubscribe"}),
        "OK");
    const std::string url = "redis://w:wpw@127.0.0.1:" + std::to_string(server_.port());
    const Result r = run_with_url(url, {"watch", "--duration", "20s"}, dir_, "noperm");
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("'psubscribe'"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("ACL SETUSER w +publish +psubscribe"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("lost the"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("leave out --redis"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("wpw"), std::string::npos) << "the password was printed: " << describe(r);
}

TEST_F(CliTest, WatchAsAnAclUserWithoutEvalNamesTheRule) {
    ASSERT_EQ(server_.command(
                  {"ACL", "SETUSER", "w", "on", ">wpw", "~*", "&*", "+@all", "-eval", "-evalsha"}),
              "OK");
    const std::string url = "redis://w:wpw@127.0.0.1:" + std::to_string(server_.port());
    const Result r = run_with_url(url, {"watch", "--duration", "20s"}, dir_, "noeval");
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("'eval'"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("ACL SETUSER w +@scripting"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("leave out --redis"), std::string::npos) << describe(r);
}

// track meets the same refusal in its own call: the same status and rule as watch's, and
// nothing written.
TEST_F(CliTest, TrackAsAnAclUserWithoutEvalNamesTheRuleAsWatchDoes) {
    ASSERT_EQ(server_.command(
                  {"ACL", "SETUSER", "w", "on", ">wpw", "~*", "&*", "+@all", "-eval", "-evalsha"}),
              "OK");
    const std::string url = "redis://w:wpw@127.0.0.1:" + std::to_string(server_.port());
    const Result r = run_with_url(url, {"track", "noeval:k", "v", "--ttl", "1h"}, dir_, "noeval");
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("(KW_ERR_AUTH)"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("ACL SETUSER w +@scripting"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("wpw"), std::string::npos) << "the password was printed: " << describe(r);
    EXPECT_EQ(server_.command({"EXISTS", "noeval:k"}), "0");
}

TEST_F(CliTest, TrackAgainstAPausedServerNamesTheServerAndTheTimeout) {
    server_.pause();
    const Result r =
        kw({"track", "paused:k", "v", "--ttl", "1h", "-c", "redis.connect_timeout=1s"});
    server_.resume();
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("127.0.0.1:" + std::to_string(server_.port())), std::string::npos)
        << describe(r);
    EXPECT_NE(r.err.find("redis.connect_timeout (1s)"), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find("CLUSTER SHARDS"), std::string::npos) << describe(r);
}

// ---- schedule, cancel, reschedule ----------------------------------------------------

TEST_F(CliTest, ScheduleCancelRescheduleThenWatchDeliversTasksInOrder) {
    Result r = kw({"schedule", "jobs", "j1", "payload-1", "--in", "300ms"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(all_digits(lines(r.out).at(0))) << describe(r);
    EXPECT_NE(r.err.find("due in 300ms"), std::string::npos) << describe(r);

    // A time in the past is not an error: due now, and the output says so.
    const int64_t before = redis_now_ms();
    r = kw({"schedule", "jobs", "j2", "payload-2", "--at", "2020-01-01T00:00:00Z", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    Json j = Json::parse(r.out);
    EXPECT_EQ(j.at("queue"), "jobs");
    EXPECT_EQ(j.at("id"), "j2");
    EXPECT_EQ(j.at("past"), true);
    EXPECT_GE(j.at("due_ms").get<int64_t>(), before);
    EXPECT_LE(j.at("due_ms").get<int64_t>(), redis_now_ms());
    EXPECT_NE(r.err.find("--at 2020-01-01T00:00:00.000Z is"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("in the past, so it is due now"), std::string::npos) << describe(r);

    // --at as ISO-8601 UTC and as epoch ms are taken to the millisecond.
    const int64_t later = (redis_now_ms() / 1000 + 3600) * 1000 + 250;
    const std::string iso = keywatch::cli::format_utc_ms(later);
    r = kw({"schedule", "jobs", "j3", "payload-3", "--at", iso});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(lines(r.out).at(0), std::to_string(later)) << iso;
    r = kw({"schedule", "jobs", "j4", "payload-4", "--at", std::to_string(later + 1)});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(lines(r.out).at(0), std::to_string(later + 1));
    r = kw({"schedule", "jobs", "j4", "other", "--in", "1s", "--nx"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("a task with this id exists"), std::string::npos) << describe(r);

    Figures f = inspect("jobs");
    EXPECT_EQ(f.due, 4);
    EXPECT_EQ(f.inflight, 0);

    r = kw({"cancel", "jobs", "j3"});
    ASSERT_EQ(r.status, 0) << describe(r);
    r = kw({"cancel", "jobs", "j3", "--json"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("no task 'j3' in queue 'jobs' is waiting"), std::string::npos)
        << describe(r);
    EXPECT_TRUE(r.out.empty()) << describe(r);
    r = kw({"reschedule", "jobs", "j4", "--in", "200ms", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(Json::parse(r.out).at("past"), false);
    r = kw({"reschedule", "jobs", "nope", "--in", "1s"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("no task 'nope' in queue 'jobs' is waiting"), std::string::npos)
        << describe(r);
    EXPECT_EQ(inspect("jobs").due, 3);

    wait_due_now("jobs", 3);
    r = watch_until({"--queues", "jobs"}, 3);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("tasks of queue jobs"), std::string::npos) << describe(r);
    const auto got = json_lines(r);
    ASSERT_EQ(got.size(), 3u) << describe(r);
    // Due order: j2 (the past), j1 (300ms), j4 (rescheduled to 200ms after j1 was due).
    std::vector<std::string> order;
    for (const auto &line : got) {
        order.push_back(line.at("key"));
        EXPECT_EQ(line.at("event"), "task") << line;
        EXPECT_EQ(line.at("source"), "task") << line;
        EXPECT_EQ(line.at("queue"), "jobs") << line;
        EXPECT_EQ(line.at("attempt"), 1) << line;
        EXPECT_EQ(line.at("value"), "payload-" + line.at("key").get<std::string>().substr(1))
            << line;
        EXPECT_EQ(line.at("id").get<std::string>().rfind("q:jobs:", 0), 0u) << line;
    }
    EXPECT_EQ(order.front(), "j2");
    EXPECT_EQ(std::count(order.begin(), order.end(), "j1"), 1);
    EXPECT_EQ(std::count(order.begin(), order.end(), "j4"), 1);

    f = inspect("jobs", {"--queues", "jobs"});
    EXPECT_TRUE(f.listed) << "--queues lists a queue even when it is empty";
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);
    EXPECT_EQ(f.dead, 0);
}

TEST_F(CliTest, ScheduleBadInputIsRefusedAndWritesNothing) {
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"schedule", "jobs", "j", "p"}, "say when: --in DURATION .* or --at TIME"},
        {{"schedule", "jobs", "j", "p", "--in", "1s", "--at", "0"}, "--in excludes --at"},
        {{"schedule", "jobs", "j", "p", "--in", "soon"}, "--in: 'soon' is not a duration"},
        {{"schedule", "jobs", "j", "p", "--in=-1s"}, "--in: '-1s' is negative"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-13-01T00:00:00Z"}, "month 13 does not exist"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-02-29T10:00:00Z"}, "day 29 does not exist"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-11-21T24:00:00Z"}, "hour 24 is out of range"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-11-21 10:00:00Z"}, "expected 'T'"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-11-21T10:00:00"}, "must end with Z"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-11-21T10:00:00+01:00"}, "only UTC"},
        {{"schedule", "jobs", "j", "p", "--at", "2026-11-21T10:00:00.1234Z"}, "1 to 3 digits"},
        {{"schedule", "jobs", "j", "p", "--at", "tomorrow"}, "'tomorrow' is not a time"},
        {{"schedule", "keys", "j", "p", "--in", "1s"}, "'keys' is the key-tracking queue"},
        {{"schedule", "a:b", "j", "p", "--in", "1s"}, "queue name 'a:b' is not valid"},
        {{"schedule", "jobs", "", "p", "--in", "1s"}, "ID is empty"},
        {{"schedule", "jobs", "j", "123456", "--in", "1s", "-c", "limits.value_bytes=4"},
         "the payload is 6 bytes"},
        {{"cancel", "keys", "j"}, "'keys' is the key-tracking queue"},
        {{"reschedule", "jobs", "j"}, "say when"},
        {{"reschedule", "jobs", "j", "--at", "99999999999999999"}, "later than 9999-12-31"},
    };
    for (const auto &c : cases) {
        const Result r = kw(c.args);
        EXPECT_EQ(r.status, 2) << describe(r);
        EXPECT_TRUE(std::regex_search(r.err, std::regex(c.message))) << c.message << "\n"
                                                                     << describe(r);
        EXPECT_TRUE(r.out.empty()) << describe(r);
    }
    EXPECT_EQ(server_.command({"DBSIZE"}), "0") << "bad input must write nothing";
    EXPECT_FALSE(inspect("jobs").listed);
}

// Every deadline is at most 9999-12-31T23:59:59.999Z: durations are checked as now + duration.
TEST_F(CliTest, DeadlinesAfterTheMaximumAreBadInputAndWriteNothing) {
    ASSERT_EQ(kw({"schedule", "jobs", "waiting", "p", "--in", "1h", "-q"}).status, 0);
    const std::string score = server_.command({"ZSCORE", "kw:jobs:{0}:due", "waiting"});
    const std::string limit = "after 9999-12-31T23:59:59.999Z";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"schedule", "jobs", "x", "p", "--in", "106751991166d"},
         "--in: '106751991166d' .*" + limit},
        {{"schedule", "jobs", "x", "p", "--in", "3000000d", "--nx"}, "--in: .*" + limit},
        {{"schedule", "jobs", "x", "p", "--at", "253402300800000"}, "--at: .*later than 9999"},
        {{"reschedule", "jobs", "waiting", "--in", "106751991166d"}, "--in: .*" + limit},
        {{"reschedule", "jobs", "waiting", "--at", "253402300800000"}, "--at: .*later than 9999"},
        {{"track", "k", "v", "--ttl", "106751991166d"}, "--ttl: '106751991166d' .*" + limit},
        {{"track", "k", "v", "--ttl", "3000000d", "--snapshot"}, "--ttl: .*" + limit},
        {{"track", "k", "v", "--ttl", "1s", "-c", "lease=106751991166d"},
         "--conf lease: .*" + limit},
        {{"watch", "--duration", "106751991166d"}, "--duration: .*" + limit},
        {{"watch", "--duration", "1s", "-c", "retry.max=106751991166d"}, "--conf retry.max: "},
    };
    for (const auto &c : cases) {
        const Result r = kw(c.first);
        EXPECT_EQ(r.status, 2) << describe(r);
        EXPECT_TRUE(std::regex_search(r.err, std::regex(c.second))) << c.second << "\n"
                                                                    << describe(r);
        EXPECT_TRUE(r.out.empty()) << describe(r);
    }
    EXPECT_EQ(server_.command({"EXISTS", "k"}), "0") << "nothing written";
    EXPECT_EQ(server_.command({"EXISTS", "kw:keys:{0}:due"}), "0");
    EXPECT_EQ(server_.command({"ZCARD", "kw:jobs:{0}:due"}), "1") << "no task x";
    EXPECT_EQ(server_.command({"ZSCORE", "kw:jobs:{0}:due", "waiting"}), score);
}

// One rule: an empty option value is bad input; a variable set but empty counts as unset.
TEST_F(CliTest, EmptyValuesAreBadInputAndAnEmptyVariableCountsAsUnset) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"watch", "--redis", ""}, "keywatch watch: --redis: the value is empty"},
        {{"watch", "--redis="}, "keywatch watch: --redis: the value is empty"},
        {{"watch", "--duration", "", "--redis", url_}, "--duration: the value is empty"},
        {{"demo", "--redis", ""}, "keywatch demo: --redis: the value is empty"},
        {{"track", "k", "v", "--ttl", "", "--redis", url_}, "--ttl: the value is empty"},
        {{"track", "k", "v", "--ttl=", "--redis", url_},
         "keywatch track: --ttl: the value is empty"},
        {{"track", "k", "v", "--ttl", "1s", "--redis", ""}, "--redis: the value is empty"},
        {{"schedule", "jobs", "j", "p", "--in", "", "--redis", url_}, "--in: the value is empty"},
        {{"dead", "replay", "jobs", "--entry=", "--redis", url_},
         "keywatch dead replay: --entry: the value is empty"},
        {{"inspect", "--namespace", "", "--redis", url_}, "--namespace: the value is empty"},
    };
    int n = 0;
    for (const auto &c : cases) {
        Process p(KW_CLI_PATH, c.first, dir_, "empty" + std::to_string(n++), {});
        const Result r = p.finish(30s, false);
        EXPECT_EQ(r.status, 2) << describe(r);
        EXPECT_NE(r.err.find(c.second), std::string::npos) << c.second << "\n" << describe(r);
    }
    EXPECT_EQ(server_.command({"DBSIZE"}), "0") << "bad input must write nothing";

    // KEYWATCH_REDIS_URL set but empty: as if unset (watch starts its private server).
    Process::Options empty_env;
    empty_env.env["KEYWATCH_REDIS_URL"] = "";
    Process watch(KW_CLI_PATH, {"watch", "--duration", "200ms"}, dir_, "emptyenv", empty_env);
    Result r = watch.finish(30s, false);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("KEYWATCH_REDIS_URL is set but empty: it counts as unset"),
              std::string::npos)
        << describe(r);
    EXPECT_NE(r.err.find("started a private redis-server"), std::string::npos) << describe(r);
    // ... and does not conflict with --conf redis.url.
    Process track(KW_CLI_PATH, {"track", "env:k", "v", "--ttl", "1h", "-c", "redis.url=" + url_},
                  dir_, "emptyenv2", empty_env);
    r = track.finish(30s, false);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(server_.command({"GET", "env:k"}), "v");
}

// --redis (or KEYWATCH_REDIS_URL) and --conf redis.url naming two servers is refused.
TEST_F(CliTest, TwoServersForOneCommandAreRefused) {
    const std::string other = "redis://u:secret@127.0.0.1:1";
    for (const std::vector<std::string> &args :
         {std::vector<std::string>{"watch", "--duration", "1s", "-c", "redis.url=" + other},
          std::vector<std::string>{"track", "k", "v", "--ttl", "1h", "-c", "redis.url=" + other}}) {
        const Result r = kw(args);
        EXPECT_EQ(r.status, 2) << describe(r);
        EXPECT_NE(r.err.find("names " + url_ +
                             " and --conf redis.url names "
                             "redis://u:***@127.0.0.1:1: give the server once"),
                  std::string::npos)
            << describe(r);
        EXPECT_EQ(r.err.find("secret"), std::string::npos) << describe(r);
    }
    Process::Options env;
    env.env["KEYWATCH_REDIS_URL"] = other;
    Process p(KW_CLI_PATH, {"track", "k", "v", "--ttl", "1h", "-c", "redis.url=" + url_}, dir_,
              "envconflict", env);
    Result r = p.finish(30s, false);
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_EQ(server_.command({"DBSIZE"}), "0") << "nothing written";
    // The same server twice is no conflict; --conf redis.url alone names the server.
    EXPECT_EQ(kw({"track", "k", "v", "--ttl", "1h", "-c", "redis.url=" + url_}).status, 0);
    Process alone(KW_CLI_PATH, {"track", "k2", "v", "--ttl", "1h", "-c", "redis.url=" + url_}, dir_,
                  "alone", {});
    r = alone.finish(30s, false);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(server_.command({"EXISTS", "k", "k2"}), "2");
}

// ---- dead letters --------------------------------------------------------------------

// An engine of the C API that rejects every task of queue `jobs` (so each goes to the
// dead-letter stream at once), run until `n` items are dead.
void reject_tasks(const std::string &url, int64_t n) {
    kw_conf_t *conf = kw_conf_new();
    kw_filter_t *filter = kw_filter_new();
    kw_engine_t *engine = nullptr;
    char err[512] = "";
    ASSERT_EQ(kw_conf_set(conf, "redis.url", url.c_str(), err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_conf_set(conf, "track.enable", "false", err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_filter_set(filter, "events", "task", err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_filter_set(filter, "queue", "jobs", err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_engine_new(conf, &engine, err, sizeof err), KW_OK) << err;
    auto reject = [](kw_event_t *ev, void *) {
        kw_event_set_error(ev, "rejected by the test");
        return static_cast<int>(KW_RESULT_REJECT);
    };
    ASSERT_EQ(kw_engine_add_handler(engine, filter, reject, nullptr, nullptr), KW_OK);
    ASSERT_EQ(kw_engine_start(engine), KW_OK) << kw_engine_last_error(engine);
    EXPECT_TRUE(kwtest::stat_reaches(engine, "items.dead", n, nullptr, 15s));
    kw_engine_stop(engine, -1);
    kw_engine_free(engine);
    kw_filter_free(filter);
    kw_conf_free(conf);
}

TEST_F(CliTest, DeadLettersListReplayAndPurge) {
    ASSERT_EQ(kw({"schedule", "jobs", "d1", "payload-1", "--in", "0"}).status, 0);
    reject_tasks(url_, 1);
    Figures f = inspect("jobs");
    EXPECT_EQ(f.dead, 1);
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);

    Result r = kw({"dead", "list", "jobs"});
    ASSERT_EQ(r.status, 0) << describe(r);
    auto got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_TRUE(
        std::regex_match(got[0].at("entry").get<std::string>(), std::regex("[0-9]+-[0-9]+")))
        << got[0];
    EXPECT_EQ(got[0].at("id"), "d1");
    EXPECT_EQ(got[0].at("attempts"), 1);
    EXPECT_EQ(got[0].at("error"), "rejected by the test");
    EXPECT_EQ(got[0].at("payload"), "payload-1");
    EXPECT_EQ(lines(r.out).at(0).rfind("{\"entry\":", 0), 0u) << "entry comes first";

    // Replay: due now with attempts reset, and watch delivers it.
    r = kw({"dead", "replay", "jobs"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(lines(r.out).at(0), "1");
    f = inspect("jobs");
    EXPECT_EQ(f.dead, 0);
    EXPECT_EQ(f.due, 1);
    // All replayed: nothing left to replay is a failure, like cancel finding nothing.
    r = kw({"dead", "replay", "jobs", "--json"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_TRUE(r.out.empty()) << describe(r);
    EXPECT_NE(r.err.find("queue 'jobs' has no dead letters"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("nothing was replayed"), std::string::npos) << describe(r);
    r = watch_until({"--queues", "jobs"}, 1);
    got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_EQ(got[0].at("key"), "d1");
    EXPECT_EQ(got[0].at("value"), "payload-1");
    EXPECT_EQ(got[0].at("attempt"), 1);
    f = inspect("jobs", {"--queues", "jobs"});
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);
    EXPECT_EQ(f.dead, 0);

    // Three more dead letters: list with a limit, replay one, purge one, purge the rest.
    for (const char *id : {"d2", "d3", "d4"})
        ASSERT_EQ(kw({"schedule", "jobs", id, std::string("p-") + id, "--in", "0", "-q"}).status,
                  0);
    reject_tasks(url_, 3);
    EXPECT_EQ(inspect("jobs").dead, 3);
    r = kw({"dead", "list", "jobs", "--limit", "2"});
    ASSERT_EQ(r.status, 0) << describe(r);
    got = json_lines(r);
    ASSERT_EQ(got.size(), 2u) << describe(r);
    EXPECT_NE(r.err.find("there are more: raise --limit"), std::string::npos) << describe(r);
    const std::string oldest = got[0].at("id"), second = got[1].at("id");
    const std::string second_entry = got[1].at("entry");

    r = kw({"dead", "replay", "jobs", "--limit", "1", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(Json::parse(r.out).at("replayed"), 1);
    f = inspect("jobs");
    EXPECT_EQ(f.dead, 2);
    EXPECT_EQ(f.due, 1);
    ASSERT_EQ(kw({"cancel", "jobs", oldest}).status, 0) << "the replayed one is the oldest";

    r = kw({"dead", "purge", "jobs", "--entry", second_entry});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(lines(r.out).at(0), "1");
    r = kw({"dead", "list", "jobs"});
    got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_NE(got[0].at("id"), second);
    EXPECT_EQ(inspect("jobs").dead, 1);

    r = kw({"dead", "purge", "jobs", "--json"});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(Json::parse(r.out).at("purged"), 1);
    f = inspect("jobs", {"--queues", "jobs"});
    EXPECT_TRUE(f.listed);
    EXPECT_EQ(f.dead, 0);
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);
    r = kw({"dead", "list", "jobs"});
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_TRUE(r.out.empty()) << describe(r);
    EXPECT_NE(r.err.find("queue 'jobs' has no dead letters"), std::string::npos) << describe(r);
}

TEST_F(CliTest, DeadLetterBadInputSaysWhatToDo) {
    ASSERT_EQ(kw({"schedule", "jobs", "d1", "p", "--in", "0", "-q"}).status, 0);
    reject_tasks(url_, 1);

    Result r = kw({"dead", "replay", "nosuch"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(
        r.err.find("queue 'nosuch' has no dead letters (unknown queue, none yet, or all replayed)"),
        std::string::npos)
        << describe(r);
    EXPECT_NE(r.err.find("queues with dead letters: jobs (1)"), std::string::npos) << describe(r);
    r = kw({"dead", "replay", "jobs", "--entry", "1-0"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("no dead letter 1-0"), std::string::npos) << describe(r);
    r = kw({"dead", "purge", "jobs", "--entry", "1-0"});
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("no dead letter 1-0"), std::string::npos) << describe(r);

    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"dead", "replay", "jobs", "--entry", "abc"}, "'abc' is not a dead-letter entry id"},
        {{"dead", "replay", "jobs", "--entry", "1795241184005"}, "not a dead-letter entry id"},
        {{"dead", "replay", "jobs", "--entry", "1-0", "--limit", "1"}, "excludes"},
        {{"dead", "purge", "jobs", "--entry", "x-1"}, "not a dead-letter entry id"},
        {{"dead", "list", "jobs", "--limit", "0"}, "'0' is not a count"},
        {{"dead", "list", "a:b"}, "queue name 'a:b' is not valid"},
        {{"dead", "replay", ""}, "queue name '' is not valid"},
        {{"dead"}, "A subcommand is required"},
    };
    for (const auto &c : cases) {
        r = kw(c.args);
        EXPECT_EQ(r.status, 2) << describe(r);
        EXPECT_TRUE(std::regex_search(r.err, std::regex(c.message))) << c.message << "\n"
                                                                     << describe(r);
    }
    const Figures f = inspect("jobs");
    EXPECT_EQ(f.dead, 1) << "nothing was replayed or purged";
    EXPECT_EQ(f.due, 0);
}

// ---- watch ---------------------------------------------------------------------------

TEST_F(CliTest, WatchThatCannotPrintHandsTheItemBack) {
    ASSERT_EQ(kw({"track", "t:p", "v", "--ttl", "100ms", "-q"}).status, 0);
    wait_due_now("keys", 1);
    // stdout is a pipe nobody reads: the line cannot be written, so the item is not acked.
    Process::Options closed;
    closed.stdout_closed = true;
    Result r =
        kw({"watch", "--duration", "10s", "-c", "retry.base=100ms", "-c", "lease=2s"}, closed);
    EXPECT_EQ(r.status, 0) << "a closed stdout stops the watch quietly\n" << describe(r);
    EXPECT_EQ(r.err.find("cannot write to stdout"), std::string::npos) << "EPIPE is quiet";
    // Handed back for a retry (due). If the retry came due and was claimed again just as the
    // watch stopped, it is in flight until its (short) lease ends: never acked, never lost.
    Figures f = inspect("keys");
    EXPECT_EQ(f.due + f.inflight, 1);
    EXPECT_EQ(f.dead, 0);
    r = watch_until({}, 1);
    const auto got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_EQ(got[0].at("key"), "t:p");
    // 2, or more if the first watch claimed it again before it stopped.
    EXPECT_GE(got[0].at("attempt").get<int>(), 2) << got[0];
    f = inspect("keys");
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);
}

// A pipe cannot say what its reader consumed: watch --help says what watch promises, and
// where reliable hand-off and look-only watching are.
TEST_F(CliTest, WatchHelpSaysWhatItPromises) {
    Process p(KW_CLI_PATH, {"watch", "--help"}, dir_, "help", {});
    const Result r = p.finish(30s, false);
    EXPECT_EQ(r.status, 0) << describe(r);
    for (const char *text : {"an item is acknowledged once its line was written to stdout",
                             "A pipe cannot tell what its reader consumed", "(| head -3)",
                             "with the exec, stream or webhook handler plugin",
                             "use the C API (kw_engine_add_handler", "Use --observe to print"})
        EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << describe(r);
    // The plugins ship (handlers/): nothing of them is "planned".
    EXPECT_EQ(r.out.find("planned"), std::string::npos) << describe(r);
}

TEST_F(CliTest, ObserveAndKeyFiltersLeaveTrackedKeysInTheQueue) {
    // Subscribed before the key is tracked: Redis's active expiry may publish `expired`
    // as soon as the TTL runs out, before a slow (sanitized) watch would have subscribed.
    auto watch = kw_background({"watch", "--observe", "--duration", "10s"});
    ASSERT_TRUE(watch->wait_stderr("keywatch: watching", 15s));
    ASSERT_EQ(kw({"track", "t:o", "v", "--ttl", "600ms", "-q"}).status, 0);
    wait_due_now("keys", 1);
    server_.command({"EXISTS", "t:o"});  // Redis expires it and publishes `expired` now
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    Result r;
    do {
        std::this_thread::sleep_for(20ms);
        r = watch->peek();
    } while (lines(r.out).empty() && std::chrono::steady_clock::now() < deadline);
    r = watch->finish(20s, true);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("observing only (--observe)"), std::string::npos) << describe(r);
    auto got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_EQ(got[0].at("key"), "t:o");
    EXPECT_EQ(got[0].at("source"), "notification");
    EXPECT_FALSE(got[0].contains("queue")) << "a live event, not a claimed item";
    EXPECT_EQ(inspect("keys").due, 1) << "--observe claims nothing";

    // A key filter cannot choose which tracked keys to claim: the watch claims none.
    r = kw({"watch", "--prefix", "other:", "--duration", "500ms"});
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.err.find("--prefix: tracked keys are not claimed by this watch"), std::string::npos)
        << describe(r);
    EXPECT_EQ(inspect("keys").due, 1);

    r = kw({"watch", "--observe", "--queues", "jobs"});
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_NE(r.err.find("excludes --observe"), std::string::npos) << describe(r);
    r = kw({"watch", "--queues", "a:b", "--duration", "100ms"});
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_NE(r.err.find("--queues: "), std::string::npos) << describe(r);
    r = kw({"watch", "--conf", "lease", "--duration", "100ms"});
    EXPECT_EQ(r.status, 2) << describe(r);

    // Without a filter, the watch claims it (found by the sweeper: the key is gone).
    r = watch_until({}, 1);
    got = json_lines(r);
    ASSERT_EQ(got.size(), 1u) << describe(r);
    EXPECT_EQ(got[0].at("source"), "sweep");
    EXPECT_EQ(got[0].at("queue"), "keys");
    const Figures f = inspect("keys");
    EXPECT_EQ(f.due, 0);
    EXPECT_EQ(f.inflight, 0);
}

// ---- events and their notify flags -------------------------------------------------------

// A watch of `events` with --notify-enable against a server whose notify-keyspace-events
// is empty: keywatch must switch on the flag each event needs. `write` makes Redis publish
// them; the watch must print one line per event, and the server's flags must then hold
// `flag`.
void watch_sets_the_flag_and_delivers(
    const std::string &events, char flag, const std::vector<std::vector<std::string>> &write,
    const std::vector<std::pair<std::string, std::string>> &want) {
    keywatch::RedisProcess::Options o;
    o.notify = "";
    keywatch::RedisProcess server(o);
    server.start();
    char tmpl[] = "/tmp/kwcli.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    {
        Process watch(KW_CLI_PATH,
                      {"watch", "--events", events, "--notify-enable", "--redis", server.url()},
                      dir, "watch", {});
        ASSERT_TRUE(watch.wait_stderr("keywatch: watching", 15s)) << describe(watch.peek());
        const auto config = lines(server.command({"CONFIG", "GET", "notify-keyspace-events"}));
        const std::string flags = config.size() == 2 ? config[1] : "";
        EXPECT_NE(flags.find(flag), std::string::npos) << "flags " << flags << " lack " << flag;
        for (const auto &cmd : write) server.command(cmd);
        Result r;
        const bool arrived = kwtest::wait_until([&] {
            r = watch.peek();
            return lines(r.out).size() >= want.size();
        });
        r = watch.finish(20s, true);
        EXPECT_TRUE(arrived) << describe(r);
        const auto got = json_lines(r);
        ASSERT_EQ(got.size(), want.size()) << describe(r);
        for (size_t i = 0; i < want.size(); i++) {
            EXPECT_EQ(got[i].at("event"), want[i].first) << describe(r);
            EXPECT_EQ(got[i].at("key"), want[i].second) << describe(r);
        }
    }
    server.stop();
    std::filesystem::remove_all(dir);
}

// Issue 22 item 3: a server on ::1 named redis://[::1]:PORT. `track` writes the key and
// its queue item; `watch` delivers it by its sweeper (Redis's own expiry off) and the line
// names the node as the URL does.
TEST(CliIpv6, TrackAndWatchOverBracketedUrl) {
    keywatch::RedisProcess::Options o;
    o.host = "::1";
    o.extra = {"--enable-debug-command", "local"};  // DEBUG SET-ACTIVE-EXPIRE
    keywatch::RedisProcess server(o);
    server.start();
    const std::string node = "[::1]:" + std::to_string(server.port());
    ASSERT_EQ(server.url(), "redis://" + node);
    ASSERT_EQ(server.command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"}), "OK");
    char tmpl[] = "/tmp/kwcli.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    {
        Process track(KW_CLI_PATH,
                      {"track", "v6:a", "v", "--ttl", "300ms", "--redis", server.url()}, dir,
                      "track", {});
        Result t = track.finish(60s, false);
        ASSERT_EQ(t.status, 0) << describe(t);
        Process watch(KW_CLI_PATH, {"watch", "--redis", server.url()}, dir, "watch", {});
        ASSERT_TRUE(watch.wait_stderr("keywatch: watching", 15s)) << describe(watch.peek());
        Result r;
        const bool arrived =
            kwtest::wait_until([&] { return !lines((r = watch.peek()).out).empty(); });
        r = watch.finish(20s, true);
        ASSERT_TRUE(arrived) << describe(r);
        const auto got = json_lines(r);
        ASSERT_EQ(got.size(), 1u) << describe(r);
        EXPECT_EQ(got[0].at("key"), "v6:a") << describe(r);
        EXPECT_EQ(got[0].at("node"), node) << describe(r);
    }
    server.stop();
    std::filesystem::remove_all(dir);
}

TEST(CliEvents, WatchZremrangebyscoreSwitchesOnItsFlagAndDelivers) {
    // Redis publishes zremrangebyscore (never "zrembyscore") under flag z.
    watch_sets_the_flag_and_delivers(
        "zremrangebyscore", 'z',
        {{"ZADD", "z:1", "1", "a", "2", "b", "3", "c"}, {"ZREMRANGEBYSCORE", "z:1", "0", "1"}},
        {{"zremrangebyscore", "z:1"}});
}

TEST(CliEvents, WatchSortstoreSwitchesOnTheListFlagAndDelivers) {
    // SORT ... STORE publishes sortstore under flag l (sort.c), not g.
    watch_sets_the_flag_and_delivers(
        "sortstore", 'l', {{"RPUSH", "l:1", "3", "1", "2"}, {"SORT", "l:1", "STORE", "l:sorted"}},
        {{"sortstore", "l:sorted"}});
}

// ---- demo ----------------------------------------------------------------------------

TEST(CliDemo, TracksKeysAndATaskAndReportsLatenessAndFigures) {
    char tmpl[] = "/tmp/kwdemo.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const auto start = std::chrono::steady_clock::now();
    Process demo(KW_CLI_PATH, {"demo"}, tmpl, "demo", {});
    const Result r = demo.finish(30s, false);
    const auto took = std::chrono::steady_clock::now() - start;
    std::filesystem::remove_all(tmpl);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_LT(took, 10s) << "the demo must stay short";

    const auto got = json_lines(r);
    int expired = 0, tasks = 0;
    for (const auto &j : got) {
        if (j.at("event") == "expired") {
            expired++;
            EXPECT_EQ(j.at("queue"), "keys") << j;
            EXPECT_TRUE(j.at("source") == "sweep" || j.at("source") == "notification") << j;
        }
        if (j.at("event") == "task") {
            tasks++;
            EXPECT_EQ(j.at("source"), "task") << j;
            EXPECT_EQ(j.at("queue"), "demo") << j;
        }
    }
    EXPECT_EQ(expired, 3) << describe(r);
    EXPECT_EQ(tasks, 1) << describe(r);
    bool binary_value = false;
    for (const auto &j : got)
        if (j.value("key_b64", "") == "YmluOsr+" && j.value("value_b64", "") == "iVBORw==")
            binary_value = true;
    EXPECT_TRUE(binary_value) << describe(r);
    EXPECT_TRUE(std::regex_search(r.err, std::regex("expired session:alice \\(source [a-z]+\\): "
                                                    "handled -?[0-9]+ ms after its deadline")))
        << describe(r);
    EXPECT_NE(r.err.find("task email:welcome:alice (source task): handled"), std::string::npos)
        << describe(r);
    EXPECT_EQ(r.err.find("EXISTS"), std::string::npos) << "nothing touches the keys";
    EXPECT_TRUE(std::regex_search(r.err, std::regex("QUEUE +DUE +DUE NOW +IN FLIGHT +DEAD")))
        << describe(r);
    EXPECT_TRUE(std::regex_search(r.err, std::regex("\n  keys +0 +0 +0 +0 +-"))) << describe(r);
    EXPECT_TRUE(std::regex_search(r.err, std::regex("\n  demo +0 +0 +0 +0 +-"))) << describe(r);
}

// Issue 10 item 6: `--connect-timeout 20s` waits for a server that is not up yet instead of
// exiting on the first "Connection refused".
TEST_F(CliTest, WatchWaitsForAServerThatComesUpWithinTheConnectTimeout) {
    keywatch::RedisProcess::Options o;
    o.port = keywatch::RedisProcess::free_port();
    keywatch::RedisProcess later(o);
    Process watch(KW_CLI_PATH,
                  {"watch", "--redis", "redis://127.0.0.1:" + std::to_string(o.port),
                   "--connect-timeout", "20s"},
                  dir_, "later", {});
    std::this_thread::sleep_for(2s);
    Result r = watch.peek();
    EXPECT_LT(r.status, 0) << "the watch gave up before the server came up\n" << describe(r);
    later.start();
    ASSERT_TRUE(watch.wait_stderr("keywatch: watching", 30s)) << describe(watch.peek());
    ASSERT_EQ(later.command({"SET", "came-up-later", "v", "PX", "50"}), "OK");
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (watch.peek().out.find("came-up-later") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        later.command({"EXISTS", "came-up-later"});
        std::this_thread::sleep_for(50ms);
    }
    r = watch.finish(20s, true);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.out.find("came-up-later"), std::string::npos) << describe(r);
    later.stop();
}

// Issue 10 item 9b: a private redis-server is no answer to a cluster that cannot be
// reached: no such hint when the URL lists several seeds or redis.mode=cluster is asked for.
TEST_F(CliTest, UnreachableClusterSeedsGetNoPrivateServerHint) {
    const std::string a =
        "redis://127.0.0.1:" + std::to_string(keywatch::RedisProcess::free_port());
    const std::string b =
        "redis://127.0.0.1:" + std::to_string(keywatch::RedisProcess::free_port());
    const std::vector<std::vector<std::string>> cases = {
        {"watch", "--redis", a + "," + b, "--connect-timeout", "500ms"},
        {"watch", "--redis", a, "-c", "redis.mode=cluster", "--connect-timeout", "500ms"},
    };
    int n = 0;
    for (const auto &args : cases) {
        Process p(KW_CLI_PATH, args, dir_, "seeds" + std::to_string(n++), {});
        const Result r = p.finish(60s, false);
        EXPECT_EQ(r.status, 1) << describe(r);
        EXPECT_NE(r.err.find("refused"), std::string::npos) << describe(r);
        EXPECT_EQ(r.err.find("private redis-server"), std::string::npos) << describe(r);
    }
    // One standalone URL still gets it.
    Process one(KW_CLI_PATH, {"watch", "--redis", a, "--connect-timeout", "500ms"}, dir_, "one",
                {});
    const Result r = one.finish(60s, false);
    EXPECT_EQ(r.status, 1) << describe(r);
    EXPECT_NE(r.err.find("leave out --redis"), std::string::npos) << describe(r);
}

}  // namespace

// ---- Redis Cluster ---------------------------------------------------------------------

// Issue 25: a redis+sentinel:// URL passes through --redis whole, commas and all (it was cut
// at the first comma, as if it were a list of cluster seeds, and refused as an unknown
// scheme); track, watch and inspect use the master the sentinels name, and check lists
// every sentinel, the master and the replicas.
TEST(CliSentinel, UrlPassesThroughWholeAndCheckListsEverySentinel) {
    char tmpl[] = "/tmp/kwsent.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    int runs = 0;
    auto kw = [&](std::vector<std::string> args) {
        Process p(KW_CLI_PATH, args, dir, "s" + std::to_string(runs++), {});
        return p.finish(60s, false);
    };
    const std::string down =
        "redis+sentinel://127.0.0.1:" + std::to_string(keywatch::RedisProcess::free_port()) +
        ",127.0.0.1:" + std::to_string(keywatch::RedisProcess::free_port()) + "/mymaster";
    const Result nobody = kw({"watch", "--redis", down, "--connect-timeout", "500ms"});
    EXPECT_NE(nobody.status, 0) << describe(nobody);
    EXPECT_NE(nobody.err.find("cannot watch " + down + ": no sentinel gave a working master"),
              std::string::npos)
        << describe(nobody);

    keywatch::RedisSentinels deployment;
    deployment.start();
    const std::string url = deployment.url();
    const std::string master = "127.0.0.1:" + std::to_string(deployment.node(0).port());
    const Result t = kw({"track", "via-sentinel", "v", "--ttl", "1h", "--redis", url});
    ASSERT_EQ(t.status, 0) << describe(t);
    EXPECT_EQ(deployment.node(0).command({"EXISTS", "via-sentinel"}), "1");
    const Result check = kw({"check", "--redis", url});
    EXPECT_EQ(check.status, 0) << describe(check);
    std::vector<std::string> report = lines(check.out);
    ASSERT_FALSE(report.empty()) << describe(check);
    EXPECT_NE(report[0].find("keywatch check " + url + " (sentinel)"), std::string::npos)
        << describe(check);
    for (size_t i = 0; i < deployment.sentinels(); i++) {
        const std::string s = "127.0.0.1:" + std::to_string(deployment.sentinel(i).port());
        EXPECT_NE(check.out.find("sentinel                " + s + ": names " + master +
                                 " as master 'mymaster'"),
                  std::string::npos)
            << s << "\n"
            << describe(check);
    }
    EXPECT_NE(check.out.find("connection              " + master + ": connected"),
              std::string::npos)
        << describe(check);
    for (size_t i = 1; i < deployment.nodes(); i++)
        EXPECT_NE(check.out.find("replica notifications   127.0.0.1:" +
                                 std::to_string(deployment.node(i).port())),
                  std::string::npos)
            << describe(check);
    deployment.sentinel(0).stop();
    const Result one_down = kw({"check", "--redis", url});
    EXPECT_EQ(one_down.status, 0) << describe(one_down);
    EXPECT_NE(one_down.out.find("warn  sentinel                127.0.0.1:" +
                                std::to_string(deployment.sentinel(0).port())),
              std::string::npos)
        << describe(one_down);
    std::filesystem::remove_all(dir);
}

TEST(CliCluster, VerbsTakeAClusterUrlAndInspectShowsEveryMaster) {
    char tmpl[] = "/tmp/kwclus.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    keywatch::RedisCluster cluster;
    cluster.start();
    const std::string url = cluster.seed_url();
    int runs = 0;
    auto kw = [&](std::vector<std::string> args) {
        args.push_back("--redis");
        args.push_back(url);
        Process p(KW_CLI_PATH, args, dir, "c" + std::to_string(runs++), {});
        return p.finish(60s, false);
    };
    // Keys on every master, tracked through whichever node the URL names.
    for (int i = 0; i < 30; i++) {
        const Result t = kw({"track", "cluster:" + std::to_string(i), "v", "--ttl", "1h"});
        ASSERT_EQ(t.status, 0) << describe(t);
    }
    const Result j = kw({"inspect", "--json"});
    ASSERT_EQ(j.status, 0) << describe(j);
    const Json doc = Json::parse(j.out);
    EXPECT_EQ(doc.at("mode"), "cluster");
    int64_t total = 0;
    for (const auto &q : doc.at("queues"))
        if (q.at("queue") == "keys") total = q.at("due");
    EXPECT_EQ(total, 30);
    ASSERT_EQ(doc.at("nodes").size(), 3u);
    int64_t per_master = 0;
    for (const auto &n : doc.at("nodes")) {
        int64_t here = 0;
        for (const auto &q : n.at("queues"))
            if (q.at("queue") == "keys") here = q.at("due");
        EXPECT_GT(here, 0) << "every master holds some of the keys: " << n;
        per_master += here;
    }
    EXPECT_EQ(per_master, 30);
    const Result t = kw({"inspect"});
    ASSERT_EQ(t.status, 0) << describe(t);
    EXPECT_TRUE(std::regex_search(t.out, std::regex("MASTER +QUEUE +DUE"))) << describe(t);
    int master_rows = 0;
    for (const auto &line : lines(t.out))
        if (std::regex_search(line, std::regex("^127\\.0\\.0\\.1:[0-9]+ +keys +[0-9]+")))
            master_rows++;
    EXPECT_EQ(master_rows, 3) << describe(t);
    const Result u = kw({"untrack", "cluster:7", "--delete"});
    EXPECT_EQ(u.status, 0) << describe(u);
    std::filesystem::remove_all(dir);
}

// Waits (generously) until a running node lists `node` as failed in CLUSTER NODES.
static bool wait_until_failed(keywatch::RedisCluster &cluster, const std::string &node) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
        for (size_t i = 0; i < cluster.size(); i++) {
            if (!cluster.node(i).running()) continue;
            std::stringstream in(cluster.node(i).command({"CLUSTER", "NODES"}));
            for (std::string line; std::getline(in, line);)
                if (line.find(" " + node + "@") != std::string::npos &&
                    line.find("master,fail") != std::string::npos)
                    return true;
        }
        std::this_thread::sleep_for(100ms);
    }
    return false;
}

// The index of the replica of the master `m` (the first one its INFO names).
static size_t replica_of(keywatch::RedisCluster &cluster, size_t m) {
    const std::string want = "master_port:" + std::to_string(cluster.node(m).port());
    for (size_t i = 0; i < cluster.size(); i++)
        if (i != m && cluster.node(i).running() &&
            cluster.node(i).command({"INFO", "replication"}).find(want) != std::string::npos)
            return i;
    ADD_FAILURE() << "no replica of node " << m;
    return m;
}

// Issue 10 item 9a: the promoted replica was never connected before: the watch says it
// subscribed to a new master, not that it "reconnected ... and subscribed again".
TEST(CliCluster, WatchNamesAPromotedReplicaAsANewMaster) {
    char tmpl[] = "/tmp/kwclus.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    keywatch::RedisCluster cluster;
    cluster.start();
    const size_t master = static_cast<size_t>(cluster.master_of_slot(1000));
    const size_t replica = replica_of(cluster, master);
    const std::string promoted = "127.0.0.1:" + std::to_string(cluster.node(replica).port());
    Process watch(KW_CLI_PATH,
                  {"watch", "--redis", cluster.seed_url(), "-c", "cluster.refresh=500ms"}, dir,
                  "failover", {});
    ASSERT_TRUE(watch.wait_stderr("keywatch: watching", 30s)) << describe(watch.peek());
    cluster.node(master).kill9();
    ASSERT_TRUE(cluster.wait_healthy(30000)) << "the replica was not promoted";
    const bool named = watch.wait_stderr("subscribed to new master " + promoted, 30s);
    const Result r = watch.finish(20s, true);
    EXPECT_TRUE(named) << describe(r);
    EXPECT_EQ(r.err.find("reconnected to " + promoted), std::string::npos) << describe(r);
    EXPECT_EQ(r.status, 0) << describe(r);
    std::filesystem::remove_all(dir);
}

// A real cluster and a scratch folder for the keywatch binary run against it (`--redis` a
// node still running); the folder goes with it.
class ClusterCli {
  public:
    ClusterCli() {
        char tmpl[] = "/tmp/kwclus.XXXXXX";
        if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        cluster.start();
    }
    ~ClusterCli() { std::filesystem::remove_all(dir_); }
    Result kw(std::vector<std::string> args) {
        args.insert(args.end(), {"--redis", cluster.seed_url()});
        Process p(KW_CLI_PATH, args, dir_, "c" + std::to_string(runs_++), {});
        return p.finish(60s, false);
    }

    keywatch::RedisCluster cluster;

  private:
    std::string dir_;
    int runs_ = 0;
};

// The tracked keys an inspect document counts as due.
static int64_t keys_due(const Json &doc) {
    for (const auto &q : doc.at("queues"))
        if (q.at("queue") == "keys") return q.at("due").get<int64_t>();
    return -1;
}

// Issue 10 item 7: a shard whose master and replica are both down cannot be read: inspect
// names it, counts its slots as unread and exits 1 instead of printing partial totals as
// if they were the whole picture.
TEST(CliCluster, InspectNamesAShardThatIsDownAndExitsNonZero) {
    ClusterCli run;
    keywatch::RedisCluster &cluster = run.cluster;
    for (int i = 0; i < 30; i++) {
        const Result t = run.kw({"track", "shard:" + std::to_string(i), "v", "--ttl", "1h"});
        ASSERT_EQ(t.status, 0) << describe(t);
    }
    ASSERT_TRUE(cluster.wait_replicated());
    const int slot =
        std::stoi(cluster.node(cluster.masters().at(0)).command({"CLUSTER", "KEYSLOT", "shard:0"}));
    const size_t down = static_cast<size_t>(cluster.master_of_slot(slot));
    const size_t replica = replica_of(cluster, down);
    const std::string down_node = "127.0.0.1:" + std::to_string(cluster.node(down).port());
    cluster.node(replica).kill9();
    cluster.node(down).kill9();
    // Whether or not the cluster has marked the master failed yet, it is named.
    const Result j = run.kw({"inspect", "--json"});
    EXPECT_EQ(j.status, 1) << describe(j);
    const Json doc = Json::parse(j.out);
    EXPECT_EQ(doc.at("complete"), false) << j.out;
    EXPECT_GT(doc.at("unread_slots").get<int64_t>(), 0) << j.out;
    bool named = false;
    for (const auto &u : doc.at("unreachable")) named = named || u.at("node") == down_node;
    EXPECT_TRUE(named) << j.out;
    EXPECT_LT(keys_due(doc), 30) << "the dead shard's keys cannot be counted";
    EXPECT_NE(j.err.find("incomplete"), std::string::npos) << describe(j);
    // Once the cluster has marked it failed, as well.
    ASSERT_TRUE(wait_until_failed(cluster, down_node));
    const Result t = run.kw({"inspect"});
    EXPECT_EQ(t.status, 1) << describe(t);
    EXPECT_NE(t.out.find("NOT READ"), std::string::npos) << describe(t);
    EXPECT_NE(t.out.find(down_node), std::string::npos) << describe(t);
    EXPECT_NE(t.err.find(down_node), std::string::npos) << describe(t);
    EXPECT_NE(t.err.find("incomplete"), std::string::npos) << describe(t);
}

// Issue 20 item 16: queue keys in slots that no shard holds any more (DELSLOTS everywhere;
// cluster-require-full-coverage no, so every node still serves the rest) used to make
// inspect fail with no figures ("no master serves slot 144 now"). Every other figure is
// read; the unread slots are counted and named, and the exit status is 1.
TEST(CliCluster, InspectReadsTheRestWhenQueueKeysSitInUnassignedSlots) {
    ClusterCli run;
    keywatch::RedisCluster &cluster = run.cluster;
    keywatch::RedisProcess &any = cluster.node(cluster.masters().at(0));
    auto slot_of = [&](const std::string &key) {
        return std::stoi(any.command({"CLUSTER", "KEYSLOT", key}));
    };
    // Three keys in slots 100-199 (one hash tag), five elsewhere.
    std::string tag;
    for (int i = 0; tag.empty(); i++)
        if (int s = slot_of("u" + std::to_string(i)); s >= 100 && s <= 199)
            tag = "u" + std::to_string(i);
    std::vector<std::string> inside, outside;
    for (int i = 0; i < 3; i++) inside.push_back("{" + tag + "}:" + std::to_string(i));
    for (int i = 0; outside.size() < 5; i++)
        if (int s = slot_of("out:" + std::to_string(i)); s < 100 || s > 199)
            outside.push_back("out:" + std::to_string(i));
    for (auto *keys : {&inside, &outside})
        for (const auto &k : *keys) ASSERT_EQ(run.kw({"track", k, "v", "--ttl", "1h"}).status, 0);
    for (size_t i = 0; i < cluster.size(); i++)
        ASSERT_EQ(cluster.node(i).command({"CLUSTER", "DELSLOTSRANGE", "100", "199"}), "OK");
    ASSERT_TRUE(kwtest::wait_until([&] {
        for (size_t i = 0; i < cluster.size(); i++)
            if (cluster.node(i).command({"CLUSTER", "INFO"}).find("cluster_slots_assigned:16284") ==
                std::string::npos)
                return false;
        return true;
    }));

    const Result j = run.kw({"inspect", "--json"});
    EXPECT_EQ(j.status, 1) << describe(j);
    const Json doc = Json::parse(j.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << describe(j);
    EXPECT_EQ(doc.at("complete"), false) << j.out;
    EXPECT_EQ(doc.at("unread_slots"), 100) << j.out;
    EXPECT_EQ(doc.at("unassigned"), Json::parse("[[100,199]]")) << j.out;
    EXPECT_EQ(doc.at("unreachable"), Json::array()) << "every master answers: " << j.out;
    EXPECT_EQ(keys_due(doc), static_cast<int64_t>(outside.size()))
        << "every key outside them: " << j.out;

    const Result t = run.kw({"inspect"});
    EXPECT_EQ(t.status, 1) << describe(t);
    const size_t heading = t.out.find("NOT READ");
    ASSERT_NE(heading, std::string::npos) << describe(t);
    EXPECT_NE(t.out.find("slots 100-199", heading), std::string::npos) << describe(t);
    EXPECT_NE(t.err.find("slots 100-199"), std::string::npos) << describe(t);
    EXPECT_NE(t.err.find("incomplete: the queues of 100 slot(s)"), std::string::npos)
        << describe(t);
}

// The same with full coverage required (Redis's default) and the slots deleted on their
// master only: that master sees the cluster down and refuses every key command
// (CLUSTERDOWN), which used to fail inspect with no figures. The other masters' figures
// are read; the refusing master is named with its answer and its slots counted as unread.
TEST(CliCluster, InspectReadsTheOtherMastersWhenOneAnswersClusterDown) {
    ClusterCli run;
    keywatch::RedisCluster &cluster = run.cluster;
    for (int i = 0; i < 30; i++)
        ASSERT_EQ(run.kw({"track", "cov:" + std::to_string(i), "v", "--ttl", "1h"}).status, 0);
    const size_t owner = static_cast<size_t>(cluster.master_of_slot(100));
    const std::string owner_node = "127.0.0.1:" + std::to_string(cluster.node(owner).port());
    int64_t elsewhere = 0;  // keys the other masters serve
    for (int i = 0; i < 30; i++)
        elsewhere +=
            cluster.master_of_slot(std::stoi(cluster.node(owner).command(
                {"CLUSTER", "KEYSLOT", "cov:" + std::to_string(i)}))) != static_cast<int>(owner);
    for (size_t i = 0; i < cluster.size(); i++)
        cluster.node(i).command({"CONFIG", "SET", "cluster-require-full-coverage", "yes"});
    ASSERT_EQ(cluster.node(owner).command({"CLUSTER", "DELSLOTSRANGE", "100", "199"}), "OK");
    ASSERT_TRUE(kwtest::wait_until([&] {
        return cluster.node(owner).command({"CLUSTER", "INFO"}).find("cluster_state:fail") !=
               std::string::npos;
    }));

    const Result j = run.kw({"inspect", "--json"});
    EXPECT_EQ(j.status, 1) << describe(j);
    const Json doc = Json::parse(j.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << describe(j);
    EXPECT_EQ(doc.at("complete"), false) << j.out;
    bool named = false;
    for (const auto &u : doc.at("unreachable"))
        named = named || (u.at("node") == owner_node && u.at("error").get<std::string>().find(
                                                            "CLUSTERDOWN") != std::string::npos);
    EXPECT_TRUE(named) << j.out;
    EXPECT_GE(doc.at("unread_slots").get<int64_t>(), 100) << j.out;
    EXPECT_LT(doc.at("unread_slots").get<int64_t>(), 16384) << "the others were read: " << j.out;
    // Every key on the other masters is counted, none of the refusing master's.
    EXPECT_EQ(keys_due(doc), elsewhere) << j.out;
    for (const auto &n : doc.at("nodes"))
        EXPECT_EQ(n.at("reachable"), n.at("node") != owner_node) << n.dump();

    const Result t = run.kw({"inspect"});
    EXPECT_EQ(t.status, 1) << describe(t);
    const size_t heading = t.out.find("NOT READ");
    ASSERT_NE(heading, std::string::npos) << describe(t);
    EXPECT_NE(t.out.find(owner_node, heading), std::string::npos) << describe(t);
    EXPECT_NE(t.out.find(owner_node + "  (not read)"), std::string::npos)
        << "no zeros for what was not read: " << describe(t);
    EXPECT_NE(t.err.find("incomplete"), std::string::npos) << describe(t);
}
