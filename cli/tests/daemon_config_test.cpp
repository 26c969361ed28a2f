// The daemon's config file (cli/daemon/daemon_config.h): what a good file becomes, every
// kind of error with its whole message (file:line:column, the key, the valid names, the
// quoted value), secrets never shown, and the shipped examples/keywatch.toml and
// docs/daemon.md kept complete against the engine's own option list (kw_conf_dump).
#include "cli/daemon/daemon_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "keywatch.h"

#ifndef KW_EXAMPLE_CONFIG
#error "KW_EXAMPLE_CONFIG must name examples/keywatch.toml"
#endif
#ifndef KW_DAEMON_DOC
#error "KW_DAEMON_DOC must name docs/daemon.md"
#endif

namespace keywatch::cli {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// Parses text as "kw.toml"; the error ("" when it parses).
std::string error_of(const std::string &text, DaemonConfig *out = nullptr) {
    DaemonConfig scratch;
    std::string err;
    bool ok = parse_daemon_config(text, "kw.toml", out ? out : &scratch, &err);
    EXPECT_EQ(ok, err.empty()) << err;
    return ok ? "" : err;
}

DaemonConfig parsed(const std::string &text) {
    DaemonConfig c;
    std::string err = error_of(text, &c);
    EXPECT_EQ(err, "");
    return c;
}

std::string slurp(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A private directory for files the config names; removed with its contents.
class TempDir {
  public:
    TempDir() {
        char tmpl[] = "/tmp/kw-config-test-XXXXXX";
        path_ = mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string write(const std::string &name, const std::string &contents) const {
        std::string p = path_ + "/" + name;
        std::ofstream(p, std::ios::binary) << contents;
        return p;
    }
    const std::string &path() const { return path_; }

  private:
    std::string path_;
};

// Every engine option, as kw_conf_dump lists them.
std::vector<std::string> engine_option_names() {
    std::vector<std::string> names;
    kw_conf_t *conf = kw_conf_new();
    kw_conf_dump(
        conf,
        [](const char *name, const char *, const char *, void *opaque) {
            static_cast<std::vector<std::string> *>(opaque)->push_back(name);
        },
        &names);
    kw_conf_free(conf);
    return names;
}

// ---- What a good file becomes ----------------------------------------------------------

TEST(DaemonConfig, EngineOptionsBecomeKwConfSetTextInFileOrder) {
    DaemonConfig c = parsed(
        "workers = 3\n"
        "[sweep]\n"
        "interval = \"250ms\"\n"
        "[redis]\n"
        "url = \"redis://127.0.0.1:7000\"\n"
        "[dedupe]\n"
        "enable = true\n"
        "[retry]\n"
        "max = 60000\n");
    EXPECT_EQ(c.engine, (Pairs{{"workers", "3"},
                               {"sweep.interval", "250ms"},
                               {"redis.url", "redis://127.0.0.1:7000"},
                               {"dedupe.enable", "true"},
                               {"retry.max", "60000"}}));
    ASSERT_EQ(c.engine_places.size(), 5u);
    EXPECT_EQ(c.engine_places[0].text, "kw.toml:1:11");
    EXPECT_EQ(c.engine_places[1].text, "kw.toml:3:12");
    EXPECT_EQ(c.engine_option("sweep.interval"), "250ms");
    EXPECT_EQ(c.engine_option("lease"), "");
    EXPECT_EQ(c.path, "kw.toml");
}

TEST(DaemonConfig, DottedKeysAndInlineTablesAreTheSameOptions) {
    DaemonConfig c = parsed(
        "sweep.interval = \"1s\"\n"
        "retry = { base = \"2s\", max = \"1m\" }\n");
    EXPECT_EQ(c.engine,
              (Pairs{{"sweep.interval", "1s"}, {"retry.base", "2s"}, {"retry.max", "1m"}}));
}

TEST(DaemonConfig, SeveralSeedsAndQueuesAreJoinedWithCommas) {
    DaemonConfig c = parsed(
        "queues = [\"emails\", \"invoices\"]\n"
        "[redis]\n"
        "url = [\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"]\n");
    EXPECT_EQ(c.engine_option("redis.url"), "redis://10.0.0.1:7000,redis://10.0.0.2:7000");
    EXPECT_EQ(c.engine_option("queues"), "emails,invoices");
}

TEST(DaemonConfig, DefaultsWhenTheFileSaysNothing) {
    DaemonConfig c = parsed("");
    EXPECT_TRUE(c.engine.empty());
    EXPECT_TRUE(c.handlers.empty());
    EXPECT_TRUE(c.http.enabled);
    EXPECT_EQ(c.http.listen, "127.0.0.1:9464");
    EXPECT_EQ(c.http.token, "");
    EXPECT_EQ(c.log.format, LogFormat::Json);
    EXPECT_EQ(c.log.level, KW_LOG_INFO);
    EXPECT_EQ(c.log.file, "");
    EXPECT_EQ(c.metrics.queue_interval_ms, 10000);
}

TEST(DaemonConfig, HttpLogAndMetricsSections) {
    DaemonConfig c = parsed(
        "[http]\n"
        "enabled = false\n"
        "listen = \"[::1]:0\"\n"
        "token = \"t0k\"\n"
        "[log]\n"
        "format = \"text\"\n"
        "level = \"warn\"\n"
        "file = \"/var/log/kw.log\"\n"
        "[metrics]\n"
        "queue_interval = \"2s\"\n");
    EXPECT_FALSE(c.http.enabled);
    EXPECT_EQ(c.http.listen, "[::1]:0");
    EXPECT_EQ(c.http.token, "t0k");
    EXPECT_EQ(c.log.format, LogFormat::Text);
    EXPECT_EQ(c.log.level, KW_LOG_WARN);
    EXPECT_EQ(c.log.file, "/var/log/kw.log");
    EXPECT_EQ(c.metrics.queue_interval_ms, 2000);
    EXPECT_EQ(parsed("[metrics]\nqueue_interval = 1500\n").metrics.queue_interval_ms, 1500);
    EXPECT_EQ(parsed("[log]\nlevel = \"debug\"\n").log.level, KW_LOG_DEBUG);
    EXPECT_EQ(parsed("[log]\nlevel = \"error\"\n").log.level, KW_LOG_ERROR);
}

TEST(DaemonConfig, HandlersKeepTheirFilterAndOptionsInFileOrder) {
    DaemonConfig c = parsed(
        "[[handler]]\n"
        "plugin = \"stream\"\n"
        "name = \"to-stream\"\n"
        "queue = \"keys\"\n"
        "events = [\"expired\", \"evicted\"]\n"
        "db = 0\n"
        "prefix = \"session:\"\n"
        "glob = \"session:*\"\n"
        "[handler.options]\n"
        "stream = \"kw:out\"\n"
        "maxlen = 1000\n"
        "dedupe_ms = 0\n"
        "[[handler]]\n"
        "plugin = \"webhook\"\n"
        "events = \"task\"\n"
        "queue = \"emails\"\n"
        "db = \"*\"\n"
        "options = { url = \"http://127.0.0.1:1/x\", secret = true }\n");
    ASSERT_EQ(c.handlers.size(), 2u);
    const HandlerConfig &a = c.handlers[0];
    EXPECT_EQ(a.plugin, "stream");
    EXPECT_EQ(a.name, "to-stream");
    EXPECT_EQ(a.place.text, "kw.toml:1:1");
    EXPECT_EQ(a.filter, (Pairs{{"queue", "keys"},
                               {"events", "expired,evicted"},
                               {"db", "0"},
                               {"prefix", "session:"},
                               {"glob", "session:*"}}));
    EXPECT_EQ(a.options, (Pairs{{"stream", "kw:out"}, {"maxlen", "1000"}, {"dedupe_ms", "0"}}));
    const HandlerConfig &b = c.handlers[1];
    EXPECT_EQ(b.plugin, "webhook");
    EXPECT_EQ(b.name, "");
    EXPECT_EQ(b.place.text, "kw.toml:13:1");
    EXPECT_EQ(b.filter, (Pairs{{"events", "task"}, {"queue", "emails"}, {"db", "*"}}));
    EXPECT_EQ(b.options, (Pairs{{"url", "http://127.0.0.1:1/x"}, {"secret", "true"}}));
}

TEST(DaemonConfig, EventsMayBeOneCommaSeparatedStringOrTheWildcard) {
    DaemonConfig c = parsed(
        "[[handler]]\nplugin = \"a\"\nevents = \"expired, del\"\n"
        "[[handler]]\nplugin = \"b\"\nevents = \"*\"\n"
        "[[handler]]\nplugin = \"c\"\nevents = [\"hset\", \"task\"]\n");
    EXPECT_EQ(c.handlers[0].filter, (Pairs{{"events", "expired,del"}}));
    EXPECT_EQ(c.handlers[1].filter, (Pairs{{"events", "*"}}));
    EXPECT_EQ(c.handlers[2].filter, (Pairs{{"events", "hset,task"}}));
}

TEST(DaemonConfig, PrefixAndGlobMayHoldAnyBytes) {
    DaemonConfig c = parsed("[[handler]]\nplugin = \"stream\"\nprefix = \"a\\u0000b\"\n");
    ASSERT_EQ(c.handlers[0].filter.size(), 1u);
    EXPECT_EQ(c.handlers[0].filter[0].second, std::string("a\0b", 3));
}

TEST(DaemonConfig, TwoInstancesOfOnePluginWithTheirOwnNamesAreFine) {
    DaemonConfig c = parsed(
        "[[handler]]\nplugin = \"stream\"\n"
        "[[handler]]\nplugin = \"stream\"\nname = \"second\"\n");
    EXPECT_EQ(c.handlers.size(), 2u);
}

// The [tls] files too: a service's working directory is usually /.
TEST(DaemonConfig, TlsFilesAreRelativeToTheConfigFile) {
    TempDir dir;
    const std::string path =
        dir.write("kw.toml",
                  "[redis]\nurl = \"rediss://127.0.0.1:6380\"\n"
                  "[tls]\nca_file = \"certs/ca.crt\"\n"
                  "cert_file = \"client.crt\"\nkey_file = \"/abs/client.key\"\n"
                  "server_name = \"redis.internal\"\n");
    DaemonConfig c;
    std::string err;
    ASSERT_TRUE(load_daemon_config(path, &c, &err)) << err;
    EXPECT_EQ(c.engine_option("tls.ca_file"), dir.path() + "/certs/ca.crt");
    EXPECT_EQ(c.engine_option("tls.cert_file"), dir.path() + "/client.crt");
    EXPECT_EQ(c.engine_option("tls.key_file"), "/abs/client.key");
    EXPECT_EQ(c.engine_option("tls.server_name"), "redis.internal");  // a name, not a path
}

TEST(DaemonConfig, RelativePathsAreRelativeToTheConfigFile) {
    TempDir dir;
    dir.write("pw", "s3cret\n");
    dir.write("tok", "t0ken\r\n");
    std::string path = dir.write("kw.toml",
                                 "[redis]\npassword_file = \"pw\"\n"
                                 "[http]\ntoken_file = \"tok\"\n"
                                 "[log]\nfile = \"logs/kw.log\"\n"
                                 "[[handler]]\nplugin = \"./plugins/p.so\"\n"
                                 "[[handler]]\nplugin = \"/abs/q.so\"\n");
    DaemonConfig c;
    std::string err;
    ASSERT_TRUE(load_daemon_config(path, &c, &err)) << err;
    EXPECT_EQ(c.path, path);
    EXPECT_EQ(c.engine, (Pairs{{"redis.password", "s3cret"}}));
    EXPECT_EQ(c.engine_places[0].text, path + ":2:17");
    EXPECT_EQ(c.http.token, "t0ken");
    EXPECT_EQ(c.log.file, dir.path() + "/logs/kw.log");
    EXPECT_EQ(c.handlers[0].plugin, dir.path() + "/./plugins/p.so");
    EXPECT_EQ(c.handlers[1].plugin, "/abs/q.so");
}

// A value ending in .so is a file (relative to the config's directory), and a handler
// without a name gets one the instance-name rule accepts: the file's name without ".so",
// with '_' for what the rule refuses.
TEST(DaemonConfig, APluginFileEndingInSoIsAPathAndItsNameIsMadeValid) {
    TempDir dir;
    std::string path = dir.write("kw.toml",
                                 "[[handler]]\nplugin = \"rec.so\"\n"
                                 "[[handler]]\nplugin = \"/x/recorder-v1.2.so\"\n"
                                 "[[handler]]\nplugin = \"/x/recorder v1.3.so\"\nname = \"r3\"\n"
                                 "[[handler]]\nplugin = \"stream\"\n");
    DaemonConfig c;
    std::string err;
    ASSERT_TRUE(load_daemon_config(path, &c, &err)) << err;
    EXPECT_EQ(c.handlers[0].plugin, dir.path() + "/rec.so");
    EXPECT_EQ(instance_name(c.handlers[0]), "rec");
    EXPECT_EQ(c.handlers[1].name, "");
    EXPECT_EQ(instance_name(c.handlers[1]), "recorder-v1_2");
    EXPECT_EQ(instance_name(c.handlers[2]), "r3");
    EXPECT_EQ(instance_name(c.handlers[3]), "stream");
    EXPECT_EQ(
        instance_name(
            parsed("[[handler]]\nplugin = \"/x/" + std::string(70, 'a') + ".so\"\n").handlers[0]),
        std::string(64, 'a'));
}

// Each [handler.options] value keeps its own line, for a plugin's refusal of it.
TEST(DaemonConfig, EveryPluginOptionKeepsItsPlace) {
    DaemonConfig c = parsed(
        "[[handler]]\nplugin = \"exec\"\n[handler.options]\n"
        "argv0 = \"/bin/true\"\nconcurrency = 0\n");
    ASSERT_EQ(c.handlers[0].option_places.size(), 2u);
    EXPECT_EQ(c.handlers[0].option_places[0].text, "kw.toml:4:1");
    EXPECT_EQ(c.handlers[0].option_places[1].text, "kw.toml:5:1");
}

// ---- TOML syntax and the file itself ----------------------------------------------------

TEST(DaemonConfigErrors, TomlSyntaxErrorCarriesTomlPlusPlusPosition) {
    EXPECT_EQ(error_of("lease = \"30s\"\nworkers = \n"),
              "kw.toml:2:11: TOML syntax error: Error while parsing key-value pair: expected "
              "value, saw '\\n'");
    EXPECT_EQ(error_of("lease = 1\nlease = 2\n"),
              "kw.toml:2:9: TOML syntax error: Error while parsing key-value pair: cannot "
              "redefine existing integer 'lease'");
}

TEST(DaemonConfigErrors, UnreadableFileNamesThePathAndTheReason) {
    DaemonConfig c;
    std::string err;
    EXPECT_FALSE(load_daemon_config("/nonexistent/kw.toml", &c, &err));
    EXPECT_EQ(err, "cannot read /nonexistent/kw.toml: No such file or directory");
    TempDir dir;
    EXPECT_FALSE(load_daemon_config(dir.path(), &c, &err));
    EXPECT_EQ(err, "cannot read " + dir.path() + ": Is a directory");
}

// ---- Unknown keys ----------------------------------------------------------------------

TEST(DaemonConfigErrors, UnknownKeyIsRefusedWithASuggestionAndTheValidKeys) {
    EXPECT_EQ(error_of("[sweep]\nintervall = \"1s\"\n"),
              "kw.toml:2:1: [sweep] intervall: unknown key (did you mean 'interval'?); valid "
              "keys in [sweep]: batch, interval, scan_interval");
    EXPECT_EQ(error_of("[redis]\nurl = \"redis://h:1\"\n  pasword = \"x\"\n"),
              "kw.toml:3:3: [redis] pasword: unknown key (did you mean 'password'?); valid keys "
              "in [redis]: command_timeout, connect_timeout, mode, password, password_file, "
              "url, user");
}

TEST(DaemonConfigErrors, UnknownTopLevelNameListsTablesAndOptions) {
    std::string err = error_of("[sweeep]\ninterval = \"1s\"\n");
    EXPECT_EQ(err.rfind("kw.toml:1:2: sweeep: unknown key (did you mean 'sweep'?); valid keys at "
                        "the top level: adopt, catchup, cluster, dedupe, ",
                        0),
              0u)
        << err;
    for (const char *name : {"handler", "http", "lease", "log", "metrics", "redis"})
        EXPECT_NE(err.find(std::string(" ") + name + ","), std::string::npos) << name << err;
    EXPECT_EQ(err.substr(err.size() - 9), ", workers") << err;
    // Far from every name: no suggestion, still the list.
    err = error_of("colour = 1\n");
    EXPECT_EQ(err.rfind("kw.toml:1:1: colour: unknown key; valid keys at the top level: ", 0), 0u)
        << err;
}

TEST(DaemonConfigErrors, UnknownKeyInTheDaemonsOwnSections) {
    EXPECT_EQ(error_of("[http]\ntokn = \"x\"\n"),
              "kw.toml:2:1: [http] tokn: unknown key (did you mean 'token'?); valid keys in "
              "[http]: admin, enabled, listen, token, token_file");
    EXPECT_EQ(error_of("[log]\nlevle = \"info\"\n"),
              "kw.toml:2:1: [log] levle: unknown key (did you mean 'level'?); valid keys in "
              "[log]: file, format, level");
    EXPECT_EQ(error_of("[metrics]\ninterval = \"1s\"\n"),
              "kw.toml:2:1: [metrics] interval: unknown key (did you mean 'queue_interval'?); "
              "valid keys in [metrics]: queue_interval");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevnts = \"expired\"\n"),
              "kw.toml:3:1: [[handler]] #1 evnts: unknown key (did you mean 'events'?); valid "
              "keys in [[handler]] #1: db, events, glob, name, options, plugin, prefix, queue");
}

TEST(DaemonConfigErrors, KeyWrittenInTheWrongTableSaysWhereItBelongs) {
    // TOML's trap: a key below a table header belongs to that table.
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nlease = \"1m\"\n"),
              "kw.toml:3:1: [[handler]] #1 lease: unknown key here: lease is a top-level key: "
              "move it above the first [table] header (in TOML a key belongs to the table whose "
              "header is above it); valid keys in [[handler]] #1: db, events, glob, name, "
              "options, plugin, prefix, queue");
    EXPECT_EQ(error_of("[redis]\ntimeout = \"1s\"\n"),
              "kw.toml:2:1: [redis] timeout: unknown key here: timeout is a key of [health], "
              "[hold] or [stop]; valid keys in [redis]: command_timeout, connect_timeout, mode, "
              "password, password_file, url, user");
    EXPECT_EQ(error_of("[sweep]\nlisten = \"127.0.0.1:1\"\n"),
              "kw.toml:2:1: [sweep] listen: unknown key here: listen is a key of [http]; valid "
              "keys in [sweep]: batch, interval, scan_interval");
}

