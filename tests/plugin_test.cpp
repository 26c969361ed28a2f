// Handler plugins through the C API (kw_engine_add_plugin) against a real redis-server:
// every refusal of the loader with its message (the broken plugins of tests/plugins/), the
// engine still usable after them, the host table (log, counter, routed Redis command), a
// retry then an ack seeing attempt 2, a C++ plugin's exception, and the built-ins
// session_index and stream end to end.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/redis_fixture.h"
#include "tests/server_calls.h"
#include "tests/support/test_certificates.h"

namespace {

using namespace kwtest;
using Options = std::vector<std::pair<std::string, std::string>>;

std::string test_plugin(const std::string &name) {
    return std::string(KW_TEST_PLUGIN_DIR) + "/" + name + ".so";
}

// The lines of text (a list read with LRANGE) that start with prefix.
size_t count_lines(const std::string &text, const std::string &prefix) {
    std::istringstream in(text);
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
        n += line.compare(0, prefix.size(), prefix) == 0;
    return n;
}

// kw_engine_add_plugin with options as pairs; the status, and the message in *err.
int add_plugin(kw_engine_t *engine, const std::string &plugin, const char *instance,
               const Options &options, std::string *err, const kw_filter_t *filter = nullptr) {
    std::vector<const char *> argv;
    for (const auto &nv : options) {
        argv.push_back(nv.first.c_str());
        argv.push_back(nv.second.c_str());
    }
    argv.push_back(nullptr);
    char buf[2048] = "";
    int rc = kw_engine_add_plugin(engine, plugin.c_str(), instance, filter, argv.data(), buf,
                                  sizeof buf);
    if (err) *err = buf;
    return rc;
}

// tests/webhook_server.py on a free loopback port; killed by pid at the end. With tls
// (its certificate, key and optionally the CA of the client certificates it requires), https.
class WebhookServer {
  public:
    explicit WebhookServer(const std::vector<std::string> &tls = {})
        : scheme_(tls.empty() ? "http" : "https") {
        char tmpl[] = "/tmp/kw_webhook_XXXXXX";
        if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        std::string port_file = dir_ + "/port", log = dir_ + "/requests";
        std::vector<std::string> args = {"python3", KW_WEBHOOK_SERVER, port_file, log, "s3cret"};
        args.insert(args.end(), tls.begin(), tls.end());
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            execvp("python3", argv.data());
            _exit(127);
        }
        if (!wait_until([&] { return std::ifstream(port_file).good(); }))
            throw std::runtime_error("the webhook test server did not start");
        std::ifstream(port_file) >> port_;
    }
    ~WebhookServer() {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        std::string rm = "rm -rf " + dir_;
        if (system(rm.c_str()) != 0) std::cerr << "could not remove " << dir_ << "\n";
    }
    std::string url(const std::string &path) const {
        return scheme_ + "://127.0.0.1:" + std::to_string(port_) + path;
    }
    // The requests received so far (one JSON object each), for one path.
    std::vector<nlohmann::json> requests(const std::string &path) const {
        std::vector<nlohmann::json> out;
        std::ifstream in(dir_ + "/requests");
        for (std::string line; std::getline(in, line);) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_discarded() && j["path"] == path) out.push_back(j);
        }
        return out;
    }
    // /hold: the requests open now, and the most open at once so far (files the server
    // keeps); go() lets every held request answer.
    int open_now() const { return read_int("open"); }
    int max_open() const { return read_int("max_open"); }
    void go() const { std::ofstream(dir_ + "/go") << "go"; }

  private:
    int read_int(const std::string &name) const {
        int n = 0;
        std::ifstream(dir_ + "/" + name) >> n;
        return n;
    }
    std::string scheme_;
    std::string dir_;
    pid_t pid_ = -1;
    int port_ = 0;
};

class PluginTest : public RedisTest {
  protected:
    void SetUp() override {
        RedisTest::SetUp();
        setenv("KEYWATCH_PLUGIN_PATH", KW_HANDLERS_DIR, 1);
        configure({});
        kw_conf_t *conf = kw_conf_new();
        char err[256];
        ASSERT_EQ(kw_conf_set(conf, "redis.url", redis().url().c_str(), err, sizeof err), KW_OK);
        ASSERT_EQ(kw_client_new(conf, &client_, err, sizeof err), KW_OK) << err;
        kw_conf_free(conf);
        redis_client_ = client();
    }
    void TearDown() override {
        engine_.reset();
        kw_client_free(client_);
        RedisTest::TearDown();
    }

    // A fresh engine with these options besides the defaults: options are read when the
    // engine is made, so a test configures before anything else touches engine_.
    void configure(const Options &options) {
        engine_ = std::make_unique<Engine>(redis().url());
        engine_->set("retry.base", "50ms");
        engine_->set("retry.max", "100ms");
        for (const auto &nv : options) engine_->set(nv.first, nv.second);
        engine_->watch_logs(&logs_);
    }
    // Loads a plugin; a refusal is a test failure with its message.
    void load(const std::string &plugin, const char *instance, const Options &options) {
        std::string err;
        ASSERT_EQ(add_plugin(engine_->get(), plugin, instance, options, &err), KW_OK) << err;
    }
    // Loads a plugin for the events a filter of name/value pairs selects.
    void load_filtered(const Options &filter, const std::string &plugin, const char *instance,
                       const Options &options, Engine *engine = nullptr) {
        kw_filter_t *f = kw_filter_new();
        char ferr[256];
        for (const auto &nv : filter)
            ASSERT_EQ(kw_filter_set(f, nv.first.c_str(), nv.second.c_str(), ferr, sizeof ferr),
                      KW_OK)
                << ferr;
        std::string err;
        int rc = add_plugin((engine ? engine : engine_.get())->get(), plugin, instance, options,
                            &err, f);
        kw_filter_free(f);
        ASSERT_EQ(rc, KW_OK) << err;
    }
    // Loads a plugin for the keys starting with prefix.
    void load_for(const std::string &prefix, const std::string &plugin, const char *instance,
                  const Options &options) {
        load_filtered({{"prefix", prefix}}, plugin, instance, options);
    }
    // Expects a refusal whose message holds every part.
    void refused(const std::string &plugin, const char *instance, const Options &options,
                 const std::vector<std::string> &parts) {
        std::string err;
        int rc = add_plugin(engine_->get(), plugin, instance, options, &err);
        EXPECT_NE(rc, KW_OK) << plugin << " was loaded";
        for (const auto &p : parts)
            EXPECT_TRUE(contains(err, p)) << "'" << p << "' not in: " << err;
    }
    void track(const std::string &key, const std::string &value, int64_t ttl_ms = 100) {
        ASSERT_EQ(kw_client_track(client_, key.data(), key.size(), value.data(), value.size(),
                                  ttl_ms, KW_TRACK_SNAPSHOT, nullptr),
                  KW_OK);
    }
    std::string redis_cmd(const std::vector<std::string> &args) {
        return redis_client_->command(args);
    }
    // An item of task queue "jobs", due after delay_ms.
    void schedule(const std::string &id, int64_t delay_ms = 0) {
        EXPECT_EQ(kw_client_schedule(client_, "jobs", id.data(), id.size(), "p", 1, 0, delay_ms, 0,
                                     nullptr),
                  KW_OK)
            << kw_client_last_error(client_);
    }
    int64_t redis_now() {
        std::string t = redis_cmd({"TIME"});
        size_t nl = t.find('\n');
        return std::stoll(t.substr(0, nl)) * 1000 + std::stoll(t.substr(nl + 1)) / 1000;
    }
    // The item's score in its queue's `part` ZSET (due or inflight); -1: not there.
    int64_t score(const std::string &queue, const std::string &part, const std::string &id) {
        std::string s = redis_cmd({"ZSCORE", "kw:" + queue + ":{0}:" + part, id});
        return s == "(nil)" ? -1 : std::stoll(s);
    }
    // Waits until `last`, the key tracked last, is past its deadline: every key tracked
    // before it is then due, and an engine started now claims them together.
    void wait_due(const std::string &last) {
        ASSERT_TRUE(wait_until([&] { return redis_cmd({"EXISTS", last}) == "0"; })) << last;
    }
    // Tracks sessions sess:0..n-1 of users 0..4 (user i % 5, the value), and starts the
    // engine once they are all due.
    void track_sessions_then_start(int n) {
        for (int i = 0; i < n; i++) track("sess:" + std::to_string(i), std::to_string(i % 5));
        wait_due("sess:" + std::to_string(n - 1));
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    }
    bool gone(const std::string &queue, const std::string &id) {
        return score(queue, "due", id) < 0 && score(queue, "inflight", id) < 0;
    }

    LogSink logs_;
    std::unique_ptr<Engine> engine_;
    kw_client_t *client_ = nullptr;
    std::unique_ptr<RedisClient> redis_client_;
};

