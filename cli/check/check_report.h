// The report of `keywatch check`: one line per thing checked, each with a verdict (ok,
// warn, fail), what was found and, for a problem, the fix; rendered as an aligned text
// checklist or as one JSON document. Plain data and pure functions: thread-safe.
#pragma once

#include <string>
#include <vector>

namespace keywatch::cli {

enum class Verdict { Ok, Warn, Fail };

// "ok", "warn", "fail".
const char *verdict_name(Verdict v);

struct CheckLine {
    std::string check;  // what was checked: "version", "notifications", "acl: scripts", ...
    std::string node;   // "host:port" it was checked on; empty: the deployment as a whole
    Verdict verdict = Verdict::Ok;
    std::string detail;  // what was found
    std::string fix;     // what to do; empty for ok
};

struct CheckReport {
    std::string target;  // the URL checked, password hidden
    std::string mode;    // "standalone" or "cluster"; empty when nothing answered
    std::vector<CheckLine> lines;
    std::string acl_rule;  // the ACL SETUSER rule (after the user name) keywatch needs here

    void add(std::string check, std::string node, Verdict v, std::string detail,
             std::string fix = "");
    size_t count(Verdict v) const;
    // Nothing blocks keywatch: no line failed.
    bool passed() const { return count(Verdict::Fail) == 0; }
};

// The checklist for people: a header, one line per check ("ok    version  ..."), the fix
// under a problem, and a closing summary line.
std::string render_text(const CheckReport &report);
// {"target":..., "mode":..., "passed":bool, "acl_rule":..., "summary":{"ok":n,"warn":n,"fail":n},
//  "checks":[{"check":..., "node":..., "verdict":..., "detail":..., "fix":...}, ...]}
// ("fix" only on problems), one line ending in a newline.
std::string render_json(const CheckReport &report);

}  // namespace keywatch::cli