// ---- Wrong TOML types ------------------------------------------------------------------

TEST(DaemonConfigErrors, WrongTypesAreNamed) {
    EXPECT_EQ(error_of("lease = 1.5\n"),
              "kw.toml:1:9: lease: expected a string, an integer or a boolean, got a "
              "floating-point number (1.5)");
    EXPECT_EQ(error_of("[redis]\nmode = [\"auto\"]\n"),
              "kw.toml:2:8: [redis] mode: expected a string, an integer or a boolean, got an "
              "array");
    EXPECT_EQ(error_of("redis = \"redis://h:1\"\n"),
              "kw.toml:1:9: redis: expected a table ([redis] holding command_timeout, "
              "connect_timeout, mode, password, password_file, url, user), got a string "
              "('redis://h:1')");
    EXPECT_EQ(error_of("[sweep.interval]\nx = 1\n"),
              "kw.toml:1:1: [sweep] interval: expected a string, an integer or a boolean, got a "
              "table");
    EXPECT_EQ(error_of("[redis]\nurl = [\"redis://h:1\", 2]\n"),
              "kw.toml:2:23: [redis] url: expected a string, got an integer (2)");
    EXPECT_EQ(error_of("[http]\nenabled = \"yes\"\n"),
              "kw.toml:2:11: [http] enabled: expected a boolean (true or false), got a string "
              "('yes')");
    EXPECT_EQ(error_of("[http]\nlisten = 9464\n"),
              "kw.toml:2:10: [http] listen: expected a string, got an integer (9464)");
    EXPECT_EQ(error_of("http = 1\n"),
              "kw.toml:1:8: http: expected a table ([http]), got an integer (1)");
    EXPECT_EQ(error_of("[metrics]\nqueue_interval = true\n"),
              "kw.toml:2:18: [metrics] queue_interval: expected a duration (a string such as "
              "\"30s\", or an integer of milliseconds), got a boolean (true)");
    // A long value is cut, never inside a UTF-8 sequence.
    EXPECT_EQ(error_of("[http]\nenabled = \"" + std::string(55, 'x') + "\u00e9\u00e9\"\n"),
              "kw.toml:2:11: [http] enabled: expected a boolean (true or false), got a string "
              "('" +
                  std::string(55, 'x') + "...)");
    // A secret's value is never shown, not even when its type is wrong.
    EXPECT_EQ(error_of("[redis]\nurl = \"redis://h:1\"\npassword = 1234.5678\n"),
              "kw.toml:3:12: [redis] password: expected a string, an integer or a boolean, got "
              "a floating-point number");
    EXPECT_EQ(error_of("[http]\ntoken = 123456\n"),
              "kw.toml:2:9: [http] token: expected a string, got an integer");
}