TEST_F(PluginTest, EachRefusalSaysWhatIsWrongAndWhatToDo) {
    refused("no_such_plugin", nullptr, {},
            {"\"no_such_plugin\" not found", KW_HANDLERS_DIR, "KEYWATCH_PLUGIN_PATH"});
    refused("/nonexistent/x.so", nullptr, {}, {"/nonexistent/x.so", "no such file"});
    std::string text = std::string(::testing::TempDir()) + "/kw_not_elf.so";
    std::ofstream(text) << "not a library\n";
    refused(text, nullptr, {}, {text, "is not an ELF file", "ELF shared object", "-shared -fPIC"});
    unlink(text.c_str());
    refused(KW_TEST_OBJECT_FILE, nullptr, {}, {"relocatable object", "not a shared object"});
    refused(test_plugin("bad_undefined"), nullptr, {},
            {"cannot be loaded", "kw_test_missing_symbol", "ldd -r"});
    refused(test_plugin("bad_no_entry"), nullptr, {},
            {"does not export kw_handler_entry", "KW_HANDLER_DEFINE"});
    refused(test_plugin("bad_abi"), nullptr, {},
            {"bad_abi.so", "handler ABI 2", "requires ABI 1", "rebuild", KW_VERSION_STRING});
    refused(test_plugin("bad_short"), nullptr, {},
            {"descriptor is 16 bytes", "needs at least", "sizeof(kw_plugin_descriptor_t)"});
    refused(test_plugin("bad_null_handle"), nullptr, {}, {"handle callback is NULL", ".handle"});
    refused(test_plugin("probe"), "p1", {{"fail_init", "the moon is not reachable"}},
            {"plugin instance \"p1\"", "probe 0.0.1", "init failed: the moon is not reachable"});
    refused(test_plugin("probe"), "p1", {{"colour", "red"}},
            {"plugin instance \"p1\"", "unknown option \"colour\"", "record", "retry_first"});
    refused(test_plugin("probe"), "bad name", {}, {"instance name \"bad name\" is not valid"});
    refused("session_index", "sessions", {{"index", "u:{user}"}, {"type", "list"}},
            {"plugin instance \"sessions\"", "option \"type\"", "\"list\"", "set, hash or zset"});
    refused("session_index", "sessions", {}, {"option \"index\"", "{user}"});
    refused("stream", "out", {{"stream", "a}b"}},
            {"plugin instance \"out\"", "option \"stream\"", "slot"});
    refused("webhook", "hook", {{"url", "ftp://example.com/x"}},
            {"plugin instance \"hook\"", "option \"url\"", "http://host[:port]/path"});
    refused("webhook", "hook", {{"url", "http://u:secret@example.com/x"}},
            {"option \"url\": a user or password in the URL is not sent", "\"secret\""});
    refused("webhook", "hook", {{"url", "https://example.com/x"}, {"client_key", "/k"}},
            {"plugin instance \"hook\"", "option \"client_key\" needs \"client_cert\""});
    refused("webhook", "hook", {{"url", "https://example.com/x"}, {"ca_file", "/no/such.pem"}},
            {"option \"ca_file\" = \"/no/such.pem\": cannot read it"});
    refused("exec", "run", {{"argv1", "x"}}, {"plugin instance \"run\"", "option \"argv0\""});
    load(test_plugin("probe"), "p1", {});
    refused(test_plugin("probe"), "p1", {},
            {"an instance named \"p1\" is already loaded", "another instance name"});

    // Nothing refused was added: the engine runs the one loaded instance.
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("after-refusals", "v");
    EXPECT_TRUE(engine_->stat_reaches("plugin.p1.handled", 1));
}

// The built-ins are found beside the library that runs (here: in the build tree, the
// plugins built there) with no KEYWATCH_PLUGIN_PATH; a value ending in .so is a file,
// relative to the working directory, never "<value>.so" on the search path.
TEST_F(PluginTest, BuiltInsAreFoundBesideTheLibraryAndAValueEndingInSoIsAFile) {
    unsetenv("KEYWATCH_PLUGIN_PATH");
    load("stream", "out", {{"stream", "audit"}});
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    ASSERT_EQ(chdir(KW_TEST_PLUGIN_DIR), 0);
    std::string err;
    const int rc = add_plugin(engine_->get(), "probe.so", "relative", {}, &err);
    ASSERT_EQ(chdir(cwd), 0);
    EXPECT_EQ(rc, KW_OK) << err;
    refused("absent.so", nullptr, {}, {"\"./absent.so\" cannot be opened", "check the path"});
    std::string tried;
    EXPECT_NE(add_plugin(engine_->get(), "absent", nullptr, {}, &tried), KW_OK);
    EXPECT_TRUE(contains(tried, std::string(KW_HANDLERS_DIR) + "/absent.so")) << tried;
}

// docs/plugins.md quotes the host's own refusal, with this keywatch's version.
TEST_F(PluginTest, TheAbiRefusalInDocsPluginsMdIsTheHostsOwn) {
    std::string err;
    ASSERT_NE(add_plugin(engine_->get(), test_plugin("bad_abi"), nullptr, {}, &err), KW_OK);
    const std::string after_path = err.substr(err.find(".so\"") + 4);
    EXPECT_TRUE(contains(after_path, KW_VERSION_STRING)) << err;
    std::ifstream in(KW_PLUGINS_DOC);
    const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(contains(doc, after_path)) << "docs/plugins.md does not quote: " << after_path;
}

// A plugin's counters are in the statistics snapshot (row plugin.<counter>, label
// "<instance>.<counter>") and the JSON, not only behind kw_engine_stat.
TEST_F(PluginTest, CountersAreInTheSnapshotAndTheJson) {
    load(test_plugin("probe"), "probe-a", {});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("job:1", "v");
    auto sample = [&](std::string *row) {
        kw_stats_t *s = nullptr;
        int64_t v = -1;
        if (kw_engine_stats(engine_->get(), &s) != KW_OK) return v;
        for (size_t i = 0; i < kw_stats_count(s); i++)
            if (std::string(kw_stats_label_value(s, i)) == "probe-a.handled") {
                v = kw_stats_value(s, i);
                *row = std::string(kw_stats_name(s, i)) + " " + kw_stats_label_name(s, i) + " " +
                       (kw_stats_type(s, i) == KW_STAT_COUNTER ? "counter" : "?");
            }
        kw_stats_free(s);
        return v;
    };
    std::string row;
    ASSERT_TRUE(wait_until([&] { return sample(&row) == 1; })) << row;
    EXPECT_EQ(row, "plugin.<counter> counter counter");
    char *json = nullptr;
    ASSERT_EQ(kw_engine_stats_json(engine_->get(), &json), KW_OK);
    EXPECT_EQ(nlohmann::json::parse(json)["plugin.probe-a.handled"], 1) << json;
    kw_free(json);
}

TEST_F(PluginTest, RetryThenAckSeesAttemptTwoAndCounterAndLogReachTheHost) {
    load(test_plugin("probe"), "probe", {{"record", "calls"}, {"retry_first", "1"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("job:1", "v");
    ASSERT_TRUE(wait_until([&] {
        return redis_cmd({"LLEN", "calls"}) == "2";
    })) << redis_cmd({"LRANGE", "calls", "0", "-1"});
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), "job:1:1\njob:1:2");
    EXPECT_TRUE(engine_->stat_reaches("plugin.probe.handled", 2));
    EXPECT_TRUE(engine_->stat_reaches("plugin.probe.never_counted", 0));
    int64_t v;
    EXPECT_EQ(kw_engine_stat(engine_->get(), "plugin.nobody.handled", &v), KW_ERR_INVALID_ARG);
    EXPECT_NE(logs_.find(KW_LOG_INFO,
                         [](const std::string &m) {
                             return m == "plugin probe: handled job:1 attempt 2";
                         }),
              "")
        << logs_.describe();
}

TEST_F(PluginTest, APluginsLogLinesNameItsInstanceAndTheEventTheyAreAbout) {
    FieldsLog fields;
    engine_->watch_log_fields(&fields);  // replaces the plain callback configure() set
    load(test_plugin("probe"), "probe-a", {});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("job:1", "v");
    FieldsLog::Line handled;
    ASSERT_TRUE(wait_until([&] { return fields.find("handled job:1", &handled); }))
        << fields.describe();
    // The message as kw_log_fn gets it; the fields: the instance and the event's id (the
    // tracked item's, "q:keys:<deadline>:<hex of the key>").
    EXPECT_EQ(handled.message, "plugin probe-a: handled job:1 attempt 1");
    EXPECT_EQ(handled.level, KW_LOG_INFO);
    EXPECT_EQ(handled.fields["handler"], "probe-a");
    const std::string id = handled.fields["event_id"];
    EXPECT_EQ(id.rfind("q:keys:", 0), 0u) << id;
    EXPECT_EQ(id.substr(id.size() - 10), "6a6f623a31") << id;  // hex of "job:1"
    EXPECT_EQ(handled.field_count, 2u);
    // A line outside handle() (init's "loaded ...") has the instance but no event.
    FieldsLog::Line loaded;
    ASSERT_TRUE(fields.find("plugin probe-a: loaded", &loaded)) << fields.describe();
    EXPECT_EQ(loaded.fields["handler"], "probe-a");
    EXPECT_EQ(loaded.fields.count("event_id"), 0u);
    EXPECT_TRUE(logs_.lines().empty()) << "one log callback: " << logs_.describe();
}

TEST_F(PluginTest, AnExceptionInACppPluginIsARetry) {
    load(test_plugin("probe_cpp"), nullptr, {});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("job:throws", "v");
    EXPECT_TRUE(engine_->stat_reaches("handler.retries", at_least(2)));
}

// ---- handle_batch (tests/plugins/batcher.c, old_descriptor, probe_cpp_batch) ----

// Tracked keys that are all due (their keys expired) before the engine starts, so that a
// claim takes many at once.
class PluginBatchTest : public PluginTest {
  protected:
    // Loads the plugin, tracks the keys (due before the start), starts.
    void start_with_due(const std::string &plugin, const char *instance, const Options &options,
                        const std::vector<std::string> &keys) {
        load(test_plugin(plugin), instance, options);
        track_due(keys);
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    }
    void track_due(const std::vector<std::string> &keys) {
        for (auto &k : keys) track(k, "v", 100);
        ASSERT_TRUE(wait_until([&] { return redis_cmd({"EXISTS", keys.back()}) == "0"; }));
    }
    static std::vector<std::string> numbered(const std::string &prefix, int n) {
        std::vector<std::string> out;
        for (int i = 1; i <= n; i++) out.push_back(prefix + std::to_string(i));
        return out;
    }
    // The record list, sorted.
    std::vector<std::string> recorded(const std::string &list) {
        std::vector<std::string> out;
        std::istringstream in(redis_cmd({"LRANGE", list, "0", "-1"}));
        for (std::string line; std::getline(in, line);) out.push_back(line);
        std::sort(out.begin(), out.end());
        return out;
    }
    std::string dead_letters() {
        return redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    }
};

TEST_F(PluginBatchTest, APluginBuiltForTheOldDescriptorIsCalledPerEventAndNeverPastItsSize) {
    start_with_due("old_descriptor", "old", {}, numbered("k:", 50));
    ASSERT_TRUE(engine_->stat_reaches("plugin.old.handled", 50)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 50));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.0", 50));
    EXPECT_TRUE(engine_->stat_reaches("handler.batches.0", 50)) << "one call per event";
}

