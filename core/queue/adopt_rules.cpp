#include "core/queue/adopt_rules.h"

#include <algorithm>
#include <cstdio>

#include "core/base/bool_word.h"
#include "core/base/glob.h"
#include "core/queue/queue_keys.h"

namespace keywatch {

namespace {

const char *const kFields = "prefix, glob, pattern, db, queue, snapshot";

std::string rule_prefix(size_t n) {
    return "adopt.rules: rule " + std::to_string(n) + ": ";
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// One rule's fields as written, values unescaped.
struct RawField {
    std::string name, value;
};

// Reads the rule text into rules of fields. Stops at the first error.
class Lexer {
  public:
    explicit Lexer(std::string_view text) : t_(text) {}

    // The next non-empty rule's fields; false at the end or on error (*err set).
    bool next_rule(std::vector<RawField> *fields, std::string *err) {
        fields->clear();
        while (i_ < t_.size()) {
            skip_spaces();
            if (i_ >= t_.size()) break;
            if (t_[i_] == ';') {
                i_++;
                if (!fields->empty()) return true;
                continue;
            }
            if (fields->empty()) rule_no_++;
            RawField f;
            if (!read_field(&f, err)) return false;
            fields->push_back(std::move(f));
        }
        return !fields->empty();
    }
    size_t rule_no() const { return rule_no_; }

  private:
    void skip_spaces() {
        while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t')) i_++;
    }
    static bool ends_field(char c) { return c == ' ' || c == '\t' || c == ';'; }

    bool read_field(RawField *f, std::string *err) {
        while (i_ < t_.size() && t_[i_] != '=' && !ends_field(t_[i_])) f->name += t_[i_++];
        if (i_ >= t_.size() || t_[i_] != '=') {
            *err = rule_prefix(rule_no_) + "\"" + escape_adopt_value(f->name) +
                   "\" is no field=value; write one of " + kFields + ", as name=value";
            return false;
        }
        i_++;
        while (i_ < t_.size() && !ends_field(t_[i_])) {
            char c = t_[i_++];
            if (c != '\\') {
                f->value += c;
                continue;
            }
            if (!read_escape(f, err)) return false;
        }
        return true;
    }

    bool read_escape(RawField *f, std::string *err) {
        if (i_ < t_.size() && (t_[i_] == '\\' || t_[i_] == ';' || t_[i_] == ' ')) {
            f->value += t_[i_++];
            return true;
        }
        if (i_ + 2 < t_.size() && t_[i_] == 'x' && hex_digit(t_[i_ + 1]) >= 0 &&
            hex_digit(t_[i_ + 2]) >= 0) {
            f->value += static_cast<char>(hex_digit(t_[i_ + 1]) * 16 + hex_digit(t_[i_ + 2]));
            i_ += 3;
            return true;
        }
        std::string bad = "\\";
        if (i_ < t_.size()) bad += escape_adopt_value(t_.substr(i_, 1));
        *err = rule_prefix(rule_no_) + "bad escape \"" + bad + "\" in " + f->name +
               "; write \\\\, \\;, \"\\ \" or \\xNN";
        return false;
    }

    std::string_view t_;
    size_t i_ = 0;
    size_t rule_no_ = 0;
};

bool parse_db(const std::string &v, int *out) {
    if (v.empty() || v.size() > 9 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
    *out = std::stoi(v);
    return true;
}

// One rule from its fields; false with *err.
bool make_rule(size_t n, const std::vector<RawField> &fields, AdoptRule *rule, std::string *err) {
    int keys_given = 0;
    std::vector<std::string> seen;
    for (const RawField &f : fields) {
        if (std::find(seen.begin(), seen.end(), f.name) != seen.end()) {
            *err = rule_prefix(n) + f.name + " is given twice";
            return false;
        }
        seen.push_back(f.name);
        if (f.name == "prefix" || f.name == "glob") {
            keys_given++;
            rule->is_glob = f.name == "glob";
            rule->text = f.value;
        } else if (f.name == "pattern") {
            keys_given++;
            rule->is_glob = has_wildcard(f.value);
            rule->text = rule->is_glob ? f.value : literal_prefix(f.value);
        } else if (f.name == "db") {
            int db = 0;
            if (!parse_db(f.value, &db)) {
                *err = rule_prefix(n) + "db \"" + escape_adopt_value(f.value) +
                       "\" is not a database number (0, 1, ...)";
                return false;
            }
            rule->db = db;
        } else if (f.name == "queue") {
            std::string why;
            if (!valid_queue_name(f.value, &why)) {
                *err = rule_prefix(n) + why;
                return false;
            }
            rule->queue = f.value;
        } else if (f.name == "snapshot") {
            if (!parse_bool_word(f.value, &rule->snapshot)) {
                *err = rule_prefix(n) + "snapshot \"" + escape_adopt_value(f.value) +
                       "\" is not true or false (true/false, yes/no, on/off, 1/0)";
                return false;
            }
        } else {
            *err = rule_prefix(n) + "unknown field \"" + escape_adopt_value(f.name) +
                   "\"; the fields are " + kFields;
            return false;
        }
    }
    if (keys_given != 1) {
        *err = rule_prefix(n) + "give exactly one of prefix, glob or pattern";
        return false;
    }
    return true;
}

}  // namespace

std::string escape_adopt_value(std::string_view bytes) {
    std::string out;
    for (char ch : bytes) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c < 0x21 || c > 0x7e || c == '\\' || c == ';' || c == '=') {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out;
}

bool AdoptRule::matches(std::string_view key) const {
    if (is_glob) return glob_match(text, key);
    return key.size() >= text.size() && key.compare(0, text.size(), text) == 0;
}

std::string AdoptRule::literal() const {
    return is_glob ? literal_prefix(text) : text;
}

std::string AdoptRule::describe() const {
    return std::string(is_glob ? "glob" : "prefix") + " \"" + escape_adopt_value(text) + "\"";
}

std::string AdoptRule::scan_match() const {
    return is_glob ? text : glob_escape(text) + "*";
}

bool AdoptRule::operator==(const AdoptRule &o) const {
    return is_glob == o.is_glob && text == o.text && db == o.db && queue == o.queue &&
           snapshot == o.snapshot;
}

bool parse_adopt_rules(std::string_view text, std::vector<AdoptRule> *out, std::string *err) {
    std::vector<AdoptRule> rules;
    Lexer lex(text);
    std::vector<RawField> fields;
    std::string lex_err;
    while (lex.next_rule(&fields, &lex_err)) {
        AdoptRule rule;
        if (!make_rule(lex.rule_no(), fields, &rule, err)) return false;
        for (size_t i = 0; i < rules.size(); i++) {
            // The later of two rules taking the same keys never matches: first rule wins.
            if (rules[i].is_glob == rule.is_glob && rules[i].text == rule.text) {
                *err = "adopt.rules: rules " + std::to_string(i + 1) + " and " +
                       std::to_string(lex.rule_no()) + " are the same (" + rule.describe() + ")";
                return false;
            }
        }
        rules.push_back(std::move(rule));
    }
    if (!lex_err.empty()) {
        *err = lex_err;
        return false;
    }
    if (rules.size() > kMaxAdoptRules) {
        *err = "adopt.rules: " + std::to_string(rules.size()) + " rules; at most " +
               std::to_string(kMaxAdoptRules);
        return false;
    }
    *out = std::move(rules);
    return true;
}

std::string format_adopt_rules(const std::vector<AdoptRule> &rules) {
    std::string out;
    for (const AdoptRule &r : rules) {
        if (!out.empty()) out += "; ";
        out += (r.is_glob ? "glob=" : "prefix=") + escape_adopt_value(r.text);
        if (r.db) out += " db=" + std::to_string(*r.db);
        if (r.queue != kKeysQueue) out += " queue=" + escape_adopt_value(r.queue);
        if (r.snapshot) out += " snapshot=true";
    }
    return out;
}

int AdoptRules::match(std::string_view key) const {
    if (rules_.empty()) return -1;
    for (size_t i = 0; i < rules_.size(); i++)
        if (rules_[i].matches(key)) return is_keywatch_key(ns_, key) ? -1 : static_cast<int>(i);
    return -1;
}

bool AdoptRules::any_snapshot() const {
    return std::any_of(rules_.begin(), rules_.end(), [](const AdoptRule &r) { return r.snapshot; });
}

std::vector<std::string> AdoptRules::scan_matches() const {
    if (rules_.empty()) return {};
    if (rules_.size() > 2 || scans_everything() >= 0) return {""};
    std::vector<std::string> out;
    for (const AdoptRule &r : rules_) out.push_back(r.scan_match());
    return out;
}

int AdoptRules::scans_everything() const {
    for (size_t i = 0; i < rules_.size(); i++)
        if (rules_[i].literal().empty()) return static_cast<int>(i);
    return -1;
}

namespace {
std::string rule_named(size_t i, const AdoptRule &r) {
    return "adopt.rules: rule " + std::to_string(i + 1) + " (" + r.describe() + ")";
}
}  // namespace

std::string AdoptRules::namespace_error(const std::string &ns) const {
    const std::string own = ns + ":";
    for (size_t i = 0; i < rules_.size(); i++) {
        std::string lit = rules_[i].literal();
        if (lit.compare(0, own.size(), own) == 0)
            return rule_named(i, rules_[i]) + " names keys of keywatch's own namespace \"" +
                   escape_adopt_value(ns) +
                   "\" (its queues and dedupe keys); keywatch never adopts its own keys: use "
                   "your application's prefix";
    }
    return "";
}

std::string AdoptRules::db_error(int url_db) const {
    for (size_t i = 0; i < rules_.size(); i++)
        if (rules_[i].db && *rules_[i].db != url_db)
            return rule_named(i, rules_[i]) + ": db " + std::to_string(*rules_[i].db) +
                   " is not redis.url's database " + std::to_string(url_db) +
                   "; an engine adopts keys of its own database: run one engine per database";
    return "";
}

std::string AdoptRules::queue_error(const std::vector<std::string> &task_queues) const {
    for (size_t i = 0; i < rules_.size(); i++)
        if (std::find(task_queues.begin(), task_queues.end(), rules_[i].queue) != task_queues.end())
            return "adopt.rules: rule " + std::to_string(i + 1) + ": queue \"" + rules_[i].queue +
                   "\" is a task queue (queues); a rule's queue holds keys: name another, or "
                   "leave queue out for \"keys\"";
    return "";
}

}  // namespace keywatch