TEST(DaemonConfigErrors, WrongTypesInHandlers) {
    EXPECT_EQ(error_of("[handler]\nplugin = \"stream\"\n"),
              "kw.toml:1:1: handler: expected an array of tables (one [[handler]] per plugin "
              "instance), got a table: write [[handler]]");
    EXPECT_EQ(error_of("handler = [1]\n"),
              "kw.toml:1:12: handler: expected a table per handler ([[handler]]), got an integer "
              "(1)");
    EXPECT_EQ(error_of("[[handler]]\nplugin = 1\n"),
              "kw.toml:2:10: [[handler]] #1 plugin: expected a string, got an integer (1)");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = [\"expired\", 1]\n"),
              "kw.toml:3:22: [[handler]] #1 events: expected a string, got an integer (1)");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = { expired = true }\n"),
              "kw.toml:3:10: [[handler]] #1 events: expected a string or an array of strings, "
              "got a table");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\ndb = 1.0\n"),
              "kw.toml:3:6: [[handler]] #1 db: expected an integer or \"*\", got a "
              "floating-point number (1.0)");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\noptions = \"stream=x\"\n"),
              "kw.toml:3:11: [[handler]] #1 options: expected a table ([handler.options] below "
              "its [[handler]]), got a string ('stream=x')");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\n[handler.options]\nmaxlen = [1]\n"),
              "kw.toml:4:10: [[handler]] #1 options.maxlen: expected a string, an integer or a "
              "boolean, got an array");
}

