// Adopt rules (the option adopt.rules): which keys other programs write keywatch tracks at
// their own TTL, into which key queue, with or without a snapshot of the value. The one
// grammar of the rule text: parsed and formatted only here (the daemon's [[adopt]] tables,
// `keywatch watch --adopt` and Python's adopt= all write this text), and the matching of a
// key against the rules. Pure data and functions: thread-safe.
//
//   rules = rule *( ";" rule )     rule = field *( " " field )     field = name "=" value
//   names: prefix | glob | pattern (exactly one), db, queue, snapshot
//   value escapes: \\  \;  "\ "  \xNN (any byte, NUL included)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keywatch {

// At most this many rules.
inline constexpr size_t kMaxAdoptRules = 64;

struct AdoptRule {
    bool is_glob = false;  // text is a Redis glob; else a prefix (bytes, may be empty)
    std::string text;
    std::optional<int> db;       // given: must be redis.url's database (Config::validate)
    std::string queue = "keys";  // the key queue adopted items go to
    bool snapshot = false;       // store the value with the item (strings only)

    bool matches(std::string_view key) const;
    // The bytes every matching key starts with (the prefix, or the glob's literal part).
    std::string literal() const;
    // `prefix "sess:"` / `glob "cache:*"`, bytes written as the formatter writes them.
    std::string describe() const;
    // The SCAN MATCH pattern of the keys this rule takes.
    std::string scan_match() const;
    bool operator==(const AdoptRule &o) const;
};

// Parses rule text. False with *err ("adopt.rules: rule 2: ...") on the first error; *out is
// then untouched. Empty (or blank) text is no rules.
bool parse_adopt_rules(std::string_view text, std::vector<AdoptRule> *out, std::string *err);
// The canonical text: prefix|glob, db (when given), queue (when not "keys"), snapshot (when
// true); rules joined by "; ". parse_adopt_rules(format_adopt_rules(r)) gives r back.
std::string format_adopt_rules(const std::vector<AdoptRule> &rules);
// One rule value as the grammar writes it: bytes outside 0x21-0x7e and \ ; = as \xNN.
std::string escape_adopt_value(std::string_view bytes);

// A parsed rule list with the engine's namespace: what the intake and the scans ask.
class AdoptRules {
  public:
    AdoptRules() = default;
    AdoptRules(std::vector<AdoptRule> rules, std::string ns)
        : rules_(std::move(rules)), ns_(std::move(ns)) {}

    const std::vector<AdoptRule> &rules() const { return rules_; }
    bool empty() const { return rules_.empty(); }
    // The index of the first rule that matches key; -1 for none and for keywatch's own keys
    // (is_keywatch_key).
    int match(std::string_view key) const;
    // True if some rule snapshots values.
    bool any_snapshot() const;
    // The SCAN passes of a catch-up: one MATCH pattern per pass. With up to 2 rules, each
    // with a literal part, one pass per rule; else one pass without MATCH, given as "".
    std::vector<std::string> scan_matches() const;
    // The index of the first rule with no literal part (it reads every key), or -1.
    int scans_everything() const;

    // The refusals that need more than the text (Config::validate), each "" when fine:
    // a rule whose literal part names keys of namespace ns ("<ns>:...");
    std::string namespace_error(const std::string &ns) const;
    // a rule's db that is not url_db;
    std::string db_error(int url_db) const;
    // a rule's queue that is one of the task queues.
    std::string queue_error(const std::vector<std::string> &task_queues) const;

  private:
    std::vector<AdoptRule> rules_;
    std::string ns_;
};

}  // namespace keywatch