TEST_F(PluginBatchTest, ABatchPluginGetsManyEventsPerCallWhenManyAreDue) {
    start_with_due("batcher", "b", {{"record", "calls"}}, numbered("ack:", 300));
    ASSERT_TRUE(engine_->stat_reaches("handler.acked.0", 300)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.events", 300));
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.single", 0));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.0", 300));
    EXPECT_TRUE(engine_->stat_reaches("events.delivered", 300));
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.multi", at_least(1)));
    int64_t batches = 0;
    EXPECT_TRUE(engine_->stat_reaches("handler.batches.0", at_most(299), &batches));
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.batches", batches));
    // Every event recorded once, through redis_pipeline.
    EXPECT_EQ(recorded("calls").size(), 300u);
}

TEST_F(PluginBatchTest, EachEventOfABatchGetsItsOwnResult) {
    configure({{"max_attempts", "2"}, {"workers", "1"}});
    start_with_due("batcher", "b", {{"record", "calls"}},
                   {"ack:1", "retry:1", "reject:1", "none:1", "bad:1", "hold:1"});
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 4)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 2));     // ack, hold
    EXPECT_TRUE(engine_->stat_reaches("handler.rejected.0", 2));  // reject, bad
    EXPECT_TRUE(engine_->stat_reaches("handler.retried.0", 4));   // retry, none: twice each
    EXPECT_TRUE(engine_->stat_reaches("handler.pending.0", 1));   // hold
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.held", 1));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.0", 8));
    // Only the retried events came back.
    EXPECT_EQ(recorded("calls"),
              (std::vector<std::string>{"ack:1:1", "bad:1:1", "hold:1:1", "none:1:1", "none:1:2",
                                        "reject:1:1", "retry:1:1", "retry:1:2"}));
    // Each dead letter carries its own reason.
    const std::string dead = dead_letters();
    EXPECT_TRUE(contains(dead, "b: reject reject:1:1")) << dead;
    EXPECT_TRUE(contains(dead, "b: returned 42, not a kw_result (rejected)")) << dead;
    EXPECT_TRUE(contains(dead, "b: retry retry:1")) << dead;
    EXPECT_TRUE(contains(dead, "b: handle_batch gave this event no result (retried)")) << dead;
}

TEST_F(PluginBatchTest, AWholeBatchFailureRetriesOnlyTheEventsWithoutAResult) {
    configure({{"max_attempts", "2"}, {"workers", "1"}});
    std::vector<std::string> keys = numbered("ack:", 5);
    keys.push_back("fail:1");
    start_with_due("batcher", "b", {{"record", "calls"}}, keys);
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 5));
    EXPECT_TRUE(engine_->stat_reaches("handler.retried.0", 2));
    EXPECT_EQ(recorded("calls"),
              (std::vector<std::string>{"ack:1:1", "ack:2:1", "ack:3:1", "ack:4:1", "ack:5:1",
                                        "fail:1:1", "fail:1:2"}));
    const std::string dead = dead_letters();
    EXPECT_TRUE(contains(dead, "b: batch failed on purpose")) << dead;
}

TEST_F(PluginBatchTest, AnExceptionInACppBatchRetriesTheEventsItLeftWithoutResult) {
    configure({{"max_attempts", "2"}, {"workers", "1"}});
    start_with_due("probe_cpp_batch", "pc", {}, {"ack:1", "ack:2", "throw:1"});
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 2));
    EXPECT_TRUE(engine_->stat_reaches("handler.retried.0", 2));
    const std::string dead = dead_letters();
    EXPECT_TRUE(contains(dead, "pc: batch thrown on purpose")) << dead;
    EXPECT_FALSE(contains(dead, "ack:")) << dead;
}

TEST_F(PluginBatchTest, SerialBatchCallsNeverOverlap) {
    configure({{"workers", "4"}});
    start_with_due("batcher_serial", "s", {{"sleep_ms", "20"}}, numbered("ack:", 200));
    ASSERT_TRUE(engine_->stat_reaches("plugin.s.events", 200)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 200));
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.overlap", 0));
}

// With max_in_flight, a batch gets no more events than the room left; the rest are parked
// and called as places free up: never more than 3 events in calls at once, each once.
TEST_F(PluginBatchTest, ABatchGetsTheRoomLeftAndTheRestIsParked) {
    configure({{"workers", "2"}});
    start_with_due("batcher", "b", {{"record", "calls"}, {"max_in_flight", "3"}, {"sleep_ms", "5"}},
                   numbered("ack:", 60));
    ASSERT_TRUE(engine_->stat_reaches("handler.acked.0", 60)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.events", 60));
    EXPECT_TRUE(engine_->stat_reaches("plugin.b.over_limit", 0));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.0", 60));
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 0));
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 60));
    EXPECT_EQ(recorded("calls").size(), 60u);
}