TEST(DaemonConfigErrors, NulCharacterInTextIsRefused) {
    EXPECT_EQ(error_of("namespace = \"kw\\u0000x\"\n"),
              "kw.toml:1:13: namespace: holds a NUL character (\\u0000): remove it");
}

// ---- Values refused by kw_conf_set / kw_filter_set, quoted ------------------------------

TEST(DaemonConfigErrors, EngineValueErrorQuotesTheValueWithKwConfSetsMessage) {
    EXPECT_EQ(error_of("[sweep]\ninterval = \"5x\"\n"),
              "kw.toml:2:12: [sweep] interval: '5x' is not a duration: use a whole number with a "
              "unit, e.g. 500ms, 30s, 5m, 1h, 2d (a plain number means milliseconds)");
    EXPECT_EQ(error_of("workers = 0\n"),
              "kw.toml:1:11: workers: '0' is not a whole number from 1 to 256");
    EXPECT_EQ(error_of("[redis]\nmode = \"sharded\"\n"),
              "kw.toml:2:8: [redis] mode: 'sharded' is not a mode: use auto, standalone or "
              "cluster");
    EXPECT_EQ(error_of("[tls]\nverify = \"maybe\"\n"),
              "kw.toml:2:10: [tls] verify: 'maybe' is not a boolean: use true or false");
}

