// Adopt rules (core/queue/adopt_rules.h): the one grammar of adopt.rules, parsed and
// formatted round trip on any bytes, every refusal's text, first rule wins, keywatch's own
// keys never adopted, and the SCAN passes the rules ask for. Also the glob helpers the rules
// and the scans share (core/base/glob.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/glob.h"
#include "core/queue/adopt_rules.h"

namespace keywatch {
namespace {

std::vector<AdoptRule> parse_ok(const std::string &text) {
    std::vector<AdoptRule> rules;
    std::string err;
    EXPECT_TRUE(parse_adopt_rules(text, &rules, &err)) << text << ": " << err;
    return rules;
}

std::string parse_err(const std::string &text) {
    std::vector<AdoptRule> rules = parse_ok("prefix=untouched");
    std::string err;
    EXPECT_FALSE(parse_adopt_rules(text, &rules, &err)) << text;
    EXPECT_EQ(rules.size(), 1u) << "a refused text changes nothing";
    return err;
}

TEST(AdoptRules, AdoptRulesParseFormatAndRefuse) {
    EXPECT_TRUE(parse_ok("").empty());
    EXPECT_TRUE(parse_ok("  ;  ; ").empty());

    auto r = parse_ok(" prefix=sess: queue=sessions ;glob=cache:*:v2 snapshot=yes; prefix= db=0");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_FALSE(r[0].is_glob);
    EXPECT_EQ(r[0].text, "sess:");
    EXPECT_EQ(r[0].queue, "sessions");
    EXPECT_FALSE(r[0].db.has_value());
    EXPECT_TRUE(r[1].is_glob);
    EXPECT_EQ(r[1].text, "cache:*:v2");
    EXPECT_TRUE(r[1].snapshot);
    EXPECT_EQ(r[1].queue, "keys");
    EXPECT_EQ(r[2].text, "");
    EXPECT_EQ(r[2].db, 0);
    EXPECT_EQ(format_adopt_rules(r),
              "prefix=sess: queue=sessions; glob=cache:*:v2 snapshot=true; prefix= db=0");

    // Any byte round trips: NUL, ';', ' ', '=', '\', high bytes.
    const std::string nasty("a\0b; c=d\\e\xff", 11);
    AdoptRule one;
    one.text = nasty;
    std::string text = format_adopt_rules({one});
    EXPECT_EQ(text, "prefix=a\\x00b\\x3b\\x20c\\x3dd\\x5ce\\xff");
    auto back = parse_ok(text);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0], one);
    // The short escapes read as the bytes they name.
    back = parse_ok("prefix=a\\;b\\ c\\\\d=e");
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].text, "a;b c\\d=e");

    // pattern: a glob if it has an unescaped * ? [, else a prefix.
    back = parse_ok("pattern=sess:; pattern=cache:*; pattern=a\\\\*b");
    ASSERT_EQ(back.size(), 3u);
    EXPECT_FALSE(back[0].is_glob);
    EXPECT_EQ(back[0].text, "sess:");
    EXPECT_TRUE(back[1].is_glob);
    EXPECT_FALSE(back[2].is_glob) << "an escaped * is a literal";
    EXPECT_EQ(back[2].text, "a*b");
    EXPECT_EQ(format_adopt_rules(back), "prefix=sess:; glob=cache:*; prefix=a*b");

    EXPECT_EQ(parse_err("queue=x"),
              "adopt.rules: rule 1: give exactly one of prefix, glob or pattern");
    EXPECT_EQ(parse_err("prefix=a glob=b*"),
              "adopt.rules: rule 1: give exactly one of prefix, glob or pattern");
    EXPECT_EQ(parse_err("prefx=a"),
              "adopt.rules: rule 1: unknown field \"prefx\"; the fields are prefix, glob, "
              "pattern, db, queue, snapshot");
    EXPECT_EQ(parse_err("prefix=a; prefix=b\\q"),
              "adopt.rules: rule 2: bad escape \"\\q\" in prefix; write \\\\, \\;, \"\\ \" or "
              "\\xNN");
    EXPECT_EQ(parse_err("prefix=a\\x4"),
              "adopt.rules: rule 1: bad escape \"\\x\" in prefix; write \\\\, \\;, \"\\ \" or "
              "\\xNN");
    EXPECT_EQ(parse_err("prefix=sess:; glob=x*; prefix=sess: queue=other"),
              "adopt.rules: rules 1 and 3 are the same (prefix \"sess:\")");
    EXPECT_EQ(parse_err("prefix=a prefix=b"), "adopt.rules: rule 1: prefix is given twice");
    EXPECT_EQ(parse_err("prefix"),
              "adopt.rules: rule 1: \"prefix\" is no field=value; write one of prefix, glob, "
              "pattern, db, queue, snapshot, as name=value");
    EXPECT_EQ(parse_err("prefix=a db=-1"),
              "adopt.rules: rule 1: db \"-1\" is not a database number (0, 1, ...)");
    EXPECT_EQ(parse_err("prefix=a snapshot=maybe"),
              "adopt.rules: rule 1: snapshot \"maybe\" is not true or false (true/false, "
              "yes/no, on/off, 1/0)");
    EXPECT_NE(parse_err("prefix=a queue=x:y").find("adopt.rules: rule 1: queue name 'x:y'"),
              std::string::npos);
    std::string many;
    for (int i = 0; i < 65; i++) many += "prefix=p" + std::to_string(i) + ";";
    EXPECT_EQ(parse_err(many), "adopt.rules: 65 rules; at most 64");
    many.pop_back();
    many.erase(many.rfind(';'));
    EXPECT_EQ(parse_ok(many).size(), 64u);
}