TEST_F(PluginTest, SeveralInstancesOfOnePluginWithTheirOwnConfiguration) {
    load(test_plugin("probe"), "a", {{"record", "list-a"}});
    load(test_plugin("probe"), "b", {{"record", "list-b"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("k", "v");
    EXPECT_TRUE(wait_until([&] { return redis_cmd({"LRANGE", "list-a", "0", "-1"}) == "k:1"; }));
    EXPECT_TRUE(wait_until([&] { return redis_cmd({"LRANGE", "list-b", "0", "-1"}) == "k:1"; }));
}

TEST_F(PluginTest, SessionIndexRemovesTheSessionFromItsUsersIndex) {
    // user from the whole value (set), a JSON field (hash), a key capture (sorted set).
    load("session_index", "by_value", {{"index", "user:{user}:sessions"}, {"pattern", "sv:*"}});
    load("session_index", "by_json",
         {{"index", "user:{user}:h"}, {"type", "hash"}, {"user", "json:uid"}, {"pattern", "sj:*"}});
    load("session_index", "by_key",
         {{"index", "user:{user}:z"},
          {"type", "zset"},
          {"user", "key"},
          {"member", "session"},
          {"pattern", "sk:{user}:{session}"}});
    redis_cmd({"SADD", "user:42:sessions", "sv:abc", "sv:other"});
    redis_cmd({"HSET", "user:7:h", "sj:def", "x", "sj:keep", "y"});
    redis_cmd({"ZADD", "user:9:z", "1", "ghi", "2", "keep"});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("sv:abc", "42");
    track("sj:def", "{\"name\": \"x\", \"nested\": {\"uid\": \"no\"}, \"uid\": \"7\"}");
    track("sk:9:ghi", "anything");
    EXPECT_TRUE(wait_until([&] {
        return redis_cmd({"SMEMBERS", "user:42:sessions"}) == "sv:other";
    }));
    EXPECT_TRUE(wait_until([&] { return redis_cmd({"HKEYS", "user:7:h"}) == "sj:keep"; }));
    EXPECT_TRUE(wait_until([&] { return redis_cmd({"ZRANGE", "user:9:z", "0", "-1"}) == "keep"; }));
    EXPECT_TRUE(engine_->stat_reaches("plugin.by_value.removed", 1));
    EXPECT_TRUE(engine_->stat_reaches("plugin.by_json.removed", 1));
    EXPECT_TRUE(engine_->stat_reaches("plugin.by_key.removed", 1));
}

TEST_F(PluginTest, SessionIndexRejectsAKeyOutsideItsPatternToTheDeadLetters) {
    configure({{"max_attempts", "1"}});
    load("session_index", "s", {{"index", "u:{user}"}, {"user", "key"}, {"pattern", "s:{user}"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("other:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    std::string stream = redis_cmd({"KEYS", "*dead*"});
    std::string dead = redis_cmd({"XRANGE", stream, "-", "+"});
    EXPECT_TRUE(contains(dead, "s: key \"other:1\" does not match pattern \"s:{user}\""))
        << stream << ": " << dead;
}

TEST_F(PluginTest, StreamAppendsOncePerEventIdWithTheWatchFields) {
    // Two instances on one stream see the same event (same id): one entry, one duplicate.
    load("stream", "s1", {{"stream", "events"}, {"maxlen", "1000"}});
    load("stream", "s2", {{"stream", "events"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    std::string binary("bin\xff\x00key", 8);
    track("order:1", "payload");
    track(binary, "v");
    ASSERT_TRUE(stats_reach(engine_->get(), {"plugin.s1.appended", "plugin.s2.appended"}, 2));
    ASSERT_TRUE(stats_reach(engine_->get(), {"plugin.s1.duplicates", "plugin.s2.duplicates"}, 2));
    EXPECT_EQ(redis_cmd({"XLEN", "events"}), "2");
    std::string entries = redis_cmd({"XRANGE", "events", "-", "+"});
    // Field names and encoding as `keywatch watch` prints them.
    EXPECT_TRUE(contains(entries, "event\nexpired\nkey\norder:1\nvalue\npayload\n")) << entries;
    EXPECT_TRUE(contains(entries, "deadline_ms\n")) << entries;
    EXPECT_TRUE(contains(entries, "\nattempt\n1\n")) << entries;
    EXPECT_TRUE(contains(entries, "\nid\nq:keys:")) << entries;
    EXPECT_TRUE(contains(entries, "key_b64\nYmlu/wBrZXk=\n")) << entries;
}

// The marker key stream writes for a tracked key's event ("q:keys:<deadline>:<hex key>").
std::string stream_marker(const std::string &stream, const std::string &key, int64_t deadline) {
    static const char hex[] = "0123456789abcdef";
    std::string id = "q:keys:" + std::to_string(deadline) + ":";
    for (unsigned char c : key) id += hex[c >> 4], id += hex[c & 15];
    return "{" + stream + "}:kw-seen:" + id;
}

// Keys tracked before the engine starts, all due when it does: the engine claims them
// together, and a plugin that batches gets them in few calls.
TEST_F(PluginTest, StreamAppendsABatchInOneScriptCallAndARedeliveredEventOnce) {
    const int n = 200;
    // The probe retries every first attempt: each event comes to the stream twice.
    load("stream", "s", {{"stream", "events"}, {"maxlen", "0"}});
    load(test_plugin("probe"), "p", {{"retry_first", "1"}});
    ServerCalls server(redis().host(), redis().port());
    server.start();
    for (int i = 0; i < n; i++) track("k:" + std::to_string(i), "v");
    wait_due("k:" + std::to_string(n - 1));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.s.appended", n));
    ASSERT_TRUE(engine_->stat_reaches("plugin.s.duplicates", n));
    EXPECT_EQ(redis_cmd({"XLEN", "events"}), std::to_string(n));
    std::vector<int64_t> calls;
    ASSERT_TRUE(wait_until([&] { return events_in(calls = server.numkeys("events")) == 2 * n; }))
        << events_in(calls) << " events in " << calls.size() << " script calls";
    EXPECT_LE(calls.size(), static_cast<size_t>(n / 4)) << "about one script call per event";
    EXPECT_LE(server.bodies("events"), 2u) << "the body goes only to a node without it";
}

TEST_F(PluginTest, StreamRejectsOnlyTheEventWhoseMarkerIsBrokenAndAppendsTheRest) {
    const int n = 50, broken = 17;
    configure({{"max_attempts", "3"}});
    load("stream", "s", {{"stream", "events"}, {"maxlen", "0"}});
    ServerCalls server(redis().host(), redis().port());
    server.start();
    std::vector<std::string> markers;
    for (int i = 0; i < n; i++) {
        const std::string key = "k:" + std::to_string(i);
        int64_t deadline = 0;
        ASSERT_EQ(kw_client_track(client_, key.data(), key.size(), "v", 1, 100, KW_TRACK_SNAPSHOT,
                                  &deadline),
                  KW_OK);
        markers.push_back(stream_marker("events", key, deadline));
    }
    redis_cmd({"HSET", markers[broken], "not", "a string"});
    wait_due("k:" + std::to_string(n - 1));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.s.appended", n - 1));
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    EXPECT_TRUE(engine_->stat_reaches("items.retried", 0)) << "no other event was retried";
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.duplicates", 0));
    EXPECT_EQ(redis_cmd({"XLEN", "events"}), std::to_string(n - 1));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "k:17")) << dead;
    EXPECT_TRUE(contains(dead, "s: appending to events: WRONGTYPE")) << dead;
    int appended = 0;
    for (const auto &m : markers) appended += redis_cmd({"TYPE", m}) == "string";
    EXPECT_EQ(appended, n - 1) << "every other event has its marker";
    std::vector<int64_t> calls;
    ASSERT_TRUE(wait_until([&] { return events_in(calls = server.numkeys("events")) == n; }));
    EXPECT_LE(calls.size(), static_cast<size_t>(n / 2)) << "the events came in batches";
}

TEST_F(PluginTest, SessionIndexBatchCountsEveryEventExactlyAndRejectsOnlyTheBrokenIndex) {
    // 200 sessions of 5 users; user 4's index is a string; 20 sessions of the others (the
    // first 5 of each) are not in their index.
    const int n = 200;
    load("session_index", "s", {{"index", "user:{user}:sessions"}});
    for (int i = 0; i < n; i++) {
        const std::string user = std::to_string(i % 5), key = "sess:" + std::to_string(i);
        if (i % 5 != 4 && i >= 25) redis_cmd({"SADD", "user:" + user + ":sessions", key});
    }
    redis_cmd({"SET", "user:4:sessions", "a string"});
    ServerCalls server(redis().host(), redis().port());
    server.start();
    track_sessions_then_start(n);
    ASSERT_TRUE(engine_->stat_reaches("items.dead", n / 5));
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.removed", 140));
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.absent", 20));
    EXPECT_TRUE(engine_->stat_reaches("items.acked", n - n / 5));
    EXPECT_TRUE(engine_->stat_reaches("items.retried", 0));
    for (int u = 0; u < 4; u++)
        EXPECT_EQ(redis_cmd({"SCARD", "user:" + std::to_string(u) + ":sessions"}), "0");
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "s: SREM: WRONGTYPE")) << dead;
    EXPECT_LT(server.calls("srem"), n / 2) << "one SREM per index key and batch";
}

// The engine's user may not write user 4's index (ACL): SREM answers NOPERM for it alone.
// Those events are retried (then dead), every other event of the same batches is acked.
TEST_F(PluginTest, SessionIndexRetriesOnlyTheEventsOfTheIndexItCannotWrite) {
    const int n = 100;
    redis_cmd({"ACL", "SETUSER", "engine", "on", ">pw", "~kw:*", "~sess:*", "~user:[0-3]:*", "&*",
               "+@all"});
    configure({{"redis.url",
                "redis://engine:pw@" + redis().host() + ":" + std::to_string(redis().port())},
               {"max_attempts", "2"}});
    load("session_index", "s", {{"index", "user:{user}:sessions"}});
    for (int i = 0; i < n; i++)
        redis_cmd(
            {"SADD", "user:" + std::to_string(i % 5) + ":sessions", "sess:" + std::to_string(i)});
    ServerCalls server(redis().host(), redis().port());
    server.start();
    track_sessions_then_start(n);
    ASSERT_TRUE(engine_->stat_reaches("items.dead", n / 5));
    EXPECT_TRUE(engine_->stat_reaches("items.retried", n / 5)) << "once each, then dead";
    EXPECT_TRUE(engine_->stat_reaches("items.acked", n - n / 5));
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.removed", n - n / 5));
    EXPECT_TRUE(engine_->stat_reaches("plugin.s.absent", 0));
    EXPECT_EQ(redis_cmd({"SCARD", "user:4:sessions"}), std::to_string(n / 5));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "s: SREM: NOPERM")) << dead;
    EXPECT_LT(server.calls("srem"), n / 2) << "one SREM per index key and batch";
}

// A 0.2 host (tests/plugins/old_host.c: no handle_batch, no redis_pipeline): the built-ins
// work per event, say so once, and still send the script body only when a node lacks it.
TEST_F(PluginTest, StreamAndSessionIndexWorkPerEventOnAnOlderHost) {
    const int n = 20;
    load_for("st:", test_plugin("old_host"), "old_stream",
             {{"plugin", std::string(KW_HANDLERS_DIR) + "/stream.so"}, {"stream", "events"}});
    load_for("sess:", test_plugin("old_host"), "old_sessions",
             {{"plugin", std::string(KW_HANDLERS_DIR) + "/session_index.so"},
              {"index", "user:{user}:sessions"}});
    for (int i = 0; i < n; i++) redis_cmd({"SADD", "user:u:sessions", "sess:" + std::to_string(i)});
    redis_cmd({"SET", "user:bad:sessions", "a string"});
    ServerCalls server(redis().host(), redis().port());
    server.start();
    for (int i = 0; i < n; i++) {
        track("st:" + std::to_string(i), "v");
        track("sess:" + std::to_string(i), "u");
    }
    track("sess:bad", "bad");
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.old_stream.appended", n));
    ASSERT_TRUE(engine_->stat_reaches("plugin.old_sessions.removed", n));
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    EXPECT_EQ(redis_cmd({"SCARD", "user:u:sessions"}), "0");
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "old_sessions: SREM: WRONGTYPE")) << dead;
    std::vector<int64_t> calls;
    ASSERT_TRUE(wait_until([&] { return events_in(calls = server.numkeys("events")) == n; }));
    EXPECT_EQ(calls.size(), static_cast<size_t>(n)) << "one event per call";
    EXPECT_EQ(server.calls("srem"), n + 1);
    EXPECT_LE(server.bodies("events"), 2u) << "EVALSHA, and the body only after NOSCRIPT";
    for (const char *instance : {"old_stream", "old_sessions"})
        EXPECT_NE(logs_.find(KW_LOG_INFO,
                             [&](const std::string &m) {
                                 return m == std::string("plugin ") + instance +
                                                 ": this keywatch (0.2.0) delivers one event "
                                                 "per call; batching needs keywatch 0.3.0 or "
                                                 "later";
                             }),
                  "")
            << logs_.describe();
}

TEST_F(PluginTest, WebhookPostsTheSignedEventAndFollowsTheHttpStatus) {
    WebhookServer server;
    configure({{"max_attempts", "3"}});
    load_for("ok:", "webhook", "ok",
             {{"url", server.url("/ok")}, {"secret", "s3cret"}, {"headers", "X-Extra: yes"}});
    load_for("flaky:", "webhook", "flaky", {{"url", server.url("/flaky")}, {"secret", "s3cret"}});
    load_for("bad:", "webhook", "bad", {{"url", server.url("/reject")}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("ok:1", "v1");
    track("flaky:1", "v2");
    track("bad:1", "v3");
    ASSERT_TRUE(engine_->stat_reaches("plugin.ok.delivered", 1));
    ASSERT_TRUE(engine_->stat_reaches("plugin.flaky.delivered", 1));
    ASSERT_TRUE(engine_->stat_reaches("plugin.bad.rejected", 1));
    auto ok = server.requests("/ok");
    ASSERT_EQ(ok.size(), 1u);
    EXPECT_TRUE(ok[0]["sig_ok"].get<bool>()) << ok[0].dump();
    EXPECT_EQ(ok[0]["extra"], "yes");
    auto body = nlohmann::json::parse(ok[0]["body"].get<std::string>());
    EXPECT_EQ(body["event"], "expired");
    EXPECT_EQ(body["key"], "ok:1");
    EXPECT_EQ(body["value"], "v1");
    EXPECT_EQ(body["id"], ok[0]["event_id"]);
    auto flaky = server.requests("/flaky");
    ASSERT_EQ(flaky.size(), 2u) << "503 then 200";
    EXPECT_EQ(nlohmann::json::parse(flaky[1]["body"].get<std::string>())["attempt"], 2);
    EXPECT_TRUE(engine_->stat_reaches("plugin.flaky.retried", 1));
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "HTTP 400: bad payload: no")) << dead;
    EXPECT_EQ(server.requests("/reject").size(), 1u) << "a 400 is not retried";
}

TEST_F(PluginTest, WebhookHonoursRetryAfterInSecondsAndAsAnHttpDate) {
    WebhookServer server;
    load_for("limited:", "webhook", "limited", {{"url", server.url("/limited")}});
    load_for("unavailable:", "webhook", "unavailable", {{"url", server.url("/unavailable")}});
    load_for("soon:", "webhook", "soon", {{"url", server.url("/soon")}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    int64_t before = redis_now();
    track("limited:1", "v");
    track("unavailable:1", "v");
    track("soon:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.limited.retry_after", 1)) << logs_.describe();
    ASSERT_TRUE(engine_->stat_reaches("plugin.unavailable.retry_after", 1)) << logs_.describe();
    // Due again after the server's delay (120 s), not the engine's backoff (50..100ms).
    ASSERT_TRUE(wait_until([&] { return score("keys", "due", "limited:1") >= 0; }));
    ASSERT_TRUE(wait_until([&] { return score("keys", "due", "unavailable:1") >= 0; }));
    int64_t limited = score("keys", "due", "limited:1");
    int64_t unavailable = score("keys", "due", "unavailable:1");
    int64_t now = redis_now();
    EXPECT_GE(limited, before + 120000);
    EXPECT_LE(limited, now + 120000);
    // An HTTP date has whole seconds: allow for two roundings.
    EXPECT_GE(unavailable, before + 118000);
    EXPECT_LE(unavailable, now + 120000);
    EXPECT_EQ(server.requests("/limited").size(), 1u);
    EXPECT_EQ(server.requests("/unavailable").size(), 1u);
    EXPECT_TRUE(engine_->stat_reaches("plugin.limited.retried", 1));
    std::string error = redis_cmd({"HGET", "kw:keys:{0}:data", "e:limited:1"});
    EXPECT_TRUE(contains(error, "limited: POST 127.0.0.1:")) << error;
    EXPECT_TRUE(contains(error, "/limited: HTTP 429 (Retry-After: 120000 ms)")) << error;
    // A short Retry-After: the event comes back after it and is delivered (attempt 2).
    ASSERT_TRUE(engine_->stat_reaches("plugin.soon.delivered", 1));
    EXPECT_TRUE(engine_->stat_reaches("plugin.soon.retry_after", 1));
    auto soon = server.requests("/soon");
    ASSERT_EQ(soon.size(), 2u) << "429 then 200";
    EXPECT_EQ(nlohmann::json::parse(soon[1]["body"].get<std::string>())["attempt"], 2);
}

// A receiver that holds its requests open pins no worker: the webhook's events wait in its
// own HTTP thread while the probe's events (another handler, same engine) are delivered.
TEST_F(PluginTest, WebhookWithASlowReceiverLeavesTheWorkersToOtherHandlers) {
    WebhookServer server;
    configure({{"workers", "2"}, {"hold.timeout", "1m"}});
    load_for("p:", test_plugin("probe"), "p", {});
    load_for("hook:", "webhook", "hook", {{"url", server.url("/hold")}, {"timeout_ms", "60000"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (int i = 1; i <= 4; i++) track("hook:" + std::to_string(i), "v");
    ASSERT_TRUE(wait_until([&] { return server.open_now() >= 2; })) << logs_.describe();
    for (int i = 1; i <= 5; i++) track("p:" + std::to_string(i), "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.p.handled", 5)) << logs_.describe();
    EXPECT_TRUE(wait_until([&] { return server.open_now() == 4; })) << server.open_now();
    EXPECT_TRUE(engine_->stat_reaches("handler.pending.1", 4)) << "held while open";
    server.go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.hook.delivered", 4)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 9));
    EXPECT_EQ(server.requests("/hold").size(), 4u);
}

TEST_F(PluginTest, WebhookKeepsAtMostMaxInFlightRequestsOpenAtTheReceiver) {
    WebhookServer server;
    configure({{"workers", "2"}, {"hold.timeout", "1m"}});
    load_for("hook:", "webhook", "hook",
             {{"url", server.url("/hold")}, {"timeout_ms", "60000"}, {"max_in_flight", "3"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (int i = 1; i <= 8; i++) track("hook:" + std::to_string(i), "v");
    bool over = false;
    ASSERT_TRUE(wait_until([&] {
        over = over || server.max_open() > 3;
        return server.open_now() == 3;
    })) << server.open_now();
    EXPECT_TRUE(engine_->stat_reaches("items.claimed", 8));
    EXPECT_FALSE(over) << server.max_open() << " requests open at once";
    server.go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.hook.delivered", 8)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 8));
    EXPECT_EQ(server.max_open(), 3);
    std::set<std::string> ids;
    for (const auto &r : server.requests("/hold")) ids.insert(r["event_id"].get<std::string>());
    EXPECT_EQ(server.requests("/hold").size(), 8u);
    EXPECT_EQ(ids.size(), 8u) << "each event posted once";
}

// Stop with requests still open: stop returns at its timeout, the events go back, and
// the plugin's close completes the requests it gives up (another engine delivers them).
TEST_F(PluginTest, WebhookStopWithRequestsOpenGivesTheEventsBack) {
    WebhookServer server;
    configure({{"workers", "2"}, {"hold.timeout", "1m"}});
    load_for("hook:", "webhook", "hook", {{"url", server.url("/hold")}, {"timeout_ms", "60000"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (int i = 1; i <= 3; i++) track("hook:" + std::to_string(i), "v");
    ASSERT_TRUE(wait_until([&] { return server.open_now() == 3; })) << server.open_now();
    EXPECT_EQ(kw_engine_stop(engine_->get(), 1000), KW_ERR_TIMEOUT) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("items.released", 3));
    engine_.reset();  // close: the open requests are given up, their holds completed
    server.go();
    configure({});
    load_for("hook:", "webhook", "hook", {{"url", server.url("/hold")}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("plugin.hook.delivered", 3)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 3));
}

// No response: the reason names what failed (libcurl's words), and the event is retried.
TEST_F(PluginTest, WebhookConnectionErrorSaysWhatFailedAndRetries) {
    // A port bound and never listened on, held for the whole test: a connection to it is
    // refused, and no other process can take the port meanwhile.
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(sock, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t addr_len = sizeof addr;
    ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr *>(&addr), &addr_len), 0);
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{sock};
    int port = ntohs(addr.sin_port);
    configure({{"max_attempts", "2"}});
    load_for("down:", "webhook", "down",
             {{"url", "http://127.0.0.1:" + std::to_string(port) + "/x"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("down:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.down.retried", 2)) << logs_.describe();
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(
        contains(dead, "down: POST 127.0.0.1:" + std::to_string(port) + "/x: no response: "))
        << dead;
    EXPECT_TRUE(contains(dead, "onnect")) << dead;
}

TEST_F(PluginTest, WebhookRefusesAnOlderHostWithoutSetMaxInFlight) {
    refused(
        test_plugin("old_host"), "old_hook",
        {{"plugin", std::string(KW_HANDLERS_DIR) + "/webhook.so"}, {"url", "http://127.0.0.1:1/x"}},
        {"this keywatch host (0.2.0) has no set_max_in_flight (keywatch 0.3.0 or later)",
         "use the webhook plugin that ships with your keywatch"});
}

TEST_F(PluginTest, WebhookRefusesABadMaxInFlight) {
    for (const char *bad : {"0", "-1", "x", "3x"})
        refused("webhook", "hook", {{"url", "http://127.0.0.1:1/x"}, {"max_in_flight", bad}},
                {"option \"max_in_flight\"", std::string("\"") + bad + "\"",
                 "a number of requests > 0"});
}

// https: the receiver verified against ca_file (ok), with a client certificate where the
// receiver requires one; a receiver the CA does not vouch for is retried, then dead-lettered
// with the TLS error.
TEST_F(PluginTest, WebhookOverHttpsVerifiesTheReceiverAndSendsAClientCertificate) {
    keywatch::TestCertificates pki;
    WebhookServer server({pki.path("server.crt"), pki.path("server.key")});
    WebhookServer mutual({pki.path("server.crt"), pki.path("server.key"), pki.path("ca.crt")});
    configure({{"max_attempts", "2"}});
    load_for("ok:", "webhook", "ok",
             {{"url", server.url("/ok")}, {"ca_file", pki.path("ca.crt")}, {"secret", "s3cret"}});
    load_for("mtls:", "webhook", "mtls",
             {{"url", mutual.url("/ok")},
              {"ca_file", pki.path("ca.crt")},
              {"client_cert", pki.path("client.crt")},
              {"client_key", pki.path("client.key")}});
    load_for("wrong:", "webhook", "wrong",
             {{"url", server.url("/ok")}, {"ca_file", pki.path("other-ca.crt")}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("ok:1", "v");
    track("mtls:1", "v");
    track("wrong:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.ok.delivered", 1)) << logs_.describe();
    ASSERT_TRUE(engine_->stat_reaches("plugin.mtls.delivered", 1)) << logs_.describe();
    auto ok = server.requests("/ok");
    ASSERT_EQ(ok.size(), 1u) << "the wrong CA's request never reaches the receiver";
    EXPECT_TRUE(ok[0]["sig_ok"].get<bool>()) << ok[0].dump();
    ASSERT_TRUE(engine_->stat_reaches("plugin.wrong.retried", 2)) << logs_.describe();
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 1));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "wrong: POST 127.0.0.1:")) << dead;
    EXPECT_TRUE(contains(dead, "no response: SSL certificate problem")) << dead;
    EXPECT_EQ(server.requests("/ok").size(), 1u);
}

TEST_F(PluginTest, ExecRunsTheProgramWithTheEventOnStdinAndMapsItsExit) {
    char tmpl[] = "/tmp/kw_exec_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string dir = tmpl;
    configure({{"max_attempts", "2"}});
    // A generous timeout for the programs that finish at once (a loaded machine must not
    // turn them into timeouts); the slow one never finishes.
    auto sh = [](const std::string &script, const char *timeout_ms = "20000") -> Options {
        return {{"argv0", "sh"}, {"argv1", "-c"}, {"argv2", script}, {"timeout_ms", timeout_ms}};
    };
    load_for("ok:", "exec", "ok", sh("cat > " + dir + "/stdin"));
    load_for("again:", "exec", "again",
             sh("if [ -e " + dir + "/flag ]; then exit 0; fi; touch " + dir +
                "/flag; echo busy >&2; exit 75"));
    load_for("bad:", "exec", "bad", sh("echo 'it broke' >&2; exit 3"));
    load_for("slow:", "exec", "slow", sh("sleep 60 & sleep 60", "300"));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("ok:1", "v1");
    track("again:1", "v");
    track("bad:1", "v");
    track("slow:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.ok.succeeded", 1));
    ASSERT_TRUE(engine_->stat_reaches("plugin.again.succeeded", 1));
    ASSERT_TRUE(engine_->stat_reaches("plugin.bad.rejected", 1));
    ASSERT_TRUE(engine_->stat_reaches("plugin.slow.timed_out", 2));
    std::ifstream in(dir + "/stdin");
    std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["key"], "ok:1");
    EXPECT_EQ(j["value"], "v1");
    EXPECT_TRUE(engine_->stat_reaches("plugin.again.retried", 1)) << "75 means retry";
    ASSERT_TRUE(engine_->stat_reaches("items.dead", 2));
    std::string dead = redis_cmd({"XRANGE", redis_cmd({"KEYS", "*dead*"}), "-", "+"});
    EXPECT_TRUE(contains(dead, "bad: sh exited 3: it broke")) << dead;
    EXPECT_TRUE(contains(dead, "slow: sh ran longer than 300ms: killed")) << dead;
    std::string rm = "rm -rf " + dir;
    EXPECT_EQ(system(rm.c_str()), 0);
}

// exec's programs run under the instance's own supervisor thread (handlers/exec.c): the
// workers only hand the events over. Each test has a directory of its own for what its
// programs write; the programs it started and that are still alive are killed at the end.
class ExecTest : public PluginTest {
  protected:
    void SetUp() override {
        PluginTest::SetUp();
        char tmpl[] = "/tmp/kw_exec_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        PluginTest::TearDown();
        // Left over only if the engine failed to end them; a pid since reused by another
        // process (its command line does not name this test's directory) is left alone.
        for (pid_t pid : pids()) {
            std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
            std::string cmdline((std::istreambuf_iterator<char>(in)), {});
            if (contains(cmdline, dir_)) kill(pid, SIGKILL);
        }
        std::string rm = "rm -rf " + dir_;
        EXPECT_EQ(system(rm.c_str()), 0);
    }
    // `sh -c script`, with $D the test's directory.
    Options sh(const std::string &script, const Options &extra = {}) const {
        Options o = {{"argv0", "sh"}, {"argv1", "-c"}, {"argv2", "D=" + dir_ + "; " + script}};
        for (const auto &nv : extra) o.push_back(nv);
        return o;
    }
    // A program that says it runs (D/<pid>.run, and how many run then, seen by itself,
    // appended to D/counts), waits until the test calls go(), and removes its .run file
    // before it exits.
    Options waiting(const Options &extra) const {
        return sh(
            "touch $D/$$.run; ls $D | grep -c '[.]run$' >> $D/counts; "
            "while [ ! -e $D/go ]; do sleep 0.05; done; rm $D/$$.run",
            extra);
    }
    void go() const { std::ofstream(dir_ + "/go") << "go"; }
    // The programs running now (their .run files).
    int runs() const {
        int n = 0;
        for (const auto &line : lines("ls " + dir_))
            n += line.size() > 4 && line.compare(line.size() - 4, 4, ".run") == 0;
        return n;
    }
    // The numbers a file holds, one a line.
    std::vector<int> numbers(const std::string &file) const {
        std::vector<int> out;
        std::ifstream in(dir_ + "/" + file);
        for (int n; in >> n;) out.push_back(n);
        return out;
    }
    std::vector<pid_t> pids() const {
        std::vector<int> n = numbers("pids");
        return std::vector<pid_t>(n.begin(), n.end());
    }
    static std::vector<std::string> lines(const std::string &command) {
        std::vector<std::string> out;
        FILE *p = popen(command.c_str(), "r");
        char buf[512];
        while (p && fgets(buf, sizeof buf, p)) out.push_back(std::string(buf, strcspn(buf, "\n")));
        if (p) pclose(p);
        return out;
    }
    // True while pid is a process that has not ended (a zombie has).
    static bool alive(pid_t pid) {
        std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        size_t paren = stat.rfind(')');
        return paren != std::string::npos && paren + 2 < stat.size() &&
               std::string("ZXx").find(stat[paren + 2]) == std::string::npos;
    }
    std::string dir_;
};

// With 2 workers, 4 programs run at once and the other handler's events go through.
// Before, each program held a worker for its whole run: 2 ran, and the probe's events
// waited behind them.
TEST_F(ExecTest, ProgramsRunningLeaveTheWorkersToTheOtherHandlers) {
    configure({{"workers", "2"}, {"hold.timeout", "1m"}});
    load_for("p:", test_plugin("probe"), "p", {});
    load_for("x:", "exec", "x", waiting({{"concurrency", "4"}}));  // the old name still works
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (int i = 1; i <= 4; i++) track("x:" + std::to_string(i), "v");
    ASSERT_TRUE(wait_until([&] { return runs() >= 2; })) << runs() << " programs run";
    for (int i = 1; i <= 5; i++) track("p:" + std::to_string(i), "v");
    EXPECT_TRUE(engine_->stat_reaches("plugin.p.handled", 5)) << logs_.describe();
    EXPECT_TRUE(wait_until([&] { return runs() == 4; })) << runs() << " programs run";
    go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.x.succeeded", 4)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.pending.1", 4)) << "each exec event was held";
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.1", 4));
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 9));
}

// max_in_flight = 3: three programs at once, and never a fourth (each program counts the
// programs running when it starts; the events beyond wait at the host's gate).
TEST_F(ExecTest, MaxInFlightProgramsRunAtOnceAndNeverMore) {
    configure({{"workers", "4"}, {"hold.timeout", "1m"}});
    load_for("x:", "exec", "x", waiting({{"max_in_flight", "3"}}));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    for (int i = 1; i <= 7; i++) track("x:" + std::to_string(i), "v");
    int most = 0;
    ASSERT_TRUE(wait_until([&] { return (most = std::max(most, runs())) >= 3; }));
    ASSERT_TRUE(engine_->stat_reaches("items.claimed", 7));
    EXPECT_TRUE(engine_->stat_reaches("handler.pending.0", 3)) << "the other 4 wait for room";
    most = std::max(most, runs());
    EXPECT_EQ(most, 3);
    go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.x.succeeded", 7)) << logs_.describe();
    std::vector<int> counts = numbers("counts");
    ASSERT_EQ(counts.size(), 7u);
    EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 3);
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 7));
}