TEST(DaemonConfigErrors, ListItemErrorPointsAtTheItem) {
    EXPECT_EQ(error_of("queues = [\"emails\", \"bad queue\"]\n"),
              "kw.toml:1:21: queues: queue name 'bad queue' is not valid: use 1 to 200 "
              "characters without '{', '}', ':' or spaces");
    EXPECT_EQ(error_of("[redis]\nurl = []\n"),
              "kw.toml:2:7: [redis] url: empty array: give at least one");
}

TEST(DaemonConfigErrors, UrlErrorsNeverShowThePassword) {
    std::string err = error_of("[redis]\nurl = \"redis://app:hunter2@db:99999\"\n");
    EXPECT_EQ(err,
              "kw.toml:2:7: [redis] url: bad Redis URL 'redis://app:***@db:99999': port '99999' "
              "is not a number from 1 to 65535; use "
              "redis://[user:password@]host[:port][/db][?db=N] (rediss:// for TLS), "
              "unix:///path/to.sock[?db=N] or "
              "redis+sentinel://[user:password@]host1:26379,host2:26379/MASTERNAME[/db]");
    err = error_of("[redis]\nurl = [\"redis://a:1\", \"redis://app:hunter2@b:0\"]\n");
    EXPECT_EQ(err.rfind("kw.toml:2:23: [redis] url: bad Redis URL 'redis://app:***@b:0': ", 0), 0u)
        << err;
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
    // Seeds in one comma-separated string: each seed's password is hidden.
    err = error_of("[redis]\nurl = \"redis://a:1,redis://app:hunter2@b:0\"\n");
    EXPECT_EQ(err.rfind("kw.toml:2:7: [redis] url: bad Redis URL 'redis://app:***@b:0': ", 0), 0u)
        << err;
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
}

TEST(DaemonConfigErrors, OptionsFineAloneButNotTogetherAreRefused) {
    // At the first option the engine's message names that the file sets.
    EXPECT_EQ(error_of("[reconnect]\nmax = \"10s\"\nmin = \"20s\"\n"),
              "kw.toml:3:7: [reconnect] min: reconnect.min (20000ms) is above reconnect.max "
              "(10000ms): lower reconnect.min or raise reconnect.max");
    EXPECT_EQ(error_of("lease = \"1m\"\n[hold]\ntimeout = \"30s\"\n"),
              "kw.toml:3:11: [hold] timeout: hold.timeout (30000ms) is shorter than lease "
              "(60000ms): items would be taken back before their first lease ran out; raise "
              "hold.timeout or lower lease");
    EXPECT_EQ(error_of("lease = \"10m\"\n"),
              "kw.toml:1:9: lease: hold.timeout (300000ms) is shorter than lease (600000ms): "
              "items would be taken back before their first lease ran out; raise hold.timeout "
              "or lower lease");
}

TEST(DaemonConfigErrors, FilterValueErrorQuotesTheValueWithKwFilterSetsMessage) {
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\ndb = \"x\"\n"),
              "kw.toml:3:6: [[handler]] #1 db: 'x' is not a database number: use 0, 1, ... or * "
              "for any");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nqueue = \"a b\"\n"),
              "kw.toml:3:9: [[handler]] #1 queue: queue name 'a b' is not valid: use 1 to 200 "
              "characters without '{', '}', ':' or spaces");
}

TEST(DaemonConfigErrors, UnknownEventIsNamedWithASuggestion) {
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = [\"expired\", \"expird\"]\n"),
              "kw.toml:3:22: [[handler]] #1 events: unknown event 'expird' (did you mean "
              "'expired'?); use names Redis publishes (e.g. expired, evicted, del, set, expire), "
              "\"task\" for delayed tasks, or \"*\"");
    // The names Redis publishes (core/redis/keyspace_events.h): never "zrembyscore".
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = \"zrembyscore\"\n"),
              "kw.toml:3:10: [[handler]] #1 events: unknown event 'zrembyscore' (did you mean "
              "'zremrangebyscore'?); use names Redis publishes (e.g. expired, evicted, del, set, "
              "expire), \"task\" for delayed tasks, or \"*\"");
    EXPECT_TRUE(
        error_of("[[handler]]\nplugin = \"stream\"\nevents = \"zremrangebyscore\"\n").empty());
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = [\"*\", \"del\"]\n"),
              "kw.toml:3:11: [[handler]] #1 events: '*' stands alone: write events = \"*\" or "
              "list the names");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = \"expired,,del\"\n"),
              "kw.toml:3:10: [[handler]] #1 events: empty event name in 'expired,,del': write "
              "events = [\"expired\", \"del\"]");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nevents = []\n"),
              "kw.toml:3:10: [[handler]] #1 events: empty array: name at least one event, or "
              "\"*\" for all");
}

TEST(DaemonConfigErrors, DaemonSectionValuesAreQuoted) {
    EXPECT_EQ(error_of("[log]\nlevel = \"verbose\"\n"),
              "kw.toml:2:9: [log] level: 'verbose' is not a log level: use debug, info, warn or "
              "error");
    EXPECT_EQ(error_of("[log]\nformat = \"xml\"\n"),
              "kw.toml:2:10: [log] format: 'xml' is not a log format: use \"json\" or \"text\"");
    EXPECT_EQ(error_of("[log]\nfile = \"\"\n"),
              "kw.toml:2:8: [log] file: empty path: leave file out to log to stderr");
    EXPECT_EQ(error_of("[metrics]\nqueue_interval = \"10ms\"\n"),
              "kw.toml:2:18: [metrics] queue_interval: '10ms' is too short; the minimum is 100ms");
    EXPECT_EQ(error_of("[metrics]\nqueue_interval = \"often\"\n"),
              "kw.toml:2:18: [metrics] queue_interval: 'often' is not a duration: use a whole "
              "number with a unit, e.g. 500ms, 30s, 5m, 1h, 2d (a plain number means "
              "milliseconds)");
}