TEST(AdoptRules, TheFirstRuleThatMatchesWinsAndKeywatchKeysNeverMatch) {
    AdoptRules rules(parse_ok("prefix=sess: queue=sessions; glob=*:v2; prefix="), "kw");
    EXPECT_EQ(rules.match("sess:1:v2"), 0);
    EXPECT_EQ(rules.match("cache:1:v2"), 1);
    EXPECT_EQ(rules.match("other"), 2);
    EXPECT_EQ(rules.match(""), 2);
    // keywatch's own keys: queues and dedupe keys of its namespace, whatever the rules say.
    EXPECT_EQ(rules.match("kw:keys:{0}:due"), -1);
    EXPECT_EQ(rules.match("kw:sessions:{abc}:data"), -1);
    EXPECT_EQ(rules.match("kw:dedupe:{0}:0:expired:k"), -1);
    EXPECT_EQ(rules.match("kw:user:1"), 2) << "only keywatch's key shapes are excluded";
    EXPECT_EQ(AdoptRules().match("x"), -1);
    EXPECT_TRUE(AdoptRules(parse_ok("prefix=a; glob=b* snapshot=1"), "kw").any_snapshot());
    EXPECT_FALSE(AdoptRules(parse_ok("prefix=a"), "kw").any_snapshot());
}

TEST(AdoptRules, RefusalsThatNeedTheRestOfTheConfigurationNameTheRule) {
    EXPECT_EQ(AdoptRules(parse_ok("prefix=app:; prefix=kw:keys:"), "kw").namespace_error("kw"),
              "adopt.rules: rule 2 (prefix \"kw:keys:\") names keys of keywatch's own namespace "
              "\"kw\" (its queues and dedupe keys); keywatch never adopts its own keys: use "
              "your application's prefix");
    EXPECT_NE(AdoptRules(parse_ok("glob=kw:*"), "kw").namespace_error("kw"), "");
    EXPECT_NE(AdoptRules(parse_ok("glob=k\\\\w:*"), "kw").namespace_error("kw"), "");
    EXPECT_EQ(AdoptRules(parse_ok("glob=k*; prefix=kwx:"), "kw").namespace_error("kw"), "");
    EXPECT_EQ(AdoptRules(parse_ok("prefix=sess: db=3"), "kw").db_error(0),
              "adopt.rules: rule 1 (prefix \"sess:\"): db 3 is not redis.url's database 0; an "
              "engine adopts keys of its own database: run one engine per database");
    EXPECT_EQ(AdoptRules(parse_ok("prefix=sess: db=3"), "kw").db_error(3), "");
    EXPECT_EQ(AdoptRules(parse_ok("prefix=sess: queue=jobs"), "kw").queue_error({"mail", "jobs"}),
              "adopt.rules: rule 1: queue \"jobs\" is a task queue (queues); a rule's queue holds "
              "keys: name another, or leave queue out for \"keys\"");
    EXPECT_EQ(AdoptRules(parse_ok("prefix=sess: queue=s"), "kw").queue_error({"jobs"}), "");
}

TEST(AdoptRules, ScansMatchEachRuleOrReadEveryKey) {
    EXPECT_EQ(AdoptRules(parse_ok("prefix=se*s:; glob=c:[ab]*"), "kw").scan_matches(),
              (std::vector<std::string>{"se\\*s:*", "c:[ab]*"}));
    EXPECT_EQ(AdoptRules(parse_ok("prefix=a; prefix=b; prefix=c"), "kw").scan_matches(),
              (std::vector<std::string>{""}));
    AdoptRules open(parse_ok("prefix=a; glob=*:session"), "kw");
    EXPECT_EQ(open.scan_matches(), (std::vector<std::string>{""}));
    EXPECT_EQ(open.scans_everything(), 1);
    EXPECT_EQ(AdoptRules(parse_ok("prefix=a"), "kw").scans_everything(), -1);
    EXPECT_EQ(AdoptRules(parse_ok("prefix="), "kw").scans_everything(), 0);
    EXPECT_TRUE(AdoptRules().scan_matches().empty());
}

TEST(Glob, EscapeLiteralPrefixAndWildcards) {
    const std::string bytes("a*b?c[d]e\\f\0g", 13);
    EXPECT_TRUE(glob_match(glob_escape(bytes), bytes));
    EXPECT_FALSE(glob_match(glob_escape(bytes), "a*b?c[d]e\\f"));
    EXPECT_EQ(literal_prefix(glob_escape(bytes) + "*"), bytes);
    EXPECT_EQ(literal_prefix("sess\\*:*x"), "sess*:");
    EXPECT_EQ(literal_prefix("*x"), "");
    EXPECT_EQ(literal_prefix("ab[c]"), "ab");
    EXPECT_EQ(literal_prefix("ab?"), "ab");
    EXPECT_TRUE(has_wildcard("a*"));
    EXPECT_TRUE(has_wildcard("a[b]"));
    EXPECT_FALSE(has_wildcard("a\\*"));
    EXPECT_FALSE(has_wildcard("plain"));
}

}  // namespace
}  // namespace keywatch