// stop returns at its deadline while a program still runs; freeing the engine kills the
// program's group (its children too) and the item, released, is delivered again by the
// next engine with its attempt unchanged.
TEST_F(ExecTest, AProgramStillRunningAtStopIsKilledAtFreeAndItsItemRedelivered) {
    configure({{"hold.timeout", "1m"}});
    load_for(
        "x:", "exec", "x",
        sh("echo $$ >> $D/pids; sleep 60 & echo $! >> $D/pids; wait", {{"timeout_ms", "30000"}}));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("x:1", "v");
    ASSERT_TRUE(wait_until([&] { return pids().size() == 2; }));
    EXPECT_EQ(kw_engine_stop(engine_->get(), 1000), KW_ERR_TIMEOUT) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("items.released", 1));
    engine_.reset();
    for (pid_t pid : pids()) EXPECT_TRUE(wait_until([&] { return !alive(pid); })) << pid;
    configure({});
    load_for("x:", "exec", "x2", sh("cat > $D/stdin"));
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.x2.succeeded", 1)) << logs_.describe();
    std::ifstream in(dir_ + "/stdin");
    auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["key"], "x:1");
    EXPECT_EQ(j["attempt"], 1) << "released, not retried";
}

TEST_F(ExecTest, MaxInFlightHasOneNameAtATimeAndNeedsAHostThatSetsIt) {
    refused("exec", "run", {{"argv0", "true"}, {"max_in_flight", "2"}, {"concurrency", "2"}},
            {"plugin instance \"run\"",
             "option \"concurrency\" is the old name of \"max_in_flight\": give one"});
    refused("exec", "run", {{"argv0", "true"}, {"max_in_flight", "0"}},
            {"option \"max_in_flight\": use a number > 0"});
    refused("exec", "run", {{"argv0", "true"}, {"concurrency", "x"}},
            {"option \"concurrency\": use a number > 0"});
    refused(test_plugin("old_host"), "old_exec",
            {{"plugin", std::string(KW_HANDLERS_DIR) + "/exec.so"}, {"argv0", "true"}},
            {"this keywatch host (0.2.0) has no set_max_in_flight (keywatch 0.3.0 or later)",
             "use the exec plugin that ships with your keywatch"});
}

