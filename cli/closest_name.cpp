#include "cli/closest_name.h"

#include <algorithm>
#include <cstddef>

namespace keywatch::cli {
namespace {

// Levenshtein distance, for suggestions on short names.
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
            diag = up;
        }
    }
    return row[b.size()];
}

// Whether every character of `name` appears in `candidate`, in order (an abbreviation:
// "zrembyscore" of "zremrangebyscore").
bool abbreviates(std::string_view name, std::string_view candidate) {
    size_t at = 0;
    for (char c : candidate)
        if (at < name.size() && name[at] == c) at++;
    return at == name.size();
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string> &known,
                         bool abbreviations) {
    std::string best;
    size_t best_distance = std::min<size_t>(3, name.size());  // suggest only near misses
    for (const auto &candidate : known) {
        size_t d = edit_distance(name, candidate);
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    if (!best.empty() || !abbreviations || name.size() < 4) return best;
    for (const auto &candidate : known)
        if (abbreviates(name, candidate) && (best.empty() || candidate.size() < best.size()))
            best = candidate;
    return best;
}

}  // namespace keywatch::cli