// ---- [http] listen, token -------------------------------------------------------------

TEST(DaemonConfigErrors, ListenMustBeHostColonPort) {
    EXPECT_EQ(error_of("[http]\nlisten = \"9464\"\n"),
              "kw.toml:2:10: [http] listen: '9464' is not host:port: no port: write host:port, "
              "e.g. \"127.0.0.1:9464\"");
    EXPECT_EQ(error_of("[http]\nlisten = \":9464\"\n"),
              "kw.toml:2:10: [http] listen: ':9464' is not host:port: no host: write host:port "
              "(\"0.0.0.0:9464\" listens on every IPv4 interface)");
    EXPECT_EQ(error_of("[http]\nlisten = \"::1:9464\"\n"),
              "kw.toml:2:10: [http] listen: '::1:9464' is not host:port: an IPv6 address needs "
              "brackets: [address]:port, e.g. \"[::1]:9464\"");
    EXPECT_EQ(error_of("[http]\nlisten = \"[::1]9464\"\n"),
              "kw.toml:2:10: [http] listen: '[::1]9464' is not host:port: an IPv6 address is "
              "written [address]:port, e.g. \"[::1]:9464\"");
    EXPECT_EQ(error_of("[http]\nlisten = \"[localhost]:9464\"\n"),
              "kw.toml:2:10: [http] listen: '[localhost]:9464' is not host:port: brackets hold "
              "only an IPv6 address: write host:port for the others");
    for (const char *bad : {"h:65536", "h:-1", "h:http", "h:"})
        EXPECT_EQ(error_of(std::string("[http]\nlisten = \"") + bad + "\"\n"),
                  std::string("kw.toml:2:10: [http] listen: '") + bad +
                      "' is not host:port: the port is not a number from 0 to 65535 (0: any "
                      "free port)");
    EXPECT_EQ(parsed("[http]\nlisten = \"localhost:65535\"\n").http.listen, "localhost:65535");
}

TEST(DaemonConfigErrors, TokenGivenTwiceOrEmptyIsRefused) {
    TempDir dir;
    std::string tok = dir.write("tok", "abc\n");
    EXPECT_EQ(error_of("[http]\ntoken = \"x\"\ntoken_file = \"" + tok + "\"\n"),
              "kw.toml:3:14: [http] token_file: token is set too: give the token once, with "
              "token or token_file");
    EXPECT_EQ(error_of("[http]\ntoken = \"\"\n"),
              "kw.toml:2:9: [http] token: empty token: leave token out to serve without one");
}

TEST(DaemonConfigErrors, AdminWithoutATokenIsRefused) {
    EXPECT_EQ(error_of("[http]\nadmin = true\n"),
              "kw.toml:2:9: [http] admin: the dashboard's actions (replay, purge) need a token: "
              "set [http] token or token_file, or leave admin out");
    EXPECT_TRUE(parsed("[http]\nadmin = true\ntoken = \"t\"\n").http.admin);
    EXPECT_FALSE(parsed("[http]\nadmin = false\n").http.admin);
    EXPECT_FALSE(parsed("[http]\ntoken = \"t\"\n").http.admin);
}

// ---- Secret files ----------------------------------------------------------------------

TEST(DaemonConfigErrors, UnreadablePasswordFileNamesPathAndReason) {
    EXPECT_EQ(error_of("[redis]\npassword_file = \"/nonexistent/pw\"\n"),
              "kw.toml:2:17: [redis] password_file: cannot read /nonexistent/pw: No such file "
              "or directory");
    TempDir dir;  // a directory opens but cannot be read: EISDIR, as root too
    EXPECT_EQ(
        error_of("[redis]\npassword_file = \"" + dir.path() + "\"\n"),
        "kw.toml:2:17: [redis] password_file: cannot read " + dir.path() + ": Is a directory");
}

TEST(DaemonConfigErrors, EmptyPasswordFileIsRefused) {
    TempDir dir;
    std::string pw = dir.write("pw", "\n");
    EXPECT_EQ(error_of("[redis]\npassword_file = \"" + pw + "\"\n"),
              "kw.toml:2:17: [redis] password_file: " + pw + " is empty: write the secret in it");
}

TEST(DaemonConfigErrors, PasswordAndPasswordFileTogetherAreRefusedWithoutShowingEither) {
    TempDir dir;
    std::string pw = dir.write("pw", "hunter2\n");
    std::string err = error_of("[redis]\npassword_file = \"" + pw + "\"\npassword = \"letmein\"\n");
    EXPECT_EQ(err,
              "kw.toml:2:17: [redis] password_file: password is set too (at kw.toml:3:12): give "
              "the password once, with password or password_file");
    EXPECT_EQ(err.find("hunter2"), std::string::npos);
    EXPECT_EQ(err.find("letmein"), std::string::npos);
    DaemonConfig c = parsed("[redis]\npassword_file = \"" + pw + "\"\n");
    EXPECT_EQ(c.engine_option("redis.password"), "hunter2");
}

// ---- [[handler]] -----------------------------------------------------------------------

TEST(DaemonConfigErrors, HandlerWithoutPluginIsRefused) {
    EXPECT_EQ(error_of("[[handler]]\nname = \"x\"\nevents = \"expired\"\n"),
              "kw.toml:1:1: [[handler]] #1: no plugin: add plugin = \"stream\" (a built-in's "
              "name) or the path of a plugin's .so");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"\"\n"),
              "kw.toml:2:10: [[handler]] #1 plugin: empty: name a built-in (e.g. \"stream\") or a "
              "plugin's .so");
}

