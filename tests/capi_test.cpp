// The C API without a server: version, status table, configuration, filters, engine
// creation and misuse. Each error must come with a code from the table and a message that
// names what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <type_traits>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keywatch.h"
#include "tests/wait.h"

namespace {

using kwtest::stat_reaches;

struct Conf {
    kw_conf_t *c = kw_conf_new();
    ~Conf() { kw_conf_free(c); }
};

std::string get(const kw_conf_t *c, const char *name) {
    char buf[512];
    memset(buf, 'Z', sizeof buf);
    int rc = kw_conf_get(c, name, buf, sizeof buf);
    EXPECT_EQ(rc, KW_OK) << "kw_conf_get(" << name << ") = " << kw_err_name(rc);
    return rc == KW_OK ? std::string(buf) : std::string();
}

// Setting name=value fails with `want`; the errstr names the option, quotes the value and
// mentions every word in `words`; the conf keeps its previous value of name.
void expect_conf_refused(const char *name, const char *value, int want,
                         const std::vector<std::string> &words = {}) {
    Conf conf;
    ASSERT_NE(conf.c, nullptr);
    std::string before = get(conf.c, name);
    char err[512] = "";
    int rc = kw_conf_set(conf.c, name, value, err, sizeof err);
    EXPECT_EQ(rc, want) << name << "=" << value << " gave " << kw_err_name(rc) << ": " << err;
    std::vector<std::string> all = words;
    all.push_back(name);
    if (*value) all.push_back(value);
    for (const auto &w : all)
        EXPECT_NE(std::string(err).find(w), std::string::npos)
            << "errstr for " << name << "=" << value << " does not mention '" << w << "': " << err;
    EXPECT_EQ(get(conf.c, name), before) << "failed set changed " << name;
}

TEST(CApiVersion, RuntimeVersionMatchesHeader) {
    EXPECT_EQ(kw_version(), KW_VERSION);
    EXPECT_STREQ(kw_version_string(), KW_VERSION_STRING);
    EXPECT_EQ(KW_VERSION, (KW_VERSION_MAJOR << 16) | (KW_VERSION_MINOR << 8) | KW_VERSION_PATCH);
    std::string expected = std::to_string(KW_VERSION_MAJOR) + "." +
                           std::to_string(KW_VERSION_MINOR) + "." +
                           std::to_string(KW_VERSION_PATCH);
    EXPECT_EQ(expected, kw_version_string());
}

TEST(CApiStatus, EveryCodeInTheTableHasItsNameAndText) {
    std::set<std::string> texts;
#define KW_TEST_CHECK_(name, code, text)     \
    EXPECT_EQ(static_cast<int>(name), code); \
    EXPECT_STREQ(kw_err_name(code), #name);  \
    EXPECT_STREQ(kw_strerror(code), text);   \
    EXPECT_TRUE(texts.insert(text).second) << "duplicate text " text;
    KW_STATUS_TABLE(KW_TEST_CHECK_)
#undef KW_TEST_CHECK_
    EXPECT_EQ(KW_OK, 0);
    EXPECT_LT(KW_ERR_INVALID_ARG, 0);
}

TEST(CApiStatus, UnknownCodesHaveFallbackNameAndText) {
    for (int code : {1, 42, -999, -1000, INT32_MIN, INT32_MAX}) {
        EXPECT_STREQ(kw_strerror(code), "unknown status") << code;
        EXPECT_STREQ(kw_err_name(code), "KW_ERR_UNKNOWN") << code;
    }
}

TEST(CApiConf, NewConfHoldsTheDocumentedDefaults) {
    Conf conf;
    ASSERT_NE(conf.c, nullptr);
    EXPECT_EQ(get(conf.c, "redis.url"), "redis://127.0.0.1:6379");
    // The number of cores, 1 to 4.
    unsigned cores = std::thread::hardware_concurrency();
    EXPECT_EQ(get(conf.c, "workers"), std::to_string(cores == 0 ? 1 : std::min(cores, 4u)));
    EXPECT_EQ(get(conf.c, "dispatch.queue_size"), "65536");
}

TEST(CApiConf, SetValueReadsBack) {
    Conf conf;
    char err[256] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "workers", "8", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(get(conf.c, "workers"), "8");
    ASSERT_EQ(kw_conf_set(conf.c, "redis.url", "redis://10.0.0.1:7000/2", err, sizeof err), KW_OK)
        << err;
    EXPECT_EQ(get(conf.c, "redis.url"), "redis://10.0.0.1:7000/2");
}

TEST(CApiConf, EveryDocumentedNameIsAccepted) {
    const std::pair<const char *, const char *> options[] = {
        {"redis.url", "redis://127.0.0.1:6380"},
        {"redis.user", "alice"},
        {"redis.password", "secret"},
        {"redis.connect_timeout", "2s"},
        {"notify.enable", "true"},
        {"workers", "2"},
        {"dispatch.queue_size", "1024"},
        {"reconnect.min", "50ms"},
        {"reconnect.max", "5s"},
        {"health.interval", "1s"},
        {"health.timeout", "5s"},
        {"stop.timeout", "3s"},
    };
    Conf conf;
    for (const auto &o : options) {
        char err[256] = "";
        EXPECT_EQ(kw_conf_set(conf.c, o.first, o.second, err, sizeof err), KW_OK)
            << o.first << "=" << o.second << ": " << err;
    }
}

TEST(CApiConf, UnknownNameIsRefusedAndNamed) {
    Conf conf;
    char err[512] = "";
    EXPECT_EQ(kw_conf_set(conf.c, "redis.uri", "redis://h:1", err, sizeof err),
              KW_ERR_UNKNOWN_CONF);
    EXPECT_NE(std::string(err).find("redis.uri"), std::string::npos) << err;
    err[0] = 0;
    EXPECT_EQ(kw_conf_set(conf.c, "", "x", err, sizeof err), KW_ERR_UNKNOWN_CONF);
    EXPECT_NE(err[0], 0) << "no errstr for an empty name";
}

TEST(CApiConf, GetOfUnknownNameIsRefused) {
    Conf conf;
    char buf[64];
    EXPECT_EQ(kw_conf_get(conf.c, "no.such.option", buf, sizeof buf), KW_ERR_UNKNOWN_CONF);
}

TEST(CApiConf, BadWorkerCountsAreRefused) {
    expect_conf_refused("workers", "0", KW_ERR_BAD_VALUE, {"256"});
    expect_conf_refused("workers", "257", KW_ERR_BAD_VALUE, {"256"});
    expect_conf_refused("workers", "abc", KW_ERR_BAD_VALUE);
    expect_conf_refused("workers", "-1", KW_ERR_BAD_VALUE);
    expect_conf_refused("workers", "", KW_ERR_BAD_VALUE);
    expect_conf_refused("workers", "4x", KW_ERR_BAD_VALUE);
}

TEST(CApiConf, BadQueueSizesAreRefused) {
    expect_conf_refused("dispatch.queue_size", "15", KW_ERR_BAD_VALUE, {"16777216"});
    expect_conf_refused("dispatch.queue_size", "16777217", KW_ERR_BAD_VALUE, {"16777216"});
    expect_conf_refused("dispatch.queue_size", "lots", KW_ERR_BAD_VALUE);
}

TEST(CApiConf, BadDurationsAreRefusedWithTheAcceptedForms) {
    for (const char *name : {"redis.connect_timeout", "reconnect.min", "reconnect.max",
                             "health.interval", "health.timeout", "stop.timeout"}) {
        expect_conf_refused(name, "5 parsecs", KW_ERR_BAD_VALUE, {"500ms"});
        expect_conf_refused(name, "-1s", KW_ERR_BAD_VALUE, {"500ms"});
    }
}

TEST(CApiConf, DurationsAcceptUnitsAndPlainMilliseconds) {
    Conf conf;
    for (const char *v : {"500ms", "30s", "5m", "1h", "250"}) {
        char err[256] = "";
        EXPECT_EQ(kw_conf_set(conf.c, "stop.timeout", v, err, sizeof err), KW_OK)
            << v << ": " << err;
    }
}

TEST(CApiConf, BooleansAcceptTheDocumentedSpellings) {
    Conf conf;
    for (const char *v : {"true", "false", "yes", "no", "on", "off", "1", "0"}) {
        char err[256] = "";
        EXPECT_EQ(kw_conf_set(conf.c, "notify.enable", v, err, sizeof err), KW_OK)
            << v << ": " << err;
    }
    expect_conf_refused("notify.enable", "maybe", KW_ERR_BAD_VALUE, {"true"});
}

TEST(CApiConf, MalformedUrlIsRefusedWithUrlError) {
    expect_conf_refused("redis.url", "http://h:1", KW_ERR_URL, {"redis://"});
    expect_conf_refused("redis.url", "redis://h:70000", KW_ERR_URL, {"port"});
    expect_conf_refused("redis.url", "redis://", KW_ERR_URL, {"host"});
}

TEST(CApiConf, PasswordReadsBackMasked) {
    Conf conf;
    char err[256] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "redis.password", "hunter2", err, sizeof err), KW_OK) << err;
    std::string shown = get(conf.c, "redis.password");
    EXPECT_EQ(shown, "***");
}

