#include "cli/check/check_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace keywatch::cli {

const char *verdict_name(Verdict v) {
    switch (v) {
        case Verdict::Ok:
            return "ok";
        case Verdict::Warn:
            return "warn";
        case Verdict::Fail:
            return "fail";
    }
    return "?";
}

void CheckReport::add(std::string check, std::string node, Verdict v, std::string detail,
                      std::string fix) {
    lines.push_back({std::move(check), std::move(node), v, std::move(detail),
                     v == Verdict::Ok ? std::string() : std::move(fix)});
}

size_t CheckReport::count(Verdict v) const {
    return static_cast<size_t>(std::count_if(lines.begin(), lines.end(),
                                             [v](const CheckLine &l) { return l.verdict == v; }));
}

std::string render_text(const CheckReport &r) {
    std::string out = "keywatch check " + r.target;
    if (!r.mode.empty()) out += " (" + r.mode + ")";
    out += "\n";
    size_t width = 0;
    for (const auto &l : r.lines) width = std::max(width, l.check.size());
    for (const auto &l : r.lines) {
        std::string verdict = verdict_name(l.verdict);
        verdict.resize(6, ' ');
        std::string check = l.check;
        check.resize(width + 2, ' ');
        out += verdict + check + (l.node.empty() ? "" : l.node + ": ") + l.detail + "\n";
        if (!l.fix.empty()) out += std::string(6 + width + 2, ' ') + "fix: " + l.fix + "\n";
    }
    const bool acl_problem = std::any_of(r.lines.begin(), r.lines.end(), [](const CheckLine &l) {
        return l.verdict != Verdict::Ok && l.check.rfind("acl", 0) == 0;
    });
    if (acl_problem && !r.acl_rule.empty())
        out += "the whole ACL rule keywatch needs here: ACL SETUSER <user> " + r.acl_rule + "\n";
    const size_t fails = r.count(Verdict::Fail), warns = r.count(Verdict::Warn);
    out += "result: " + std::to_string(r.count(Verdict::Ok)) + " ok, " + std::to_string(warns) +
           " warn, " + std::to_string(fails) + " fail: ";
    if (fails)
        out += "keywatch cannot run reliably here until the failed checks are fixed\n";
    else if (warns)
        out += "nothing blocks keywatch; read the warnings\n";
    else
        out += "ready for keywatch\n";
    return out;
}

std::string render_json(const CheckReport &r) {
    using Json = nlohmann::ordered_json;
    Json checks = Json::array();
    for (const auto &l : r.lines) {
        Json line = {{"check", l.check},
                     {"node", l.node},
                     {"verdict", verdict_name(l.verdict)},
                     {"detail", l.detail}};
        if (!l.fix.empty()) line["fix"] = l.fix;
        checks.push_back(std::move(line));
    }
    Json doc = {{"target", r.target},
                {"mode", r.mode},
                {"passed", r.passed()},
                {"acl_rule", r.acl_rule},
                {"summary",
                 {{"ok", r.count(Verdict::Ok)},
                  {"warn", r.count(Verdict::Warn)},
                  {"fail", r.count(Verdict::Fail)}}},
                {"checks", std::move(checks)}};
    // Server texts may hold any bytes: replace what is not UTF-8 rather than throw.
    return doc.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace keywatch::cli
