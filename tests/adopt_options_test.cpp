// The adoption options through the C API, without a server: adopt.rules and catchup.*
// (defaults, ranges, read-back) and the combinations kw_engine_new refuses (a rule naming
// keywatch's namespace, another database than redis.url's, a task queue, track.enable=false).
// The rule grammar itself is tested in adopt_rules_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "keywatch.h"

namespace {

using Options = std::vector<std::pair<const char *, const char *>>;

struct Conf {
    kw_conf_t *c = kw_conf_new();
    ~Conf() { kw_conf_free(c); }
};

std::string get(const kw_conf_t *c, const char *name) {
    char buf[1024] = "";
    EXPECT_EQ(kw_conf_get(c, name, buf, sizeof buf), KW_OK) << name;
    return buf;
}

// Sets every option (each must be accepted), then makes an engine: its status and errstr.
std::pair<int, std::string> engine_new(const Options &options) {
    Conf conf;
    char err[512] = "";
    for (const auto &[name, value] : options)
        EXPECT_EQ(kw_conf_set(conf.c, name, value, err, sizeof err), KW_OK)
            << name << "=" << value << ": " << err;
    kw_engine_t *engine = nullptr;
    int rc = kw_engine_new(conf.c, &engine, err, sizeof err);
    kw_engine_free(engine);
    return {rc, err};
}

TEST(AdoptOptions, DefaultsAreNoRulesAndTheDocumentedCatchUp) {
    Conf conf;
    EXPECT_EQ(get(conf.c, "adopt.rules"), "");
    EXPECT_EQ(get(conf.c, "catchup.enable"), "true");
    EXPECT_EQ(get(conf.c, "catchup.count"), "1000");
    EXPECT_EQ(get(conf.c, "catchup.rate"), "250000");
}

TEST(AdoptOptions, CatchUpValuesOutsideTheirRangesAreRefused) {
    for (const auto &[name, value] : Options{{"catchup.count", "9"},
                                             {"catchup.count", "10001"},
                                             {"catchup.rate", "999"},
                                             {"catchup.rate", "10000001"},
                                             {"catchup.rate", "fast"},
                                             {"catchup.enable", "maybe"}}) {
        Conf conf;
        const std::string before = get(conf.c, name);
        char err[512] = "";
        EXPECT_EQ(kw_conf_set(conf.c, name, value, err, sizeof err), KW_ERR_BAD_VALUE)
            << name << "=" << value;
        EXPECT_NE(std::string(err).find(name), std::string::npos) << err;
        EXPECT_NE(std::string(err).find(value), std::string::npos) << err;
        EXPECT_EQ(get(conf.c, name), before) << name;
    }
    Conf conf;
    char err[512] = "";
    EXPECT_EQ(kw_conf_set(conf.c, "catchup.count", "10000", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_conf_set(conf.c, "catchup.rate", "1000", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_conf_set(conf.c, "catchup.enable", "off", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(get(conf.c, "catchup.count"), "10000");
    EXPECT_EQ(get(conf.c, "catchup.rate"), "1000");
    EXPECT_EQ(get(conf.c, "catchup.enable"), "false");
}

TEST(AdoptOptions, RulesReadBackInTheirCanonicalFormAndAnEmptyTextClearsThem) {
    Conf conf;
    char err[512] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "adopt.rules", " pattern=sess:  ;glob=cache:*:v2 snapshot=yes",
                          err, sizeof err),
              KW_OK)
        << err;
    const std::string canonical = get(conf.c, "adopt.rules");
    EXPECT_EQ(canonical, "prefix=sess:; glob=cache:*:v2 snapshot=true");
    // The canonical text gives the same rules back.
    ASSERT_EQ(kw_conf_set(conf.c, "adopt.rules", canonical.c_str(), err, sizeof err), KW_OK) << err;
    EXPECT_EQ(get(conf.c, "adopt.rules"), canonical);
    ASSERT_EQ(kw_conf_set(conf.c, "adopt.rules", "", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(get(conf.c, "adopt.rules"), "");
}

TEST(AdoptOptions, ABadRuleIsRefusedAndTheRulesBeforeItAreKept) {
    Conf conf;
    char err[512] = "";
    ASSERT_EQ(kw_conf_set(conf.c, "adopt.rules", "prefix=sess:", err, sizeof err), KW_OK) << err;
    EXPECT_EQ(kw_conf_set(conf.c, "adopt.rules", "prefix=a: glob=b*", err, sizeof err),
              KW_ERR_BAD_VALUE);
    EXPECT_STREQ(err, "adopt.rules: rule 1: give exactly one of prefix, glob or pattern");
    EXPECT_EQ(get(conf.c, "adopt.rules"), "prefix=sess:");
}

TEST(AdoptOptions, ARuleNamingTheNamespaceIsRefusedWhicheverIsSetFirst) {
    auto [rc, err] = engine_new({{"adopt.rules", "prefix=kw:keys:"}});
    EXPECT_EQ(rc, KW_ERR_BAD_VALUE);
    EXPECT_EQ(err,
              "adopt.rules: rule 1 (prefix \"kw:keys:\") names keys of keywatch's own namespace "
              "\"kw\" (its queues and dedupe keys); keywatch never adopts its own keys: use your "
              "application's prefix");
    // namespace set after the rules, and a glob whose literal part names it.
    std::tie(rc, err) =
        engine_new({{"adopt.rules", "prefix=sess:;glob=app:q*"}, {"namespace", "app"}});
    EXPECT_EQ(rc, KW_ERR_BAD_VALUE);
    EXPECT_NE(err.find("rule 2 (glob \"app:q*\") names keys of keywatch's own namespace \"app\""),
              std::string::npos)
        << err;
    // The same rules under the default namespace are fine.
    std::tie(rc, err) = engine_new({{"adopt.rules", "prefix=sess:;glob=app:q*"}});
    EXPECT_EQ(rc, KW_OK) << err;
}

TEST(AdoptOptions, ARuleForAnotherDatabaseIsRefused) {
    auto [rc, err] = engine_new({{"adopt.rules", "prefix=sess: db=3"}});
    EXPECT_EQ(rc, KW_ERR_BAD_VALUE);
    EXPECT_EQ(err,
              "adopt.rules: rule 1 (prefix \"sess:\"): db 3 is not redis.url's database 0; an "
              "engine adopts keys of its own database: run one engine per database");
    std::tie(rc, err) =
        engine_new({{"adopt.rules", "prefix=sess: db=3"}, {"redis.url", "redis://127.0.0.1/3"}});
    EXPECT_EQ(rc, KW_OK) << err;
}

TEST(AdoptOptions, ARuleWhoseQueueIsATaskQueueIsRefused) {
    auto [rc, err] =
        engine_new({{"queues", "mail,jobs"}, {"adopt.rules", "prefix=a:;prefix=b: queue=jobs"}});
    EXPECT_EQ(rc, KW_ERR_BAD_VALUE);
    EXPECT_EQ(err,
              "adopt.rules: rule 2: queue \"jobs\" is a task queue (queues); a rule's queue holds "
              "keys: name another, or leave queue out for \"keys\"");
    std::tie(rc, err) = engine_new({{"queues", "mail"}, {"adopt.rules", "prefix=b: queue=jobs"}});
    EXPECT_EQ(rc, KW_OK) << err;
}

TEST(AdoptOptions, RulesNeedTheTrackingQueue) {
    auto [rc, err] = engine_new({{"track.enable", "false"}, {"adopt.rules", "prefix=sess:"}});
    EXPECT_EQ(rc, KW_ERR_BAD_VALUE);
    EXPECT_EQ(err, "adopt.rules needs track.enable=true: adopted keys are tracked keys");
    std::tie(rc, err) = engine_new({{"track.enable", "false"}});
    EXPECT_EQ(rc, KW_OK) << err;
}

}  // namespace