TEST(CApiConf, UrlPasswordDoesNotReadBack) {
    Conf conf;
    char err[256] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "redis.url", "redis://:hunter2@h:1", err, sizeof err), KW_OK)
        << err;
    EXPECT_EQ(get(conf.c, "redis.url").find("hunter2"), std::string::npos)
        << "the URL's password is readable: " << get(conf.c, "redis.url");
}

TEST(CApiConf, NullErrstrIsAllowed) {
    Conf conf;
    EXPECT_EQ(kw_conf_set(conf.c, "nope", "1", nullptr, 0), KW_ERR_UNKNOWN_CONF);
    EXPECT_EQ(kw_conf_set(conf.c, "workers", "x", nullptr, 0), KW_ERR_BAD_VALUE);
    EXPECT_EQ(kw_conf_set(conf.c, "workers", "3", nullptr, 0), KW_OK);
}

TEST(CApiConf, ErrstrIsTruncatedAndTerminated) {
    Conf conf;
    char err[9];
    memset(err, 'Z', sizeof err);
    ASSERT_EQ(kw_conf_set(conf.c, "no.such.option.with.a.long.name", "1", err, 8),
              KW_ERR_UNKNOWN_CONF);
    EXPECT_LT(strlen(err), 8u);
    EXPECT_EQ(err[8], 'Z') << "wrote past errstr_size";
}