TEST(DaemonConfigErrors, TwoHandlersWithTheSameNameAreRefused) {
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\n\n[[handler]]\nplugin = \"stream\"\n"),
              "kw.toml:4:1: [[handler]] #2: a second handler named 'stream' (the first is "
              "[[handler]] #1 at kw.toml:1:1): give each instance its own name = \"...\"");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"webhook\"\nname = \"out\"\n"
                       "[[handler]]\nplugin = \"stream\"\nname = \"out\"\n"),
              "kw.toml:4:1: [[handler]] #2: a second handler named 'out' (the first is "
              "[[handler]] #1 at kw.toml:1:1): give each instance its own name = \"...\"");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nname = \"\"\n"),
              "kw.toml:3:8: [[handler]] #1 name: empty: give a name, or leave name out to use "
              "the plugin's");
    // Names made from files: two files of one name clash as two built-ins do.
    EXPECT_EQ(
        error_of("[[handler]]\nplugin = \"/a/rec.so\"\n[[handler]]\nplugin = \"/b/rec.so\"\n"),
        "kw.toml:3:1: [[handler]] #2: a second handler named 'rec' (the first is "
        "[[handler]] #1 at kw.toml:1:1): give each instance its own name = \"...\"");
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"/a/.so\"\n"),
              "kw.toml:2:10: [[handler]] #1 plugin: no instance name can be made from it: add "
              "name = \"...\" to this [[handler]] (1 to 64 letters, digits, '_' or '-')");
}

TEST(DaemonConfigErrors, HandlerNameOutsideThePluginInstanceRuleIsRefused) {
    EXPECT_EQ(error_of("[[handler]]\nplugin = \"stream\"\nname = \"to stream\"\n"),
              "kw.toml:3:8: [[handler]] #1 name: 'to stream' is not a valid name: use 1 to 64 "
              "letters, digits, '_' or '-'");
}

// ---- [[adopt]] and [catchup] ---------------------------------------------------------------

TEST(DaemonConfigAdopt, TablesBecomeOneRuleTextInFileOrder) {
    DaemonConfig c = parsed(
        "[[adopt]]\nprefix = \"spring:session:sessions:expires:\"\nqueue = \"sessions\"\n"
        "[[adopt]]\nsnapshot = true\nglob = \"cache:*:v2\"\n"
        "[[adopt]]\nprefix = \"a b;\\u0000\"\ndb = 0\n"
        "[catchup]\nrate = 100000\nenable = true\n");
    EXPECT_EQ(c.engine_option("adopt.rules"),
              "prefix=spring:session:sessions:expires: queue=sessions;"
              "glob=cache:*:v2 snapshot=true;prefix=a\\x20b\\x3b\\x00 db=0");
    EXPECT_EQ(c.engine_option("catchup.rate"), "100000");
    EXPECT_EQ(c.engine_option("catchup.enable"), "true");
    // The engine reads the same rules back in its own words.
    kw_conf_t *conf = kw_conf_new();
    char err[512] = "", got[1024] = "";
    ASSERT_EQ(
        kw_conf_set(conf, "adopt.rules", c.engine_option("adopt.rules").c_str(), err, sizeof err),
        KW_OK)
        << err;
    ASSERT_EQ(kw_conf_get(conf, "adopt.rules", got, sizeof got), KW_OK);
    EXPECT_EQ(std::string(got),
              "prefix=spring:session:sessions:expires: queue=sessions; glob=cache:*:v2 "
              "snapshot=true; prefix=a\\x20b\\x3b\\x00 db=0");
    kw_conf_free(conf);
}

TEST(DaemonConfigAdopt, ASingleAdoptTableIsRefused) {
    EXPECT_EQ(error_of("[adopt]\nprefix = \"sess:\"\n"),
              "kw.toml:1:1: [adopt] is a table; write [[adopt]] (one per rule)");
}

TEST(DaemonConfigAdopt, EachTableNeedsOnePrefixOrGlob) {
    EXPECT_EQ(error_of("[[adopt]]\nqueue = \"sessions\"\n"),
              "kw.toml:1:1: [[adopt]] #1: no prefix or glob: add prefix = \"sess:\" (keys "
              "starting with it) or glob = \"cache:*:v2\"");
    EXPECT_EQ(error_of("[[adopt]]\nprefix = \"a\"\n[[adopt]]\nprefix = \"b\"\nglob = \"c*\"\n"),
              "kw.toml:3:1: [[adopt]] #2: prefix and glob are both given: give one of them (a "
              "rule per [[adopt]] table)");
}

TEST(DaemonConfigAdopt, UnknownKeysAndWrongTypesNameTheTable) {
    EXPECT_EQ(error_of("[[adopt]]\nprefx = \"sess:\"\n"),
              "kw.toml:2:1: [[adopt]] #1 prefx: unknown key (did you mean 'prefix'?); valid keys "
              "in [[adopt]] #1: prefix, glob, db, queue, snapshot");
    EXPECT_EQ(error_of("[[adopt]]\nprefix = \"a\"\nsnapshot = \"yes\"\n"),
              "kw.toml:3:12: [[adopt]] #1 snapshot: expected a boolean (true or false), got a "
              "string ('yes')");
    EXPECT_EQ(error_of("[[adopt]]\nprefix = \"a\"\ndb = \"0\"\n"),
              "kw.toml:3:6: [[adopt]] #1 db: expected an integer, got a string ('0')");
    EXPECT_EQ(error_of("[[adopt]]\nprefix = \"a\"\nqueue = \"x\\u0000\"\n"),
              "kw.toml:3:9: [[adopt]] #1 queue: holds a NUL character (\\u0000): remove it");
    EXPECT_EQ(error_of("adopt = 3\n"),
              "kw.toml:1:9: adopt: expected [[adopt]] tables (one per rule), got an integer (3)");
}

