// The [[adopt]] tables of the config file: one adopt rule each (prefix or glob, db, queue,
// snapshot), written in file order as the engine's one adopt.rules text. The library
// parses and checks that text (core/queue/adopt_rules.h); this file only writes it and
// turns the library's "rule N" back into the table's place in the file.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "cli/daemon/config_reader.h"
#include "core/queue/adopt_rules.h"

namespace keywatch::cli {
namespace {

// One key of a table as rule text ("prefix=sess:"), its value checked for its TOML type.
bool read_adopt_key(const std::string &name, const toml::node &node, const std::string &key,
                    ConfigReader *reader, std::string *text) {
    std::string value;
    if (name == "prefix" || name == "glob") {
        if (!reader->bytes_value(node, key, &value)) return false;
    } else if (name == "queue") {
        if (!reader->string_value(node, key, &value)) return false;
    } else if (name == "db") {
        auto db = node.as_integer();
        if (!db)
            return reader->fail(node.source(), key,
                                "expected an integer, got " + got_text(node, key));
        value = std::to_string(db->get());
    } else {  // snapshot
        bool on = false;
        if (!reader->bool_value(node, key, &on)) return false;
        value = on ? "true" : "false";
    }
    *text = name + "=" + escape_adopt_value(value);
    return true;
}

// One [[adopt]] table; n is its number (1 for the first).
bool read_adopt_table(const toml::table &table, size_t n, ConfigReader *reader,
                      AdoptSections *out) {
    const std::string head = "[[adopt]] #" + std::to_string(n);
    if (!reader->check_keys(table, head + " ", "in " + head, kAdoptKeys)) return false;
    if (table.contains("prefix") == table.contains("glob"))
        return reader->fail(table.source(), head,
                            table.contains("prefix")
                                ? "prefix and glob are both given: give one of them (a rule "
                                  "per [[adopt]] table)"
                                : "no prefix or glob: add prefix = \"sess:\" (keys starting "
                                  "with it) or glob = \"cache:*:v2\"");
    AdoptTable t{table.source().begin, reader->place(table.source()), {}};
    std::string rule;
    for (const std::string &name : kAdoptKeys) {  // the order of the library's own text
        const toml::node *node = table.get(name);
        if (!node) continue;
        std::string field;
        if (!read_adopt_key(name, *node, head + " " + name, reader, &field)) return false;
        rule += (rule.empty() ? "" : " ") + field;
        t.keys.emplace_back(name, reader->place(node->source()));
    }
    out->rules += (out->rules.empty() ? "" : ";") + rule;
    out->tables.push_back(std::move(t));
    return true;
}

// The last rule number a library message names: "rule 2 ..." -> 2, "rules 1 and 3 ..." -> 3,
// "65 rules; at most 64" -> 65. 0 when it names none.
size_t rule_number(const std::string &msg) {
    if (msg.find(" rules; at most") != std::string::npos)
        return std::strtoul(msg.c_str() + msg.find_first_of("0123456789"), nullptr, 10);
    const size_t at = msg.find("rule");
    if (at == std::string::npos) return 0;
    size_t number = 0;
    const size_t end = std::min(msg.find_first_of(":(", at), msg.size());
    for (size_t i = at; i < end; i++) {
        if (!std::isdigit(static_cast<unsigned char>(msg[i]))) continue;
        number = 0;
        while (i < end && std::isdigit(static_cast<unsigned char>(msg[i])))
            number = number * 10 + static_cast<size_t>(msg[i++] - '0');
    }
    return number;
}

}  // namespace

const std::vector<std::string> kAdoptKeys = {"prefix", "glob", "db", "queue", "snapshot"};

bool read_adopt_sections(const toml::node &node, ConfigReader *reader, AdoptSections *out) {
    const toml::array *array = node.as_array();
    if (node.is_table())
        return reader->fail(node.source(), "",
                            "[adopt] is a table; write [[adopt]] (one per rule)");
    if (!array)
        return reader->fail(
            node.source(), "adopt",
            "expected [[adopt]] tables (one per rule), got " + got_text(node, "adopt"));
    for (const toml::node &element : *array) {
        const toml::table *table = element.as_table();
        if (!table)
            return reader->fail(
                element.source(), "adopt",
                "expected a table per rule ([[adopt]]), got " + got_text(element, "adopt"));
        if (!read_adopt_table(*table, out->tables.size() + 1, reader, out)) return false;
    }
    return true;
}

bool fail_adopt(const AdoptSections &adopt, std::string msg, ConfigReader *reader) {
    if (msg.rfind("adopt.rules: ", 0) == 0) msg.erase(0, 13);
    const size_t n = rule_number(msg);
    if (n == 0 || n > adopt.tables.size())
        return reader->fail(adopt.tables.empty() ? ConfigPlace{} : adopt.tables[0].place,
                            "[[adopt]]", msg);
    const AdoptTable &table = adopt.tables[n - 1];
    // The key the message is about: db or queue when it names them, else prefix or glob
    // (always a table's first key).
    auto key = table.keys.begin();
    for (auto k = table.keys.begin(); k != table.keys.end(); ++k)
        if ((k->first == "db" || k->first == "queue") &&
            msg.find(k->first + " ") != std::string::npos)
            key = k;
    return reader->fail(key->second, "[[adopt]] #" + std::to_string(n) + " " + key->first, msg);
}

}  // namespace keywatch::cli