TEST(CApiConf, NullArgumentsAreInvalid) {
    Conf conf;
    EXPECT_EQ(kw_conf_set(nullptr, "workers", "2", nullptr, 0), KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_conf_set(conf.c, nullptr, "2", nullptr, 0), KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_conf_set(conf.c, "workers", nullptr, nullptr, 0), KW_ERR_INVALID_ARG);
    char buf[16];
    EXPECT_EQ(kw_conf_get(nullptr, "workers", buf, sizeof buf), KW_ERR_INVALID_ARG);
}

TEST(CApiConf, GetTruncatesToBuffer) {
    Conf conf;
    char buf[6];
    memset(buf, 'Z', sizeof buf);
    kw_conf_get(conf.c, "redis.url", buf, 5);
    EXPECT_EQ(strlen(buf), 4u);
    EXPECT_EQ(std::string(buf), "redi");
    EXPECT_EQ(buf[5], 'Z');
}

TEST(CApiConf, DupIsIndependent) {
    Conf conf;
    ASSERT_EQ(kw_conf_set(conf.c, "workers", "7", nullptr, 0), KW_OK);
    kw_conf_t *copy = kw_conf_dup(conf.c);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(get(copy, "workers"), "7");
    ASSERT_EQ(kw_conf_set(copy, "workers", "9", nullptr, 0), KW_OK);
    EXPECT_EQ(get(conf.c, "workers"), "7");
    EXPECT_EQ(get(copy, "workers"), "9");
    kw_conf_free(copy);
}