// The library's refusals name the rule; the file's message names the table and the key.
TEST(DaemonConfigAdopt, TheLibrarysRefusalIsPlacedAtTheTableItNames) {
    const std::string err =
        error_of("[[adopt]]\nprefix = \"app:\"\n[[adopt]]\nprefix = \"kw:keys:\"\n");
    EXPECT_EQ(err.rfind("kw.toml:4:10: [[adopt]] #2 prefix: rule 2 (prefix \"kw:keys:\") names "
                        "keys of keywatch's own namespace \"kw\"",
                        0),
              0u)
        << err;
    const std::string db = error_of(
        "[redis]\nurl = \"redis://127.0.0.1:6379/2\"\n[[adopt]]\nprefix = \"s:\"\ndb = 3\n");
    EXPECT_EQ(db.rfind("kw.toml:5:6: [[adopt]] #1 db: rule 1 (prefix \"s:\"): db 3 is not "
                       "redis.url's database 2",
                       0),
              0u)
        << db;
    const std::string queue =
        error_of("queues = [\"jobs\"]\n[[adopt]]\nprefix = \"s:\"\nqueue = \"jobs\"\n");
    EXPECT_EQ(
        queue.rfind("kw.toml:4:9: [[adopt]] #1 queue: rule 1: queue \"jobs\" is a task queue", 0),
        0u)
        << queue;
    const std::string twice = error_of(
        "[[adopt]]\nprefix = \"s:\"\n[[adopt]]\nglob = \"x*\"\n[[adopt]]\nprefix = \"s:\"\n");
    EXPECT_EQ(twice.rfind("kw.toml:6:10: [[adopt]] #3 prefix: rules 1 and 3 are the same", 0), 0u)
        << twice;
}

TEST(DaemonConfigAdopt, MoreRulesThanTheEngineTakesNameTheFirstTooMany) {
    std::string text;
    for (int i = 0; i < 65; i++) text += "[[adopt]]\nprefix = \"p" + std::to_string(i) + ":\"\n";
    const std::string err = error_of(text);
    EXPECT_EQ(err.rfind("kw.toml:130:10: [[adopt]] #65 prefix: 65 rules; at most 64", 0), 0u)
        << err;
}

TEST(DaemonConfigAdopt, AKeyOfAdoptBelowAnotherTableSaysWhereItBelongs) {
    EXPECT_EQ(error_of("[catchup]\nsnapshot = true\n")
                  .rfind("kw.toml:2:1: [catchup] snapshot: unknown key here: snapshot is a key of "
                         "[[adopt]]",
                         0),
              0u);
}

// ---- The shipped example and the reference ---------------------------------------------

TEST(DaemonConfigExample, ShippedExampleParses) {
    DaemonConfig c;
    std::string err;
    ASSERT_TRUE(load_daemon_config(KW_EXAMPLE_CONFIG, &c, &err)) << err;
    EXPECT_EQ(c.engine_option("redis.url"), "redis://127.0.0.1:6379");
    EXPECT_EQ(c.http.listen, "127.0.0.1:9464");
    ASSERT_EQ(c.handlers.size(), 2u);
    EXPECT_EQ(c.handlers[0].plugin, "stream");
    EXPECT_EQ(c.handlers[0].options[0],
              (std::pair<std::string, std::string>{"stream", "keywatch:expired"}));
}

// Each engine option appears in the example (set or commented out) inside its own table,
// so the example shows every table and every option a release knows. adopt.rules is
// written as [[adopt]] tables.
TEST(DaemonConfigExample, ShippedExampleShowsEveryEngineOption) {
    std::string text = slurp(KW_EXAMPLE_CONFIG);
    EXPECT_NE(text.find("\n# [[adopt]]\n# prefix = "), std::string::npos) << "no [[adopt]]";
    for (const std::string &name : engine_option_names()) {
        if (name == "adopt.rules") continue;
        size_t dot = name.rfind('.');
        std::string table = dot == std::string::npos ? "" : name.substr(0, dot);
        std::string key = name.substr(dot == std::string::npos ? 0 : dot + 1);
        size_t start = table.empty() ? 0 : text.find("\n[" + table + "]");
        ASSERT_NE(start, std::string::npos) << "no [" << table << "] in the example";
        size_t end = text.find("\n[", start + 1);
        std::string section = text.substr(start, end == std::string::npos ? end : end - start);
        std::regex line("\n(# )?" + key + " = ");
        EXPECT_TRUE(std::regex_search(section, line)) << name << " is not in the example";
    }
}

// Damaged copies of the example (a byte dropped, changed or repeated; a line dropped or
// repeated; deterministic): each either parses or is refused with a message naming the
// file; nothing throws or crashes (the asan stage runs this too).
TEST(DaemonConfigExample, DamagedExamplesParseOrNameTheFile) {
    const std::string text = slurp(KW_EXAMPLE_CONFIG);
    ASSERT_FALSE(text.empty());
    std::mt19937 rng(13);
    const std::string bytes = "[]=\"'.,#\n{}x1 ";
    int refused = 0;
    for (int i = 0; i < 1000; i++) {
        std::string damaged = text;
        size_t at = rng() % damaged.size();
        switch (rng() % 5) {
            case 0:
                damaged.erase(at, 1);
                break;
            case 1:
                damaged[at] = bytes[rng() % bytes.size()];
                break;
            case 2:
                damaged.insert(at, 1, damaged[at]);
                break;
            default: {  // a whole line dropped or repeated
                size_t start = damaged.rfind('\n', at);
                start = start == std::string::npos ? 0 : start + 1;
                size_t end = damaged.find('\n', at);
                std::string line = damaged.substr(start, end - start + 1);
                if (rng() % 2)
                    damaged.erase(start, line.size());
                else
                    damaged.insert(start, line);
            }
        }
        DaemonConfig c;
        std::string err;
        bool ok = parse_daemon_config(damaged, "kw.toml", &c, &err);
        EXPECT_EQ(ok, err.empty()) << err;
        if (!ok) {
            refused++;
            EXPECT_EQ(err.rfind("kw.toml", 0), 0u) << err << "\n--- from ---\n" << damaged;
        }
    }
    EXPECT_GT(refused, 0);
}

TEST(DaemonConfigExample, ReferenceDocumentsEveryEngineOption) {
    std::string doc = slurp(KW_DAEMON_DOC);
    ASSERT_FALSE(doc.empty());
    for (const std::string &name : engine_option_names())
        EXPECT_NE(doc.find("`" + name + "`"), std::string::npos)
            << name << " is not in docs/daemon.md";
}

}  // namespace
}  // namespace keywatch::cli