TEST_F(PluginTest, APluginHoldsItsEventsAndCompletesThemFromItsOwnThread) {
    configure({{"queues", "jobs"}, {"hold.timeout", "1m"}});
    load_filtered({{"events", "task"}}, test_plugin("holder"), "holder",
                  {{"retry_delay_ms", "60000"}, {"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    int64_t before = redis_now();
    schedule("ack:1");
    schedule("retry:1");
    schedule("reject:1");
    ASSERT_TRUE(engine_->stat_reaches("plugin.holder.completed", 3)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.holder.held", 3));
    EXPECT_TRUE(engine_->stat_reaches("plugin.holder.complete_failed", 0));
    EXPECT_TRUE(wait_until([&] { return gone("jobs", "ack:1"); })) << "acked";
    // The retry is due when the plugin asked, not after the usual backoff (50..100ms).
    ASSERT_TRUE(wait_until([&] { return score("jobs", "due", "retry:1") >= 0; }));
    int64_t due = score("jobs", "due", "retry:1");
    EXPECT_GE(due, before + 60000);
    EXPECT_LE(due, redis_now() + 60000);
    EXPECT_EQ(redis_cmd({"HGET", "kw:jobs:{0}:data", "e:retry:1"}),
              "holder: retry later on purpose");
    // The reject goes to the dead letters with the plugin's reason.
    ASSERT_TRUE(wait_until([&] { return gone("jobs", "reject:1"); }));
    std::string dead = redis_cmd({"XRANGE", "kw:jobs:{0}:dead", "-", "+"});
    EXPECT_TRUE(contains(dead, "reject:1")) << dead;
    EXPECT_TRUE(contains(dead, "rejected on purpose by holder")) << dead;
    // Counted as each script's reply reaches the engine, which may be after Redis shows it.
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 1));
    EXPECT_TRUE(engine_->stat_reaches("items.retried", 1));
    EXPECT_TRUE(engine_->stat_reaches("items.dead", 1));
    EXPECT_EQ(redis_cmd({"LLEN", "calls"}), "3") << "each delivered once";
}

// set_max_in_flight (tests/plugins/holder.c, option max_in_flight): long... holds until a
// file exists. A file path of this test's own, removed at the end.
class MaxInFlightTest : public PluginTest {
  protected:
    void SetUp() override {
        PluginTest::SetUp();
        configure({{"workers", "2"}, {"hold.timeout", "1m"}});
        go_ = "/tmp/kw_max_in_flight_" + std::to_string(getpid()) + "_go";
        unlink(go_.c_str());
    }
    void TearDown() override {
        PluginTest::TearDown();
        unlink(go_.c_str());
    }
    void go() { std::ofstream(go_) << "go"; }
    // Two workers, the holder at max_in_flight 2 with long:1 and long:2 held, and long:3
    // claimed (waiting for room). Handlers loaded before are kept.
    void fill_to_the_limit() {
        load_holder({{"max_in_flight", "2"}});
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
        track("long:1", "v");
        track("long:2", "v");
        ASSERT_TRUE(engine_->stat_reaches("plugin.h.held", 2)) << logs_.describe();
        track("long:3", "v");
        ASSERT_TRUE(engine_->stat_reaches("items.claimed", 3));
    }
    void load_holder(const Options &extra = {}) {
        Options options = {{"until_file", go_}};
        for (const auto &nv : extra) options.push_back(nv);
        load_for("long:", test_plugin("holder"), "h", options);
    }
    std::string go_;
};

TEST_F(MaxInFlightTest, MaxInFlightHoldsBackTheInstanceNotTheOtherWorker) {
    load_for("p:", test_plugin("probe"), "p", {});
    fill_to_the_limit();
    if (HasFatalFailure()) return;
    for (int i = 1; i <= 5; i++) track("p:" + std::to_string(i), "v");
    // The probe's events go through while the holder is at its limit.
    ASSERT_TRUE(engine_->stat_reaches("plugin.p.handled", 5)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.held", 2)) << "long:3 waits for room";
    go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.completed", 3)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.held", 3));
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 8));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.1", 3));  // the holder, loaded second
}

