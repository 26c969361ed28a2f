#include "cli/daemon/config_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "cli/closest_name.h"
#include "core/base/duration.h"

namespace keywatch::cli {

namespace {

std::string toml_type_name(toml::node_type type) {
    switch (type) {
        case toml::node_type::table:
            return "a table";
        case toml::node_type::array:
            return "an array";
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a floating-point number";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::date:
            return "a date";
        case toml::node_type::time:
            return "a time";
        case toml::node_type::date_time:
            return "a date-time";
        default:
            return "nothing";
    }
}

}  // namespace

bool secret_key(const std::string &name) {
    for (const char *word : {"secret", "password", "token", "auth"})
        if (name.find(word) != std::string::npos) return true;
    return false;
}

std::string got_text(const toml::node &node, const std::string &key) {
    std::string text = toml_type_name(node.type());
    if (node.is_table() || node.is_array() || secret_key(key)) return text;
    std::ostringstream shown;
    node.visit([&](auto &&value) { shown << value; });  // as TOML writes it: "yes", 1.5
    std::string value = shown.str();
    if (value.size() > 60) {
        size_t cut = 57;
        while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) cut--;
        value = value.substr(0, cut) + "...";  // not inside a UTF-8 sequence
    }
    return text + " (" + value + ")";
}

std::string key_path(const std::string &table, const std::string &key) {
    return table.empty() ? key : "[" + table + "] " + key;
}

std::string ConfigReader::place_text(const toml::source_region &where) const {
    if (where.begin.line == 0) return source_;
    return source_ + ":" + std::to_string(where.begin.line) + ":" +
           std::to_string(where.begin.column);
}

bool ConfigReader::fail(const toml::source_region &where, const std::string &key,
                        const std::string &what) {
    return fail(place(where), key, what);
}

bool ConfigReader::fail(const ConfigPlace &where, const std::string &key, const std::string &what) {
    *err_ = where.text + ": " + (key.empty() ? "" : key + ": ") + what;
    return false;
}

std::string ConfigReader::unknown_key_hint(const std::string &name,
                                           const std::vector<std::string> &valid) const {
    std::string near = closest_name(name, valid);
    if (near.empty() && name.size() >= 3) {  // "interval" for queue_interval, if only one
        std::vector<std::string> holding;
        for (const std::string &key : valid)
            if (key.find(name) != std::string::npos) holding.push_back(key);
        if (holding.size() == 1) near = holding[0];
    }
    if (!near.empty()) return " (did you mean '" + near + "'?)";
    std::vector<std::string> tables;
    for (const std::string &key : known_keys_) {
        size_t dot = key.rfind('.');
        if (key.compare(dot == std::string::npos ? 0 : dot + 1, std::string::npos, name) != 0)
            continue;
        if (dot == std::string::npos)
            return " here: " + name +
                   " is a top-level key: move it above the first [table] header (in TOML a key "
                   "belongs to the table whose header is above it)";
        const std::string table = key.substr(0, dot);
        const bool array = table == "handler" || table == "adopt";  // [[handler]], [[adopt]]
        tables.push_back(array ? "[[" + table + "]]" : "[" + table + "]");
    }
    if (tables.empty()) return "";
    std::string list;
    for (size_t i = 0; i < tables.size(); i++)
        list += (i == 0 ? "" : i + 1 == tables.size() ? " or " : ", ") + tables[i];
    return " here: " + name + " is a key of " + list;
}

bool ConfigReader::check_keys(const toml::table &table, const std::string &path_prefix,
                              const std::string &where, const std::vector<std::string> &valid) {
    for (auto &&[key, value] : table) {
        const std::string name(key.str());
        if (std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
        std::string what = "unknown key" + unknown_key_hint(name, valid);
        what += "; valid keys " + where + ": ";
        for (size_t i = 0; i < valid.size(); i++) what += (i ? ", " : "") + valid[i];
        return fail(key.source(), path_prefix + name, what);
    }
    return true;
}

bool ConfigReader::scalar_text(const toml::node &node, const std::string &key, std::string *out) {
    if (node.is_string()) return string_value(node, key, out);
    if (auto i = node.as_integer()) {
        *out = std::to_string(i->get());
    } else if (auto b = node.as_boolean()) {
        *out = b->get() ? "true" : "false";
    } else {
        return fail(node.source(), key,
                    "expected a string, an integer or a boolean, got " + got_text(node, key));
    }
    return true;
}

bool ConfigReader::bytes_value(const toml::node &node, const std::string &key, std::string *out) {
    auto s = node.as_string();
    if (!s) return fail(node.source(), key, "expected a string, got " + got_text(node, key));
    *out = s->get();
    return true;
}

bool ConfigReader::string_value(const toml::node &node, const std::string &key, std::string *out) {
    if (!bytes_value(node, key, out)) return false;
    if (out->find('\0') != std::string::npos)
        return fail(node.source(), key, "holds a NUL character (\\u0000): remove it");
    return true;
}

bool ConfigReader::bool_value(const toml::node &node, const std::string &key, bool *out) {
    auto b = node.as_boolean();
    if (!b)
        return fail(node.source(), key,
                    "expected a boolean (true or false), got " + got_text(node, key));
    *out = b->get();
    return true;
}

bool ConfigReader::duration_value(const toml::node &node, const std::string &key, int64_t min_ms,
                                  int64_t *out) {
    if (!node.is_string() && !node.is_integer())
        return fail(node.source(), key,
                    "expected a duration (a string such as \"30s\", or an integer of "
                    "milliseconds), got " +
                        got_text(node, key));
    std::string text;
    scalar_text(node, key, &text);
    std::string why;
    if (!parse_duration_ms(text, out, &why)) return fail(node.source(), key, why);
    if (*out < min_ms)
        return fail(node.source(), key,
                    "'" + text + "' is too short; the minimum is " + std::to_string(min_ms) + "ms");
    return true;
}

std::string ConfigReader::resolve_path(const std::string &path) const {
    if (path.empty() || path[0] == '/') return path;
    size_t slash = source_.rfind('/');
    return slash == std::string::npos ? path : source_.substr(0, slash + 1) + path;
}

bool ConfigReader::secret_file(const toml::node &node, const std::string &key, std::string *out) {
    std::string path;
    if (!string_value(node, key, &path)) return false;
    if (path.empty()) return fail(node.source(), key, "empty path: name the file to read");
    path = resolve_path(path);
    std::string why;
    if (!read_whole_file(path, out, &why)) return fail(node.source(), key, why);
    if (!out->empty() && out->back() == '\n') out->pop_back();
    if (!out->empty() && out->back() == '\r') out->pop_back();
    if (out->empty()) return fail(node.source(), key, path + " is empty: write the secret in it");
    if (out->find('\0') != std::string::npos)
        return fail(node.source(), key, path + " holds a NUL byte: the secret must be text");
    return true;
}

bool read_whole_file(const std::string &path, std::string *out, std::string *why) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    out->clear();
    char buf[65536];
    ssize_t n = fd < 0 ? -1 : 0;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out->append(buf, static_cast<size_t>(n));
    }
    int saved = errno;
    if (fd >= 0) close(fd);
    if (n < 0) *why = "cannot read " + path + ": " + std::strerror(saved);
    return n == 0;
}

}  // namespace keywatch::cli