TEST(CApiFree, FreeingNullIsANoOp) {
    kw_conf_free(nullptr);
    kw_filter_free(nullptr);
    kw_engine_free(nullptr);
    kw_free(nullptr);
    SUCCEED();
}

TEST(CApiFilter, UnknownNameIsRefusedAndNamed) {
    kw_filter_t *f = kw_filter_new();
    ASSERT_NE(f, nullptr);
    char err[256] = "";
    EXPECT_EQ(kw_filter_set(f, "keyprefix", "x", err, sizeof err), KW_ERR_UNKNOWN_CONF);
    EXPECT_NE(std::string(err).find("keyprefix"), std::string::npos) << err;
    kw_filter_free(f);
}

TEST(CApiFilter, BadValuesAreRefused) {
    kw_filter_t *f = kw_filter_new();
    ASSERT_NE(f, nullptr);
    char err[256] = "";
    EXPECT_EQ(kw_filter_set(f, "db", "abc", err, sizeof err), KW_ERR_BAD_VALUE);
    EXPECT_NE(std::string(err).find("abc"), std::string::npos) << err;
    err[0] = 0;
    EXPECT_EQ(kw_filter_set(f, "events", "", err, sizeof err), KW_ERR_BAD_VALUE);
    EXPECT_NE(err[0], 0);
    kw_filter_free(f);
}

