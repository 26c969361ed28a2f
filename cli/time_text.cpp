#include "cli/time_text.h"

#include <cstdio>

#include "core/base/duration.h"

namespace keywatch::cli {
namespace {

constexpr int64_t kDayMs = 86400000;

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
    *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

bool leap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int days_in_month(int64_t y, int m) {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

int64_t number(std::string_view s) {
    int64_t n = 0;
    for (char c : s) n = n * 10 + (c - '0');
    return n;
}

const char kForms[] =
    "write milliseconds since the Unix epoch (e.g. 1795241184005) or an ISO-8601 UTC time "
    "like 2026-11-21T10:00:00Z or 2026-11-21T10:00:00.250Z";

bool fail(std::string_view text, const std::string &why, std::string *err) {
    *err = "'" + std::string(text) + "' is not a time (" + why + "): " + kForms;
    return false;
}

// "YYYY-MM-DDTHH:MM:SS[.f{1,3}]Z".
bool parse_iso(std::string_view t, int64_t *ms, std::string *err) {
    // Fixed positions first: the shape, then the ranges.
    static const char kShape[] = "dddd-dd-ddTdd:dd:dd";
    const size_t base = sizeof kShape - 1;
    for (size_t i = 0; i < base; i++) {
        if (i >= t.size()) return fail(t, "too short", err);
        const char want = kShape[i];
        const bool ok = want == 'd' ? (t[i] >= '0' && t[i] <= '9') : t[i] == want;
        if (!ok)
            return fail(
                t,
                "expected " +
                    std::string(want == 'd' ? "a digit" : "'" + std::string(1, want) + "'") +
                    " at position " + std::to_string(i + 1),
                err);
    }
    std::string_view rest = t.substr(base);
    int64_t frac_ms = 0;
    if (!rest.empty() && rest.front() == '.') {
        size_t n = 1;
        while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') n++;
        const size_t digits = n - 1;
        if (digits == 0 || digits > 3)
            return fail(t, "give 1 to 3 digits of milliseconds after the '.'", err);
        frac_ms = number(rest.substr(1, digits));
        for (size_t i = digits; i < 3; i++) frac_ms *= 10;
        rest = rest.substr(n);
    }
    if (rest != "Z") {
        if (!rest.empty() && (rest.front() == '+' || rest.front() == '-'))
            return fail(t, "only UTC is accepted: convert to UTC and end with Z", err);
        return fail(t, "it must end with Z (UTC)", err);
    }
    const int64_t year = number(t.substr(0, 4));
    const int month = static_cast<int>(number(t.substr(5, 2)));
    const int day = static_cast<int>(number(t.substr(8, 2)));
    const int hour = static_cast<int>(number(t.substr(11, 2)));
    const int minute = static_cast<int>(number(t.substr(14, 2)));
    const int second = static_cast<int>(number(t.substr(17, 2)));
    if (year < 1970) return fail(t, "years before 1970 are not supported", err);
    if (month < 1 || month > 12)
        return fail(t, "month " + std::to_string(month) + " does not exist", err);
    if (day < 1 || day > days_in_month(year, month))
        return fail(t, "day " + std::to_string(day) + " does not exist in that month", err);
    if (hour > 23) return fail(t, "hour " + std::to_string(hour) + " is out of range 00..23", err);
    if (minute > 59)
        return fail(t, "minute " + std::to_string(minute) + " is out of range 00..59", err);
    if (second > 59)
        return fail(t, "second " + std::to_string(second) + " is out of range 00..59", err);
    *ms = days_from_civil(year, month, day) * kDayMs +
          ((hour * 60 + minute) * 60 + second) * int64_t{1000} + frac_ms;
    return true;
}

}  // namespace

bool parse_time_ms(std::string_view text, int64_t *ms, std::string *err) {
    if (text.empty()) return fail(text, "empty", err);
    if (all_digits(text)) {
        if (text.size() > 15 || !time_within_max(number(text)))
            return fail(text, "later than " KW_MAX_TIME_ISO ", the latest time keywatch accepts",
                        err);
        *ms = number(text);
        return true;
    }
    if (text.size() >= 5 && text[4] == '-') return parse_iso(text, ms, err);
    if (text.front() == '-' && all_digits(text.substr(1))) return fail(text, "negative", err);
    return fail(text, "neither a number of milliseconds nor an ISO-8601 date", err);
}

bool parse_duration_option(const std::string &option, const std::string &text,
                           const std::string &negative_hint, int64_t *ms, std::string *err) {
    if (!text.empty() && text[0] == '-') {
        *err = option + ": '" + text + "' is negative: " + negative_hint;
        return false;
    }
    if (!keywatch::parse_duration_ms(text, ms, err)) {
        *err = option + ": " + *err;
        return false;
    }
    if (!duration_within_max(*ms)) {
        *err = option + ": " + duration_after_max("'" + text + "'");
        return false;
    }
    return true;
}

std::string format_utc_ms(int64_t ms) {
    if (ms < 0 || ms > kMaxTimeMs) return std::to_string(ms);
    int64_t year = 0;
    int month = 0, day = 0;
    civil_from_days(ms / kDayMs, &year, &month, &day);
    const int64_t in_day = ms % kDayMs;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ",
                  static_cast<long long>(year), month, day, static_cast<int>(in_day / 3600000),
                  static_cast<int>(in_day / 60000 % 60), static_cast<int>(in_day / 1000 % 60),
                  static_cast<int>(in_day % 1000));
    return buf;
}

std::string format_span_ms(int64_t ms) {
    if (ms < 0) return "-" + format_span_ms(ms == INT64_MIN ? INT64_MAX : -ms);
    char buf[48];
    if (ms < 1000) {
        std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
    } else if (ms < 10000) {
        std::snprintf(buf, sizeof buf, "%lld.%llds", static_cast<long long>(ms / 1000),
                      static_cast<long long>(ms % 1000 / 100));
    } else if (ms < 60000) {
        std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
    } else if (ms < 3600000) {
        std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60000),
                      static_cast<long long>(ms / 1000 % 60));
    } else if (ms < kDayMs) {
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3600000),
                      static_cast<long long>(ms / 60000 % 60));
    } else {
        std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(ms / kDayMs),
                      static_cast<long long>(ms / 3600000 % 24));
    }
    return buf;
}

}  // namespace keywatch::cli
