// The config file as a whole: TOML syntax, the engine options (every table but the
// daemon's own, plus the adopt.rules the [[adopt]] tables make), and the daemon's sections
// read by daemon_config_sections.cpp and daemon_config_handler.cpp.
#include "cli/daemon/daemon_config.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

#include "keywatch.h"
#include "cli/daemon/config_reader.h"
#include "cli/redact_url.h"

namespace keywatch::cli {
namespace {

using ConfPtr = std::unique_ptr<kw_conf_t, decltype(&kw_conf_free)>;

// The daemon's own sections; every other table holds engine options.
const std::vector<std::string> kSections = {"adopt", "handler", "http", "log", "metrics"};

// The engine's option names (kw_conf_dump: one vocabulary) and the tables they imply
// ("sweep" for sweep.interval), plus the file's own redis.password_file.
struct EngineNames {
    std::set<std::string> options;
    std::set<std::string> tables;

    explicit EngineNames(const kw_conf_t *conf) {
        kw_conf_dump(
            conf,
            [](const char *name, const char *, const char *, void *opaque) {
                static_cast<EngineNames *>(opaque)->options.insert(name);
            },
            this);
        options.insert("redis.password_file");
        for (const std::string &name : options)
            for (size_t dot = name.find('.'); dot != std::string::npos;
                 dot = name.find('.', dot + 1))
                tables.insert(name.substr(0, dot));
    }
    // The names valid directly inside table ("" for the top level).
    std::vector<std::string> children(const std::string &table) const {
        std::set<std::string> out;
        const std::string prefix = table.empty() ? "" : table + ".";
        for (const auto *set : {&options, &tables})
            for (const std::string &name : *set)
                if (name.compare(0, prefix.size(), prefix) == 0) {
                    std::string rest = name.substr(prefix.size());
                    out.insert(rest.substr(0, rest.find('.')));
                }
        if (table.empty()) out.insert(kSections.begin(), kSections.end());
        return {out.begin(), out.end()};
    }
};

struct EngineValue {
    toml::source_position at;
    ConfigPlace place;
    std::string name, value;
};

// msg with each occurrence of url replaced by url without its password.
std::string hide_password(std::string msg, const std::string &url) {
    const std::string hidden = redact_url(url);
    if (url.empty() || hidden == url) return msg;
    for (size_t at = msg.find(url); at != std::string::npos; at = msg.find(url, at + hidden.size()))
        msg.replace(at, url.size(), hidden);
    return msg;
}

// kw_conf_set's message without the "name: " it starts with, the value quoted, and any
// password in a URL hidden.
std::string conf_message(const std::string &name, const std::string &text, std::string msg) {
    if (msg.compare(0, name.size() + 2, name + ": ") == 0) msg.erase(0, name.size() + 2);
    if (name == "redis.url") {
        // Every seed (and the whole text) with its password hidden.
        for (const std::string &url : url_list(text)) msg = hide_password(msg, url);
        msg = hide_password(msg, text);
    } else if (name != "redis.password" && msg.find("'" + text + "'") == std::string::npos) {
        msg = "'" + text + "': " + msg;
    }
    return msg;
}

std::string joined(const std::vector<std::string> &names) {
    std::string out;
    for (const std::string &n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

// "[sweep] interval" for sweep.interval, "lease" for lease.
std::string option_key(const std::string &name) {
    size_t dot = name.rfind('.');
    return dot == std::string::npos ? name : key_path(name.substr(0, dot), name.substr(dot + 1));
}

// Reads the engine options of one table into *conf (each checked by kw_conf_set there).
class EngineReader {
  public:
    EngineReader(ConfigReader *reader, kw_conf_t *conf)
        : reader_(reader), conf_(conf), names_(conf) {}

    bool read_table(const toml::table &table, const std::string &prefix);
    // adopt.rules from the [[adopt]] tables (a library refusal set at the table it names).
    bool set_adopt(const AdoptSections &adopt);
    const EngineNames &names() const { return names_; }
    std::vector<EngineValue> &values() { return values_; }

  private:
    bool read_value(const std::string &name, const toml::node &node);
    bool value_text(const std::string &name, const toml::node &node, std::string *text);
    bool set(const std::string &name, const std::string &text, const toml::node &node);

    ConfigReader *reader_;
    kw_conf_t *conf_;
    EngineNames names_;
    std::vector<EngineValue> values_;
};

bool EngineReader::read_table(const toml::table &table, const std::string &prefix) {
    const std::string where = prefix.empty() ? "at the top level" : "in [" + prefix + "]";
    const std::string shown = prefix.empty() ? "" : "[" + prefix + "] ";
    if (!reader_->check_keys(table, shown, where, names_.children(prefix))) return false;
    for (auto &&[key, node] : table) {
        const std::string name =
            prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
        if (prefix.empty() && std::count(kSections.begin(), kSections.end(), name)) continue;
        if (names_.options.count(name)) {
            if (!read_value(name, node)) return false;
        } else if (!node.is_table()) {
            return reader_->fail(node.source(), key_path(prefix, std::string(key.str())),
                                 "expected a table ([" + name + "] holding " +
                                     joined(names_.children(name)) + "), got " +
                                     got_text(node, name));
        } else if (!read_table(*node.as_table(), name)) {
            return false;
        }
    }
    return true;
}

bool EngineReader::read_value(const std::string &name, const toml::node &node) {
    std::string text;
    if (name == "redis.password_file") {
        for (const EngineValue &v : values_)  // [redis] password comes first (sorted keys)
            if (v.name == "redis.password")
                return reader_->fail(node.source(), "[redis] password_file",
                                     "password is set too (at " + v.place.text +
                                         "): give the password once, with password or "
                                         "password_file");
        return reader_->secret_file(node, "[redis] password_file", &text) &&
               set("redis.password", text, node);
    }
    if (!value_text(name, node, &text)) return false;
    // The TLS files, like every path in the file, are relative to its directory.
    if (name == "tls.ca_file" || name == "tls.cert_file" || name == "tls.key_file")
        text = reader_->resolve_path(text);
    return set(name, text, node);
}

// The option's text: a scalar, or for the lists (redis.url's seeds, queues) an array of
// strings joined with ','.
bool EngineReader::value_text(const std::string &name, const toml::node &node, std::string *text) {
    const std::string key = option_key(name);
    const toml::array *array = node.as_array();
    if (!array || (name != "redis.url" && name != "queues"))
        return reader_->scalar_text(node, key, text);
    if (array->empty()) return reader_->fail(node.source(), key, "empty array: give at least one");
    text->clear();
    for (const toml::node &element : *array) {
        std::string item;
        if (!reader_->string_value(element, key, &item)) return false;
        {  // each item alone first, so that an error points at it
            ConfPtr scratch(kw_conf_new(), kw_conf_free);
            char errstr[512];
            if (kw_conf_set(scratch.get(), name.c_str(), item.c_str(), errstr, sizeof errstr) !=
                KW_OK)
                return reader_->fail(element.source(), key, conf_message(name, item, errstr));
        }
        *text += (text->empty() ? "" : ",") + item;
    }
    return true;
}

bool EngineReader::set(const std::string &name, const std::string &text, const toml::node &node) {
    char errstr[1024];
    if (kw_conf_set(conf_, name.c_str(), text.c_str(), errstr, sizeof errstr) != KW_OK) {
        return reader_->fail(node.source(), option_key(name), conf_message(name, text, errstr));
    }
    values_.push_back({node.source().begin, reader_->place(node.source()), name, text});
    return true;
}

bool EngineReader::set_adopt(const AdoptSections &adopt) {
    char errstr[1024];
    if (kw_conf_set(conf_, "adopt.rules", adopt.rules.c_str(), errstr, sizeof errstr) != KW_OK)
        return fail_adopt(adopt, errstr, reader_);
    const AdoptTable &first = adopt.tables.front();
    values_.push_back({first.at, first.place, "adopt.rules", adopt.rules});
    return true;
}

// Where msg names the option as a word ("lease" in "... than lease (30000ms)", not in
// "released"); npos if nowhere.
size_t word_at(const std::string &msg, const std::string &name) {
    for (size_t at = msg.find(name); at != std::string::npos; at = msg.find(name, at + 1)) {
        const size_t end = at + name.size();
        const bool starts = at == 0 || msg[at - 1] == ' ';
        const bool ends =
            end == msg.size() || !(std::isalnum(static_cast<unsigned char>(msg[end])) ||
                                   msg[end] == '_' || msg[end] == '.');
        if (starts && ends) return at;
    }
    return std::string::npos;
}

// The option the message names first among those the file sets (null if none): where the
// file's options disagree.
const EngineValue *first_named(const std::string &msg, const std::vector<EngineValue> &values) {
    const EngineValue *first = nullptr;
    size_t first_at = std::string::npos;
    for (const EngineValue &v : values) {
        const size_t at = word_at(msg, v.name);
        if (at < first_at) {
            first = &v;
            first_at = at;
        }
    }
    return first;
}

// Options that are fine alone but not together (kw_engine_new checks them). A message about
// the adopt rules is placed at the [[adopt]] table it names.
bool check_engine_conf(const kw_conf_t *conf, const std::vector<EngineValue> &values,
                       const AdoptSections &adopt, ConfigReader *reader) {
    kw_engine_t *engine = nullptr;
    char errstr[1024];
    if (kw_engine_new(conf, &engine, errstr, sizeof errstr) == KW_OK) {
        kw_engine_free(engine);
        return true;
    }
    const EngineValue *v = first_named(errstr, values);
    if (v && v->name == "adopt.rules") return fail_adopt(adopt, errstr, reader);
    if (!v) return reader->fail(toml::source_region{}, "", errstr);
    return reader->fail(v->place, option_key(v->name), errstr);
}

// Every key of the file, dotted: the engine's options and the daemon's sections' keys.
std::vector<std::string> known_keys(const EngineNames &engine) {
    std::vector<std::string> keys(engine.options.begin(), engine.options.end());
    for (auto &[section, names] :
         {std::pair{"http", &kHttpKeys}, std::pair{"log", &kLogKeys},
          std::pair{"metrics", &kMetricsKeys}, std::pair{"handler", &kHandlerKeys},
          std::pair{"adopt", &kAdoptKeys}})
        for (const std::string &name : *names) keys.push_back(std::string(section) + "." + name);
    return keys;
}

bool read_engine(const toml::table &root, ConfigReader *reader, DaemonConfig *out) {
    ConfPtr conf(kw_conf_new(), kw_conf_free);
    EngineReader engine(reader, conf.get());
    reader->set_known_keys(known_keys(engine.names()));
    AdoptSections adopt;
    if (!engine.read_table(root, "")) return false;
    if (auto n = root.get("adopt"))
        if (!read_adopt_sections(*n, reader, &adopt) ||
            (!adopt.tables.empty() && !engine.set_adopt(adopt)))
            return false;
    if (!check_engine_conf(conf.get(), engine.values(), adopt, reader)) return false;
    auto &values = engine.values();
    std::stable_sort(values.begin(), values.end(),
                     [](const EngineValue &a, const EngineValue &b) { return a.at < b.at; });
    for (EngineValue &v : values) {
        out->engine.emplace_back(v.name, v.value);
        out->engine_places.push_back(v.place);
    }
    return true;
}

bool read_sections(const toml::table &root, ConfigReader *reader, DaemonConfig *out) {
    if (auto n = root.get("http"); n && !read_http_section(*n, reader, &out->http)) return false;
    if (auto n = root.get("log"); n && !read_log_section(*n, reader, &out->log)) return false;
    if (auto n = root.get("metrics"); n && !read_metrics_section(*n, reader, &out->metrics))
        return false;
    if (auto n = root.get("handler"); n && !read_handler_sections(*n, reader, &out->handlers))
        return false;
    return true;
}

}  // namespace

std::string DaemonConfig::engine_option(const std::string &name) const {
    for (auto it = engine.rbegin(); it != engine.rend(); ++it)
        if (it->first == name) return it->second;
    return "";
}

bool parse_daemon_config(const std::string &text, const std::string &source, DaemonConfig *out,
                         std::string *err) {
    *out = DaemonConfig();
    out->path = source;
    ConfigReader reader(source, err);
    toml::table root;
    try {
        root = toml::parse(std::string_view(text), std::string_view(source));
    } catch (const toml::parse_error &e) {
        return reader.fail(e.source(), "", "TOML syntax error: " + std::string(e.description()));
    }
    return read_engine(root, &reader, out) && read_sections(root, &reader, out);
}

bool load_daemon_config(const std::string &path, DaemonConfig *out, std::string *err) {
    std::string text;
    return read_whole_file(path, &text, err) && parse_daemon_config(text, path, out, err);
}

}  // namespace keywatch::cli