TEST(CApiFilter, AcceptsEveryDocumentedName) {
    kw_filter_t *f = kw_filter_new();
    ASSERT_NE(f, nullptr);
    char err[256] = "";
    EXPECT_EQ(kw_filter_set(f, "events", "expired,del", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "events", "*", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "db", "3", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "db", "*", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "db", "-1", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "prefix", "user:", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set(f, "glob", "user:[0-9]*", err, sizeof err), KW_OK) << err;
    const char bin[] = {'a', 0, 'b'};
    EXPECT_EQ(kw_filter_set_bytes(f, "prefix", bin, sizeof bin, err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_filter_set_bytes(f, "glob", bin, sizeof bin, err, sizeof err), KW_OK) << err;
    kw_filter_free(f);
}

TEST(CApiEngine, NewWithNullOutIsInvalid) {
    Conf conf;
    char err[256] = "";
    EXPECT_EQ(kw_engine_new(conf.c, nullptr, err, sizeof err), KW_ERR_INVALID_ARG);
}

class CApiEngineTest : public ::testing::Test {
  protected:
    void SetUp() override {
        conf_ = kw_conf_new();
        ASSERT_NE(conf_, nullptr);
        char err[256] = "";
        ASSERT_EQ(kw_engine_new(conf_, &engine_, err, sizeof err), KW_OK) << err;
        ASSERT_NE(engine_, nullptr);
    }
    void TearDown() override {
        kw_engine_free(engine_);
        kw_conf_free(conf_);
    }
    static int noop(kw_event_t *, void *) { return KW_RESULT_ACK; }

    kw_conf_t *conf_ = nullptr;
    kw_engine_t *engine_ = nullptr;
};

TEST_F(CApiEngineTest, ConfIsCopiedSoTheCallerMayFreeIt) {
    kw_conf_free(conf_);
    conf_ = nullptr;
    EXPECT_TRUE(stat_reaches(engine_, "events.received", 0));
}

TEST_F(CApiEngineTest, CountersStartAtZeroAndStateIsDisconnected) {
    for (const char *name : {"events.received", "events.received.expired", "events.delivered",
                             "events.dropped", "events.abandoned", "handler.errors",
                             "handler.retries", "conn.reconnects", "dispatch.queued"}) {
        EXPECT_TRUE(stat_reaches(engine_, name, 0));
    }
    EXPECT_TRUE(stat_reaches(engine_, "conn.state", KW_CONN_DISCONNECTED));
}

TEST_F(CApiEngineTest, UnknownStatIsInvalidArgument) {
    int64_t v = 0;
    EXPECT_EQ(kw_engine_stat(engine_, "events.recieved", &v), KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_engine_stat(engine_, "", &v), KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_engine_stat(engine_, nullptr, &v), KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_engine_stat(engine_, "events.received", nullptr), KW_ERR_INVALID_ARG);
}

TEST_F(CApiEngineTest, LastErrorIsEmptyButNeverNullBeforeAnyError) {
    const char *e = kw_engine_last_error(engine_);
    ASSERT_NE(e, nullptr);
    EXPECT_STREQ(e, "");
}

TEST_F(CApiEngineTest, AddHandlerWithNullFunctionIsInvalid) {
    EXPECT_EQ(kw_engine_add_handler(engine_, nullptr, nullptr, nullptr, nullptr),
              KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_engine_add_handler(nullptr, nullptr, &noop, nullptr, nullptr), KW_ERR_INVALID_ARG);
}

TEST_F(CApiEngineTest, AddHandlerCopiesTheFilter) {
    kw_filter_t *f = kw_filter_new();
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(kw_filter_set(f, "events", "del", nullptr, 0), KW_OK);
    EXPECT_EQ(kw_engine_add_handler(engine_, f, &noop, nullptr, nullptr), KW_OK);
    kw_filter_free(f);  // the engine must not use it after this
    EXPECT_EQ(kw_engine_add_handler(engine_, nullptr, &noop, nullptr, nullptr), KW_OK);
}

// A handler of a task queue without "task" among its events would get nothing: start says
// which handler and what to add, before any connection, even beside a handler that works.
TEST_F(CApiEngineTest, QueueHandlerWithoutTaskEventsIsRefusedAtStartWithTheFix) {
    kw_filter_t *live = kw_filter_new();
    ASSERT_EQ(kw_filter_set(live, "events", "set", nullptr, 0), KW_OK);
    ASSERT_EQ(kw_engine_add_handler(engine_, live, &noop, nullptr, nullptr), KW_OK);
    kw_filter_free(live);
    kw_filter_t *emails = kw_filter_new();
    ASSERT_EQ(kw_filter_set(emails, "queue", "emails", nullptr, 0), KW_OK);  // events: expired
    ASSERT_EQ(kw_engine_add_handler(engine_, emails, &noop, nullptr, nullptr), KW_OK);
    kw_filter_free(emails);
    EXPECT_EQ(kw_engine_start(engine_), KW_ERR_STATE);
    EXPECT_STREQ(kw_engine_last_error(engine_),
                 "handler 2 (c) names queue \"emails\" but takes no \"task\" events, so nothing "
                 "would reach it (a task queue's items are \"task\" events): add \"task\" to its "
                 "events, or drop its queue to take live Redis events");
}

TEST_F(CApiEngineTest, StopBeforeStartIsHarmlessAndIdempotent) {
    EXPECT_EQ(kw_engine_stop(engine_, 1000), KW_OK);
    EXPECT_EQ(kw_engine_stop(engine_, -1), KW_OK);
}

TEST_F(CApiEngineTest, StatsJsonBeforeStartIsAnObject) {
    char *json = nullptr;
    ASSERT_EQ(kw_engine_stats_json(engine_, &json), KW_OK);
    ASSERT_NE(json, nullptr);
    std::string text(json);
    kw_free(json);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << text;
    EXPECT_TRUE(j.is_object()) << text;
}

TEST(CApiEngineStandalone, BadConfigurationIsRefusedByConfSetNotByEngineNew) {
    // kw_conf_set refused the bad value, so the engine is built from the defaults.
    kw_conf_t *conf = kw_conf_new();
    ASSERT_NE(conf, nullptr);
    EXPECT_EQ(kw_conf_set(conf, "workers", "0", nullptr, 0), KW_ERR_BAD_VALUE);
    kw_engine_t *e = nullptr;
    char err[256] = "";
    EXPECT_EQ(kw_engine_new(conf, &e, err, sizeof err), KW_OK) << err;
    kw_engine_free(e);
    kw_conf_free(conf);
}

TEST(CApiEngineStandalone, CallbacksCanBeSetAndRemovedBeforeStart) {
    kw_conf_t *conf = kw_conf_new();
    kw_engine_t *e = nullptr;
    ASSERT_EQ(kw_engine_new(conf, &e, nullptr, 0), KW_OK);
    auto state_cb = [](const char *, kw_conn_state, const char *, void *) {};
    auto log_cb = [](kw_log_level, const char *, void *) {};
    EXPECT_EQ(kw_engine_set_state_cb(e, state_cb, nullptr), KW_OK);
    EXPECT_EQ(kw_engine_set_log_cb(e, log_cb, nullptr), KW_OK);
    EXPECT_EQ(kw_engine_set_state_cb(e, nullptr, nullptr), KW_OK);
    EXPECT_EQ(kw_engine_set_log_cb(e, nullptr, nullptr), KW_OK);
    kw_engine_free(e);
    kw_conf_free(conf);
}

}  // namespace

namespace capi_settled {

using kwtest::stat_reaches;

// kw_conf_dump's rows, by name: {value, default}.
std::map<std::string, std::pair<std::string, std::string>> dump(const kw_conf_t *conf) {
    std::map<std::string, std::pair<std::string, std::string>> rows;
    EXPECT_EQ(kw_conf_dump(
                  conf,
                  [](const char *name, const char *value, const char *dflt, void *opaque) {
                      auto *r = static_cast<decltype(rows) *>(opaque);
                      EXPECT_TRUE(r->emplace(name, std::make_pair(value, dflt)).second)
                          << name << " listed twice";
                  },
                  &rows),
              KW_OK);
    return rows;
}

TEST(CApiConfDump, ListsEveryOptionWithValueAndDefault) {
    Conf conf;
    char err[256] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "workers", "3", err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_conf_set(conf.c, "redis.password", "secret", err, sizeof err), KW_OK) << err;
    ASSERT_EQ(kw_conf_set(conf.c, "redis.url", "redis://u:pw@127.0.0.1:6390", err, sizeof err),
              KW_OK)
        << err;
    const auto rows = dump(conf.c);
    // Every option the header documents (the configuration comment) is listed, and every
    // listed name is one kw_conf_get accepts with the same value.
    for (const char *name : {"redis.url",
                             "redis.mode",
                             "cluster.refresh",
                             "cluster.migration_wait",
                             "redis.user",
                             "redis.password",
                             "redis.connect_timeout",
                             "notify.enable",
                             "workers",
                             "dispatch.queue_size",
                             "reconnect.min",
                             "reconnect.max",
                             "health.interval",
                             "health.timeout",
                             "stop.timeout",
                             "redis.command_timeout",
                             "namespace",
                             "track.enable",
                             "track.done_window",
                             "queues",
                             "lease",
                             "retry.base",
                             "retry.max",
                             "max_attempts",
                             "sweep.batch",
                             "sweep.interval",
                             "sweep.scan_interval",
                             "dedupe.enable",
                             "dedupe.ttl",
                             "limits.key_bytes",
                             "limits.value_bytes",
                             "adopt.rules",
                             "catchup.enable",
                             "catchup.count",
                             "catchup.rate"})
        EXPECT_EQ(rows.count(name), 1u) << name << " missing from kw_conf_dump";
    for (const auto &row : rows) {
        char buf[512] = "";
        ASSERT_EQ(kw_conf_get(conf.c, row.first.c_str(), buf, sizeof buf), KW_OK) << row.first;
        EXPECT_EQ(row.second.first, buf) << row.first;
    }
    EXPECT_EQ(rows.at("workers").first, "3");
    EXPECT_NE(rows.at("workers").second, "3");
    EXPECT_EQ(rows.at("redis.password").first, "***");
    EXPECT_EQ(rows.at("redis.password").second, "");
    EXPECT_EQ(rows.at("redis.url").second, "redis://127.0.0.1:6379");
    for (const auto &row : rows) {
        EXPECT_EQ(row.second.first.find("secret"), std::string::npos) << row.first;
        EXPECT_EQ(row.second.first.find("pw@"), std::string::npos) << row.first;
    }
    // Sorted by name, as documented.
    std::vector<std::string> order;
    kw_conf_dump(
        conf.c,
        [](const char *name, const char *, const char *, void *o) {
            static_cast<std::vector<std::string> *>(o)->push_back(name);
        },
        &order);
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    EXPECT_EQ(order.size(), rows.size());
}

TEST(CApiConfDump, NullArgumentsAreInvalidAndCallNothing) {
    Conf conf;
    EXPECT_EQ(
        kw_conf_dump(
            nullptr,
            [](const char *, const char *, const char *, void *) { ADD_FAILURE() << "called"; },
            nullptr),
        KW_ERR_INVALID_ARG);
    EXPECT_EQ(kw_conf_dump(conf.c, nullptr, nullptr), KW_ERR_INVALID_ARG);
}

// An engine whose start fails fast: nothing listens at 127.0.0.1:<port>.
kw_engine_t *failing_engine(int port) {
    Conf conf;
    char err[256] = "";
    const std::string url = "redis://127.0.0.1:" + std::to_string(port);
    EXPECT_EQ(kw_conf_set(conf.c, "redis.url", url.c_str(), err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_conf_set(conf.c, "redis.connect_timeout", "100ms", err, sizeof err), KW_OK);
    kw_engine_t *e = nullptr;
    EXPECT_EQ(kw_engine_new(conf.c, &e, err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_engine_add_handler(
                  e, nullptr, [](kw_event_t *, void *) { return 0; }, nullptr, nullptr),
              KW_OK);
    EXPECT_NE(kw_engine_start(e), KW_OK);
    return e;
}

TEST(CApiLastError, EachEngineKeepsItsOwnMessageInOneThread) {
    kw_engine_t *a = failing_engine(1);
    kw_engine_t *b = failing_engine(2);
    const char *msg_a = kw_engine_last_error(a);
    const std::string copy_a = msg_a;
    const char *msg_b = kw_engine_last_error(b);
    EXPECT_NE(copy_a.find("127.0.0.1:1"), std::string::npos) << copy_a;
    EXPECT_NE(std::string(msg_b).find("127.0.0.1:2"), std::string::npos) << msg_b;
    // Asking engine b did not touch the text engine a handed out to this thread.
    EXPECT_EQ(std::string(msg_a), copy_a);
    // Nor does another thread asking engine a.
    std::thread([&] { EXPECT_EQ(std::string(kw_engine_last_error(a)), copy_a); }).join();
    EXPECT_EQ(std::string(msg_a), copy_a);
    kw_engine_free(a);
    kw_engine_free(b);
}

TEST(CApiJsonGetters, NullArgumentsGiveInvalidArgAndNullText) {
    char *out = reinterpret_cast<char *>(1);
    EXPECT_EQ(kw_engine_stats_json(nullptr, &out), KW_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    Conf conf;
    kw_engine_t *e = nullptr;
    char err[256] = "";
    ASSERT_EQ(kw_engine_new(conf.c, &e, err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_engine_stats_json(e, nullptr), KW_ERR_INVALID_ARG);
    kw_engine_free(e);
    out = reinterpret_cast<char *>(1);
    EXPECT_EQ(kw_client_inspect_json(nullptr, &out), KW_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    out = reinterpret_cast<char *>(1);
    EXPECT_EQ(kw_client_dead_list_json(nullptr, "keys", 1, &out), KW_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
}

TEST(CApiEventJson, NullArgumentsGiveInvalidArgAndNullText) {
    char *out = reinterpret_cast<char *>(1);
    size_t len = 7;
    EXPECT_EQ(kw_event_json(nullptr, &out, &len), KW_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(len, 0u);
    EXPECT_EQ(kw_event_json(nullptr, nullptr, nullptr), KW_ERR_INVALID_ARG);
}

TEST(CApiEventJson, SourceNamesAreTheLinesOnes) {
    EXPECT_STREQ(kw_source_name(KW_SOURCE_NOTIFICATION), "notification");
    EXPECT_STREQ(kw_source_name(KW_SOURCE_SWEEP), "sweep");
    EXPECT_STREQ(kw_source_name(KW_SOURCE_LEASE_EXPIRED), "lease_expired");
    EXPECT_STREQ(kw_source_name(KW_SOURCE_TASK), "task");
    EXPECT_STREQ(kw_source_name(static_cast<kw_source>(42)), "unknown");
}

TEST(CApiStatsSnapshot, BeforeStartHoldsTheUnlabelledRowsAtZero) {
    Conf conf;
    kw_engine_t *e = nullptr;
    char err[256] = "";
    ASSERT_EQ(kw_engine_new(conf.c, &e, err, sizeof err), KW_OK) << err;
    kw_stats_t *s = nullptr;
    ASSERT_EQ(kw_engine_stats(e, &s), KW_OK);
    ASSERT_GT(kw_stats_count(s), 20u);
    std::set<std::string> names;
    for (size_t i = 0; i < kw_stats_count(s); i++) {
        names.insert(kw_stats_name(s, i));
        EXPECT_STREQ(kw_stats_label_name(s, i), "") << kw_stats_name(s, i);
        EXPECT_NE(kw_stats_type(s, i), KW_STAT_HISTOGRAM) << kw_stats_name(s, i);
        EXPECT_STRNE(kw_stats_help(s, i), "") << kw_stats_name(s, i);
        EXPECT_STRNE(kw_stats_unit(s, i), "") << kw_stats_name(s, i);
        EXPECT_TRUE(stat_reaches(e, kw_stats_name(s, i), kw_stats_value(s, i)));
    }
    EXPECT_EQ(names.count("events.received"), 1u);
    EXPECT_EQ(names.count("lateness.max_ms"), 1u);
    // Past the end: empty answers, no crash.
    const size_t n = kw_stats_count(s);
    EXPECT_STREQ(kw_stats_name(s, n), "");
    EXPECT_EQ(kw_stats_value(s, n), 0);
    const double *bounds = reinterpret_cast<const double *>(1);
    EXPECT_EQ(kw_stats_buckets(s, n, &bounds, nullptr), 0u);
    EXPECT_EQ(bounds, nullptr);
    kw_stats_free(s);
    kw_stats_free(nullptr);
    EXPECT_EQ(kw_engine_stats(nullptr, &s), KW_ERR_INVALID_ARG);
    EXPECT_EQ(s, nullptr);
    kw_engine_free(e);
}

TEST(CApiNaming, EveryFunctionTakingAClientStartsWithKwClient) {
    // The header's naming rule, checked on the header itself.
    std::ifstream in(KW_HEADER_PATH);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string header = ss.str();
    size_t checked = 0;
    for (size_t at = header.find("KW_API "); at != std::string::npos;
         at = header.find("KW_API ", at + 1)) {
        const size_t end = header.find(';', at);
        const std::string decl = header.substr(at, end - at);
        const size_t paren = decl.find('(');
        size_t name_start = decl.rfind(' ', paren) + 1;
        while (decl[name_start] == '*') name_start++;
        const std::string name = decl.substr(name_start, paren - name_start);
        const std::string first_arg =
            decl.substr(paren + 1, decl.find_first_of(",)", paren) - paren);
        // Constructors are named after what they make: kw_engine_new takes a kw_conf_t.
        if (name.size() > 4 && name.compare(name.size() - 4, 4, "_new") == 0) continue;
        for (const char *handle : {"client", "engine", "conf", "filter", "stats"}) {
            if (first_arg.find(std::string("kw_") + handle + "_t") == std::string::npos) continue;
            EXPECT_EQ(name.rfind(std::string("kw_") + handle + "_", 0), 0u)
                << name << " takes a kw_" << handle << "_t first";
            checked++;
        }
    }
    EXPECT_GT(checked, 30u);
}

}  // namespace capi_settled

// The settled signatures: a change is an ABI break and must come with a new minor version.
static_assert(std::is_same<decltype(&kw_engine_stop), int (*)(kw_engine_t *, int64_t)>::value,
              "kw_engine_stop takes an int64_t timeout");
static_assert(
    std::is_same<decltype(&kw_client_inspect_json), int (*)(kw_client_t *, char **)>::value,
    "JSON getters return a status and the text through an out-parameter");
static_assert(std::is_same<decltype(&kw_engine_stats_json), int (*)(kw_engine_t *, char **)>::value,
              "JSON getters return a status and the text through an out-parameter");
