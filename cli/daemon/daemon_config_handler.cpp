// The [[handler]] tables of the config file: one plugin instance each, its filter checked
// by kw_filter_set itself and its options kept as text for the plugin's init.
#include <algorithm>
#include <memory>

#include "keywatch.h"
#include "cli/closest_name.h"
#include "cli/daemon/config_reader.h"
#include "core/redis/keyspace_events.h"
#include "core/plugins/plugin_set.h"
#include "core/plugins/plugin_loader.h"

namespace keywatch::cli {
namespace {

using FilterPtr = std::unique_ptr<kw_filter_t, decltype(&kw_filter_free)>;

// One name of `events`: "*" alone, "task" (delayed tasks), or a name Redis publishes.
bool check_event_name(const std::string &name, size_t count, const toml::node &node,
                      const std::string &key, ConfigReader *reader) {
    if (name == "task" || (name == "*" && count == 1)) return true;
    if (name == "*")
        return reader->fail(node.source(), key,
                            "'*' stands alone: write events = \"*\" or list the names");
    if (find_event(name)) return true;
    std::string what = "unknown event '" + name + "'";
    std::string near = closest_name(name, event_names(), true);
    if (!near.empty()) what += " (did you mean '" + near + "'?)";
    return reader->fail(node.source(), key,
                        what +
                            "; use names Redis publishes (e.g. expired, evicted, del, set, "
                            "expire), \"task\" for delayed tasks, or \"*\"");
}

// events: one string (names separated by commas) or an array of strings; joined with ','.
bool read_events(const toml::node &node, const std::string &key, ConfigReader *reader,
                 std::string *out) {
    std::vector<std::pair<std::string, const toml::node *>> names;
    auto add = [&](const toml::node &n) {
        std::string text;
        if (!reader->string_value(n, key, &text)) return false;
        size_t start = 0;
        while (start <= text.size()) {
            size_t comma = std::min(text.find(',', start), text.size());
            std::string name = text.substr(start, comma - start);
            name.erase(0, name.find_first_not_of(" \t"));
            name.erase(name.find_last_not_of(" \t") + 1);
            if (name.empty())
                return reader->fail(
                    n.source(), key,
                    "empty event name in '" + text + "': write events = [\"expired\", \"del\"]");
            names.emplace_back(name, &n);
            start = comma + 1;
        }
        return true;
    };
    if (auto array = node.as_array()) {
        if (array->empty())
            return reader->fail(node.source(), key,
                                "empty array: name at least one event, or \"*\" for all");
        for (const toml::node &n : *array)
            if (!add(n)) return false;
    } else if (!node.is_string()) {
        return reader->fail(node.source(), key,
                            "expected a string or an array of strings, got " + got_text(node, key));
    } else if (!add(node)) {
        return false;
    }
    out->clear();
    for (auto &[name, n] : names) {
        if (!check_event_name(name, names.size(), *n, key, reader)) return false;
        *out += (out->empty() ? "" : ",") + name;
    }
    return true;
}

// kw_filter_set's message without the "filter <name> " it may start with.
std::string filter_message(const std::string &name, std::string msg) {
    const std::string prefix = "filter " + name + " ";
    if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
    return msg;
}

// One filter key: its text, checked by kw_filter_set (bytes for prefix and glob).
bool read_filter_value(const std::string &name, const toml::node &node, const std::string &key,
                       kw_filter_t *filter, ConfigReader *reader, std::string *text) {
    if (name == "events") {
        if (!read_events(node, key, reader, text)) return false;
    } else if (name == "db") {
        if (!node.is_integer() && !node.is_string())
            return reader->fail(node.source(), key,
                                "expected an integer or \"*\", got " + got_text(node, key));
        reader->scalar_text(node, key, text);
    } else if (name == "prefix" || name == "glob") {
        if (!reader->bytes_value(node, key, text)) return false;
    } else if (!reader->string_value(node, key, text)) {
        return false;
    }
    char errstr[512];
    int rc = name == "prefix" || name == "glob"
                 ? kw_filter_set_bytes(filter, name.c_str(), text->data(), text->size(), errstr,
                                       sizeof errstr)
                 : kw_filter_set(filter, name.c_str(), text->c_str(), errstr, sizeof errstr);
    if (rc != KW_OK) return reader->fail(node.source(), key, filter_message(name, errstr));
    return true;
}

// [handler.options]: every value as text, in file order.
bool read_options(const toml::node &node, const std::string &key, ConfigReader *reader,
                  HandlerConfig *out) {
    const toml::table *table = node.as_table();
    if (!table)
        return reader->fail(node.source(), key,
                            "expected a table ([handler.options] below its [[handler]]), got " +
                                got_text(node, key));
    struct Option {
        toml::source_position at;
        ConfigPlace place;
        std::pair<std::string, std::string> nv;
    };
    std::vector<Option> found;
    for (auto &&[name, value] : *table) {
        std::string text;
        if (!reader->scalar_text(value, key + "." + std::string(name.str()), &text)) return false;
        found.push_back(
            {name.source().begin, reader->place(name.source()), {std::string(name.str()), text}});
    }
    std::sort(found.begin(), found.end(),
              [](const Option &a, const Option &b) { return a.at < b.at; });
    for (auto &f : found) {
        out->options.push_back(std::move(f.nv));
        out->option_places.push_back(std::move(f.place));
    }
    return true;
}

const std::vector<std::string> kFilterKeys = {"events", "queue", "db", "prefix", "glob"};

// One [[handler]] table; n is its number (1 for the first) for messages.
bool read_handler(const toml::table &table, size_t n, ConfigReader *reader, HandlerConfig *out) {
    const std::string head = "[[handler]] #" + std::to_string(n);
    out->place = reader->place(table.source());
    if (!reader->check_keys(table, head + " ", "in " + head, kHandlerKeys)) return false;
    const toml::node *plugin = table.get("plugin");
    if (!plugin)
        return reader->fail(table.source(), head,
                            "no plugin: add plugin = \"stream\" (a built-in's name) or the path "
                            "of a plugin's .so");
    if (!reader->string_value(*plugin, head + " plugin", &out->plugin)) return false;
    if (out->plugin.empty())
        return reader->fail(plugin->source(), head + " plugin",
                            "empty: name a built-in (e.g. \"stream\") or a plugin's .so");
    if (plugin_spec_is_path(out->plugin)) out->plugin = reader->resolve_path(out->plugin);
    if (auto name = table.get("name")) {
        if (!reader->string_value(*name, head + " name", &out->name)) return false;
        if (out->name.empty())
            return reader->fail(name->source(), head + " name",
                                "empty: give a name, or leave name out to use the plugin's");
        if (!valid_instance_name(out->name))
            return reader->fail(
                name->source(), head + " name",
                "'" + out->name + "' is not a valid name: use " + kInstanceNameRule);
    } else if (instance_name(*out).empty()) {
        return reader->fail(plugin->source(), head + " plugin",
                            "no instance name can be made from it: add name = \"...\" to this "
                            "[[handler]] (" +
                                std::string(kInstanceNameRule) + ")");
    }
    FilterPtr filter(kw_filter_new(), kw_filter_free);
    std::vector<std::pair<toml::source_position, std::pair<std::string, std::string>>> found;
    for (const std::string &key : kFilterKeys) {
        const toml::node *node = table.get(key);
        if (!node) continue;
        std::string text;
        if (!read_filter_value(key, *node, head + " " + key, filter.get(), reader, &text))
            return false;
        found.push_back({node->source().begin, {key, text}});
    }
    std::sort(found.begin(), found.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &f : found) out->filter.push_back(std::move(f.second));
    if (auto options = table.get("options"))
        return read_options(*options, head + " options", reader, out);
    return true;
}

bool check_unique_names(const std::vector<HandlerConfig> &handlers,
                        const std::vector<const toml::table *> &tables, ConfigReader *reader) {
    for (size_t i = 0; i < handlers.size(); i++) {
        std::string name = instance_name(handlers[i]);
        for (size_t j = 0; j < i && !name.empty(); j++) {
            if (instance_name(handlers[j]) != name) continue;
            return reader->fail(tables[i]->source(), "[[handler]] #" + std::to_string(i + 1),
                                "a second handler named '" + name +
                                    "' (the first is [[handler]] #" + std::to_string(j + 1) +
                                    " at " + handlers[j].place.text +
                                    "): give each instance its own name = \"...\"");
        }
    }
    return true;
}

}  // namespace

std::string instance_name(const HandlerConfig &h) {
    if (!h.name.empty()) return h.name;
    std::string base = h.plugin.substr(h.plugin.rfind('/') + 1);
    if (plugin_spec_is_path(h.plugin) && base.size() >= 3 &&
        base.compare(base.size() - 3, 3, ".so") == 0)
        base.resize(base.size() - 3);
    if (base.size() > 64) base.resize(64);
    for (char &c : base)
        if (!valid_instance_name(std::string(1, c))) c = '_';
    return base;
}

const std::vector<std::string> kHandlerKeys = {"db",      "events", "glob",   "name",
                                               "options", "plugin", "prefix", "queue"};

bool read_handler_sections(const toml::node &node, ConfigReader *reader,
                           std::vector<HandlerConfig> *out) {
    const toml::array *array = node.as_array();
    if (!array)
        return reader->fail(node.source(), "handler",
                            "expected an array of tables (one [[handler]] per plugin instance), "
                            "got " +
                                got_text(node, "handler") + ": write [[handler]]");
    std::vector<const toml::table *> tables;
    for (const toml::node &element : *array) {
        const toml::table *table = element.as_table();
        if (!table)
            return reader->fail(
                element.source(), "handler",
                "expected a table per handler ([[handler]]), got " + got_text(element, "handler"));
        HandlerConfig handler;
        if (!read_handler(*table, tables.size() + 1, reader, &handler)) return false;
        tables.push_back(table);
        out->push_back(std::move(handler));
    }
    return check_unique_names(*out, tables, reader);
}

}  // namespace keywatch::cli
