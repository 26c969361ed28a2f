// Unit tests of keywatch check's report (cli/check/check_report.h): the text checklist and the
// JSON document. The checks themselves run against real servers in
// cli/tests/daemon/test_check.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "cli/check/check_report.h"

using namespace keywatch::cli;

namespace {

CheckReport sample() {
    CheckReport r;
    r.target = "redis://u:***@db:6379";
    r.mode = "standalone";
    r.acl_rule = "on >PASSWORD -@all +time";
    r.add("version", "db:6379", Verdict::Ok, "Redis 7.0.15 (7.0+ needed)", "never shown");
    r.add("notifications", "db:6379", Verdict::Fail, "lacks 'Ex'", "CONFIG SET ...");
    r.add("clock", "", Verdict::Warn, "cannot read TIME", "ACL SETUSER u +time");
    return r;
}

}  // namespace

TEST(CheckReport, TextAlignsTheChecksAndPutsEachFixUnderItsProblem) {
    const std::string text = render_text(sample());
    EXPECT_EQ(text,
              "keywatch check redis://u:***@db:6379 (standalone)\n"
              "ok    version        db:6379: Redis 7.0.15 (7.0+ needed)\n"
              "fail  notifications  db:6379: lacks 'Ex'\n"
              "                     fix: CONFIG SET ...\n"
              "warn  clock          cannot read TIME\n"
              "                     fix: ACL SETUSER u +time\n"
              "result: 1 ok, 1 warn, 1 fail: keywatch cannot run reliably here until the "
              "failed checks are fixed\n");
}

TEST(CheckReport, SummarySaysWhetherAnythingBlocksKeywatch) {
    CheckReport r = sample();
    EXPECT_FALSE(r.passed());
    r.lines.erase(r.lines.begin() + 1);  // the failure
    EXPECT_TRUE(r.passed());
    EXPECT_NE(render_text(r).find("result: 1 ok, 1 warn, 0 fail: nothing blocks keywatch; read "
                                  "the warnings\n"),
              std::string::npos);
    r.lines.pop_back();
    EXPECT_NE(render_text(r).find("result: 1 ok, 0 warn, 0 fail: ready for keywatch\n"),
              std::string::npos);
}

TEST(CheckReport, TheWholeAclRuleIsPrintedOnlyWhenAPermissionIsAmiss) {
    CheckReport r = sample();
    EXPECT_EQ(render_text(r).find("the whole ACL rule"), std::string::npos);
    r.add("acl: channels", "db:6379", Verdict::Fail, "NOPERM", "ACL SETUSER u +psubscribe");
    EXPECT_NE(render_text(r).find("the whole ACL rule keywatch needs here: ACL SETUSER <user> "
                                  "on >PASSWORD -@all +time\n"),
              std::string::npos);
}

TEST(CheckReport, JsonCarriesEveryLineWithAFixOnlyOnProblems) {
    CheckReport r = sample();
    r.lines[0].detail = "bad byte \xff here";  // server text is not always UTF-8
    const std::string out = render_json(r);
    ASSERT_EQ(out.back(), '\n');
    EXPECT_EQ(out.find('\n'), out.size() - 1);  // one line
    const auto doc = nlohmann::json::parse(out);
    EXPECT_EQ(doc["target"], "redis://u:***@db:6379");
    EXPECT_EQ(doc["mode"], "standalone");
    EXPECT_EQ(doc["passed"], false);
    EXPECT_EQ(doc["acl_rule"], "on >PASSWORD -@all +time");
    EXPECT_EQ(doc["summary"], nlohmann::json({{"ok", 1}, {"warn", 1}, {"fail", 1}}));
    ASSERT_EQ(doc["checks"].size(), 3u);
    EXPECT_FALSE(doc["checks"][0].contains("fix"));  // ok lines carry none
    EXPECT_EQ(doc["checks"][0]["detail"], "bad byte \xEF\xBF\xBD here");
    EXPECT_EQ(doc["checks"][1]["verdict"], "fail");
    EXPECT_EQ(doc["checks"][1]["fix"], "CONFIG SET ...");
    EXPECT_EQ(doc["checks"][2]["node"], "");
}