TEST_F(MaxInFlightTest, StopWhileAnInstanceIsAtMaxInFlightReturnsAndGivesTheWaitingEventsBack) {
    fill_to_the_limit();
    if (HasFatalFailure()) return;
    // The holds never complete: stop gives up on them after its timeout, and the event
    // waiting for room goes back to its queue too.
    EXPECT_EQ(kw_engine_stop(engine_->get(), 1000), KW_ERR_TIMEOUT) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("items.released", 3));
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.held", 2));
    // Another engine delivers all three.
    go();
    configure({{"hold.timeout", "1m"}});
    load_holder();
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.completed", 3)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 3));
}

// handler.waiting.<handler> counts the events held back at the gate, and the first worker
// to find the gate full says so (once in 30 s, so the second one does not).
TEST_F(MaxInFlightTest, TheEventsWaitingForRoomAreAGaugeAndAFullGateIsSaidOnce) {
    fill_to_the_limit();
    if (HasFatalFailure()) return;
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 1)) << "long:3";
    track("long:4", "v");
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 2)) << "long:3 and long:4";
    go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.completed", 4)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 0));
    size_t said = 0;
    for (const auto &line : logs_.lines())
        said += line.level == KW_LOG_INFO && contains(line.message,
                                                      "handler h: at its "
                                                      "max_in_flight (2): its next "
                                                      "events wait for room");
    EXPECT_EQ(said, 1u) << logs_.describe();
}

// Parking (issue 23 §1): with max_in_flight 1, long:1 is held and long:2..long:<last> are
// parked one after the other (in this order: each is parked before the next is tracked):
// a backlog past 2 x workers, none of it holding a worker. The probe is loaded first
// (handler 0), the holder second (handler 1), recording its calls in "calls".
class ParkingTest : public MaxInFlightTest {
  protected:
    void park_backlog(int last) {
        load_for("p:", test_plugin("probe"), "p", {});
        load_holder({{"max_in_flight", "1"}, {"record", "calls"}});
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
        track("long:1", "v");
        ASSERT_TRUE(engine_->stat_reaches("plugin.h.held", 1)) << logs_.describe();
        for (int i = 2; i <= last; i++) {
            track("long:" + std::to_string(i), "v");
            ASSERT_TRUE(engine_->stat_reaches("items.claimed", i));
            EXPECT_TRUE(engine_->stat_reaches("handler.waiting.1", i - 1)) << "long:" << i;
        }
    }
    // The holder alone at max_in_flight 1, started with long:1..long:<n> due: every key
    // gone (EXISTS expires them) before the start, so the sweep claims them all and no
    // live notification does.
    void start_with_due(int n) {
        load_holder({{"max_in_flight", "1"}});
        std::vector<std::string> exists = {"EXISTS"};
        for (int i = 1; i <= n; i++) {
            track("long:" + std::to_string(i), "v");
            exists.push_back("long:" + std::to_string(i));
        }
        ASSERT_TRUE(wait_until([&] { return redis_cmd(exists) == "0"; }));
        ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    }
    // "long:1:1\nlong:2:1..." up to last.
    static std::string calls(int last) {
        std::string want;
        for (int i = 1; i <= last; i++)
            want += (i > 1 ? "\n" : "") + ("long:" + std::to_string(i)) + ":1";
        return want;
    }
};

