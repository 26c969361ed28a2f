#include "core/base/glob.h"

#include <utility>

namespace keywatch {

// Redis' stringmatchlen, on bytes, without recursion blow-up for the common cases.
bool glob_match(std::string_view p, std::string_view s) {
    size_t pi = 0, si = 0;
    size_t star_p = std::string_view::npos, star_s = 0;
    while (si < s.size()) {
        if (pi < p.size()) {
            char c = p[pi];
            if (c == '*') {
                while (pi < p.size() && p[pi] == '*') pi++;
                if (pi == p.size()) return true;
                star_p = pi;
                star_s = si;
                continue;
            }
            if (c == '?') {
                pi++;
                si++;
                continue;
            }
            if (c == '[') {
                size_t j = pi + 1;
                bool negate = j < p.size() && p[j] == '^';
                if (negate) j++;
                bool matched = false;
                while (j < p.size() && p[j] != ']') {
                    if (p[j] == '\\' && j + 1 < p.size()) {
                        j++;
                        if (p[j] == s[si]) matched = true;
                        j++;
                    } else if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
                        unsigned char lo = p[j], hi = p[j + 2], x = s[si];
                        if (lo > hi) std::swap(lo, hi);
                        if (x >= lo && x <= hi) matched = true;
                        j += 3;
                    } else {
                        if (p[j] == s[si]) matched = true;
                        j++;
                    }
                }
                if (matched != negate) {
                    pi = j < p.size() ? j + 1 : j;  // past ']' (an unclosed class ends it)
                    si++;
                    continue;
                }
            } else {
                if (c == '\\' && pi + 1 < p.size()) c = p[++pi];
                if (c == s[si]) {
                    pi++;
                    si++;
                    continue;
                }
            }
        }
        if (star_p == std::string_view::npos) return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < p.size() && p[pi] == '*') pi++;
    return pi == p.size();
}

std::string glob_escape(std::string_view literal) {
    std::string out;
    out.reserve(literal.size());
    for (char c : literal) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

namespace {
// Where the literal part of a pattern ends (its first unescaped * ? or [), the literal bytes
// before it appended to *literal when not null.
size_t literal_end(std::string_view p, std::string *literal) {
    for (size_t i = 0; i < p.size(); i++) {
        char c = p[i];
        if (c == '*' || c == '?' || c == '[') return i;
        if (c == '\\' && i + 1 < p.size()) c = p[++i];
        if (literal) *literal += c;
    }
    return p.size();
}
}  // namespace

std::string literal_prefix(std::string_view pattern) {
    std::string out;
    literal_end(pattern, &out);
    return out;
}

bool has_wildcard(std::string_view pattern) {
    return literal_end(pattern, nullptr) < pattern.size();
}

}  // namespace keywatch
