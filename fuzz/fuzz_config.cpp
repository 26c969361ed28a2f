// Fuzz target: configuration names and values (Config::set, behind kw_conf_set), handler
// filters (Filter::set, behind kw_filter_set and kw_filter_set_bytes) and Redis-style globs.
// Input: records "name=value" separated by NUL bytes, applied in order to one
// configuration; names "filter.X" set X on a filter as text, "filterb.X" as bytes.
// Properties: a refused value says why and changes nothing (every option reads back as
// before); an accepted value reads back and setting what it reads back gives the same
// value again; a glob made of the subject's bytes, each escaped, matches that subject.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"
#include "core/engine/filter.h"
#include "fuzz/check.h"

namespace {

std::vector<std::string> snapshot(const keywatch::Config &c) {
    std::vector<std::string> values;
    for (const auto &name : keywatch::Config::names()) {
        std::string v;
        KW_FUZZ_CHECK(c.get(name, &v) == 0, name.c_str());
        values.push_back(v);
    }
    return values;
}

// Options whose value reads back masked ("***"), so it cannot be set again as read.
bool masked(const std::string &name, const std::string &value) {
    return name == "redis.password" ||
           (name == "redis.url" && value.find('@') != std::string::npos);
}

void set_option(keywatch::Config &c, const std::string &name, const std::string &value) {
    const auto before = snapshot(c);
    std::string err;
    if (c.set(name, value, &err) != 0) {
        KW_FUZZ_CHECK(!err.empty(), "a refused option says why");
        KW_FUZZ_CHECK(snapshot(c) == before, "a refused option changes nothing");
        return;
    }
    std::string shown, again;
    KW_FUZZ_CHECK(c.get(name, &shown) == 0, "an accepted option reads back");
    if (masked(name, shown)) return;
    KW_FUZZ_CHECK(c.set(name, shown, &err) == 0, err.c_str());
    KW_FUZZ_CHECK(c.get(name, &again) == 0 && again == shown, "what reads back sets the same");
}

bool same(const keywatch::Filter &a, const keywatch::Filter &b) {
    return a.events == b.events && a.all_events == b.all_events && a.has_prefix == b.has_prefix &&
           a.prefix == b.prefix && a.has_glob == b.has_glob && a.glob == b.glob && a.db == b.db &&
           a.has_queue == b.has_queue && a.queue == b.queue;
}

void set_filter(keywatch::Filter &f, std::string_view name, std::string_view value, bool binary) {
    const keywatch::Filter before = f;
    std::string err;
    if (!f.set(name, value, binary, &err)) {
        KW_FUZZ_CHECK(!err.empty(), "a refused filter option says why");
        KW_FUZZ_CHECK(same(f, before), "a refused filter option changes nothing");
        return;
    }
    (void)f.matches("expired", 0, value, "keys");
}

void check_glob(std::string_view subject) {
    std::string escaped;
    for (char c : subject) {
        escaped += '\\';
        escaped += c;
    }
    KW_FUZZ_CHECK(keywatch::glob_match(escaped, subject), "an escaped subject matches itself");
    KW_FUZZ_CHECK(keywatch::glob_match("*", subject), "'*' matches everything");
    std::string longer(subject);
    longer += 'x';
    KW_FUZZ_CHECK(!keywatch::glob_match(escaped, longer), "and nothing longer");
    (void)keywatch::glob_match(subject, escaped);  // the subject as a pattern: any bytes
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view input(reinterpret_cast<const char *>(data), size);
    keywatch::Config conf;
    keywatch::Filter filter;
    size_t start = 0;
    while (start <= input.size()) {
        size_t end = input.find('\0', start);
        if (end == std::string_view::npos) end = input.size();
        const std::string_view record = input.substr(start, end - start);
        start = end + 1;
        const size_t eq = record.find('=');
        const std::string_view name = record.substr(0, eq);
        const std::string_view value =
            eq == std::string_view::npos ? std::string_view() : record.substr(eq + 1);
        check_glob(value);
        if (name.substr(0, 7) == "filter.")
            set_filter(filter, name.substr(7), value, false);
        else if (name.substr(0, 8) == "filterb.")
            set_filter(filter, name.substr(8), value, true);
        else
            set_option(conf, std::string(name), std::string(value));
    }
    std::string err;
    if (conf.validate(&err) != 0) KW_FUZZ_CHECK(!err.empty(), "a refused combination says why");
    return 0;
}