TEST_F(ParkingTest, AnInstanceAtItsLimitParksItsBacklogAndTheOtherHandlersGoOn) {
    park_backlog(6);
    if (HasFatalFailure()) return;
    // Five parked events, two workers: the probe's events still go through at once.
    for (int i = 1; i <= 3; i++) track("p:" + std::to_string(i), "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.p.handled", 3)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.held", 1)) << "only long:1 was called";
    // Released: the parked ones are called one at a time, oldest first.
    go();
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.completed", 6)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.1", 0));
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 9));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.1", 6));
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.1", 6));
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), calls(6));
}

TEST_F(ParkingTest, StopGivesTheParkedEventsBackAndTheNextEngineDeliversThemFirstTime) {
    park_backlog(4);
    if (HasFatalFailure()) return;
    // long:1's hold never completes (stop gives up on it); long:2..4 were never called.
    EXPECT_EQ(kw_engine_stop(engine_->get(), 1000), KW_ERR_TIMEOUT) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("items.released", 4));
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.1", 0));
    go();
    configure({{"hold.timeout", "1m"}});
    load_holder({{"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.completed", 4)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 4));
    // Released, not failed: each is on its first attempt, long:1 on its second call.
    std::string all = redis_cmd({"LRANGE", "calls", "0", "-1"});
    for (int i = 1; i <= 4; i++)
        EXPECT_EQ(count_lines(all, "long:" + std::to_string(i) + ":1"), i == 1 ? 2u : 1u) << all;
    EXPECT_EQ(count_lines(all, "long:"), 5u) << all;
}

TEST_F(ParkingTest, AParkedEventPastHoldTimeoutIsReleasedAndCalledOnceWhenRedelivered) {
    // long:1 stays held past hold.timeout, long:2 parked behind it: both are released for
    // redelivery then. The parked long:2 is dropped from the queue, so it is called once.
    configure({{"workers", "2"}, {"lease", "1s"}, {"hold.timeout", "2s"}});
    park_backlog(2);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(engine_->stat_reaches("items.claimed", 4)) << "both claimed again";
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.1", 2)) << "the redeliveries";
    go();
    ASSERT_TRUE(engine_->stat_reaches("items.acked", 2)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.1", 0));
    std::string all = redis_cmd({"LRANGE", "calls", "0", "-1"});
    EXPECT_EQ(count_lines(all, "long:2:"), 1u) << all;
    EXPECT_EQ(count_lines(all, "long:1:"), 2u) << all;
}

// Parked events take places in the dispatch queue: with 40 items due and room for 16, the
// engine claims long:1 (held) and 16 more (parked), then no more until they move on.
TEST_F(ParkingTest, ParkedEventsCountAgainstTheDispatchQueueSoClaimsStopThere) {
    configure({{"workers", "2"}, {"hold.timeout", "1m"}, {"dispatch.queue_size", "16"}});
    start_with_due(40);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(engine_->stat_reaches("handler.waiting.0", 16)) << logs_.describe();
    for (int sample = 0; sample < 20; sample++) {  // a bound at every moment, sampled
        ASSERT_TRUE(engine_->stat_reaches("items.claimed", at_most(17), nullptr, milliseconds(0)));
        std::this_thread::sleep_for(milliseconds(25));
    }
    go();
    ASSERT_TRUE(engine_->stat_reaches("items.acked", 40)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 0));
    EXPECT_TRUE(engine_->stat_reaches("plugin.h.held", 40));
}

// A parked event handed to the workers just before a stop, with no worker free to call
// it: the one worker sleeps in the batcher's call while long:1's hold completes, so long:2
// (parked) is posted to the dispatcher. Stop's timeout passes first: long:2 is not called,
// before or after stop returns; it goes back to its queue for the next engine.
TEST_F(ParkingTest, AParkedEventPostedJustBeforeStopIsReleasedNotCalled) {
    configure({{"workers", "1"}, {"hold.timeout", "1m"}});
    load_for("b:", test_plugin("batcher"), "b", {{"sleep_ms", "3000"}});
    load_holder({{"max_in_flight", "1"}, {"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    track("long:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.held", 1)) << logs_.describe();
    track("long:2", "v");
    ASSERT_TRUE(engine_->stat_reaches("handler.waiting.1", 1)) << logs_.describe();
    track("b:1", "v");
    ASSERT_TRUE(engine_->stat_reaches("plugin.b.entered", 1)) << logs_.describe();
    go();  // long:1 completes: long:2 leaves the gate for the busy worker
    ASSERT_TRUE(engine_->stat_reaches("handler.waiting.1", 0)) << logs_.describe();
    EXPECT_EQ(kw_engine_stop(engine_->get(), 200), KW_ERR_TIMEOUT) << engine_->last_error();
    EXPECT_TRUE(engine_->stat_reaches("items.released", 1));
    EXPECT_TRUE(engine_->stat_reaches("handler.calls.1", 1)) << "long:2 was not called";
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), "long:1:1");
    configure({{"hold.timeout", "1m"}});
    load_holder({{"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.h.completed", 1)) << logs_.describe();
    // (b:1 may come again too: its call ended after the stop, its ack maybe unsent.)
    EXPECT_TRUE(engine_->stat_reaches("handler.acked.0", 1));
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), "long:1:1\nlong:2:1");
}

// A parked event past hold.timeout leaves its gate without another event parking behind
// it: 17 items due, one held, 16 parked filling dispatch.queue_size. At hold.timeout the
// sweeper releases all 17; the parked 16 are taken out (the engine looks every lease/3),
// which frees their places, so the engine claims 16 of them again.
TEST_F(ParkingTest, AParkedEventPastHoldTimeoutLeavesItsPlaceWithoutAnotherPark) {
    configure(
        {{"workers", "2"}, {"lease", "1s"}, {"hold.timeout", "2s"}, {"dispatch.queue_size", "16"}});
    start_with_due(17);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(engine_->stat_reaches("handler.waiting.0", 16)) << logs_.describe();
    ASSERT_TRUE(engine_->stat_reaches("items.claimed", at_least(33))) << logs_.describe();
    go();
    ASSERT_TRUE(engine_->stat_reaches("items.acked", 17)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("handler.waiting.0", 0));
}

TEST_F(PluginTest, AHeldEventsLeaseIsRenewedPastItsLengthAndNoOtherEngineGetsIt) {
    // The holder keeps "long:1" for 3s: five 600ms leases. A second engine with the probe
    // would take the item over after one lease were it not renewed.
    configure({{"queues", "jobs"},
               {"lease", "600ms"},
               {"hold.timeout", "1m"},
               {"sweep.interval", "50ms"}});
    load_filtered({{"events", "task"}}, test_plugin("holder"), "holder",
                  {{"hold_ms", "3000"}, {"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    schedule("long:1");
    ASSERT_TRUE(engine_->stat_reaches("plugin.holder.held", 1));
    Engine other(redis().url());
    other.set("queues", "jobs");
    other.set("lease", "600ms");
    other.set("sweep.interval", "50ms");
    load_filtered({{"events", "task"}}, test_plugin("probe"), "probe", {{"record", "other_calls"}},
                  &other);
    ASSERT_EQ(other.start(), KW_OK) << other.last_error();
    ASSERT_TRUE(engine_->stat_reaches("plugin.holder.completed", 1)) << logs_.describe();
    EXPECT_TRUE(engine_->stat_reaches("items.acked", 1));
    EXPECT_TRUE(gone("jobs", "long:1"));
    EXPECT_EQ(redis_cmd({"LLEN", "other_calls"}), "0") << "the held item stayed with its holder";
    EXPECT_TRUE(other.stat_reaches("items.lease_expired", 0));
    EXPECT_TRUE(engine_->stat_reaches("items.late_acks", 0));
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), "long:1:1");
    // The other engine does serve the queue: with the holder gone it takes the next item.
    engine_.reset();
    schedule("after:1");
    EXPECT_TRUE(wait_until([&] { return redis_cmd({"LLEN", "other_calls"}) == "1"; }));
}

TEST_F(PluginTest, APluginThatAbortsKillsItsProcessAndAnotherEngineRedeliversTheItem) {
    // The crashing engine runs in a child process (forked before this process starts any
    // engine thread): its plugin calls abort() on the first event.
    configure({{"lease", "1s"}});
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        Engine crashing(redis().url());
        crashing.set("lease", "1s");
        std::vector<const char *> options = {"abort", "1", nullptr};
        char err[1024];
        if (kw_engine_add_plugin(crashing.get(), test_plugin("probe").c_str(), "crash", nullptr,
                                 options.data(), err, sizeof err) != KW_OK ||
            crashing.start() != KW_OK)
            _exit(3);
        sleep(30);  // abort() ends it sooner
        _exit(4);
    }
    // Let the child engine claim the item and die on it.
    track("job:crash", "v", 300);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGABRT);
    // A second engine takes the item over once the dead holder's lease ran out.
    load(test_plugin("probe"), "survivor", {{"record", "calls"}});
    ASSERT_EQ(engine_->start(), KW_OK) << engine_->last_error();
    ASSERT_TRUE(wait_until([&] { return redis_cmd({"LLEN", "calls"}) == "1"; }));
    EXPECT_EQ(redis_cmd({"LRANGE", "calls", "0", "-1"}), "job:crash:2")
        << "the crashed delivery was attempt 1";
}

}  // namespace
