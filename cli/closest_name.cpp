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

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string> &known) {
    std::string best;
    size_t best_distance = std::min<size_t>(3, name.size());  // suggest only near misses
    for (const auto &candidate : known) {
        size_t d = edit_distance(name, candidate);
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

}  // namespace keywatch::cli
