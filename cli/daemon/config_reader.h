// What every part of the daemon's config loader shares while it walks the TOML tree: the
// source's name for "FILE:LINE:COLUMN: <key>: <what>" messages, TOML values read as the
// text kw_conf_set and kw_filter_set take, unknown keys refused with the valid names, and
// paths resolved against the config file's directory. Internal to daemon_config*.cpp.
// Not thread-safe: one reader per load.
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "cli/daemon/daemon_config.h"

namespace keywatch::cli {

class ConfigReader {
  public:
    ConfigReader(std::string source, std::string *err) : source_(std::move(source)), err_(err) {}

    const std::string &source() const { return source_; }
    // Every key the file may hold, dotted ("sweep.interval", "http.listen", "lease"), for
    // "it belongs to [sweep]" when a key is written in the wrong table.
    void set_known_keys(std::vector<std::string> keys) { known_keys_ = std::move(keys); }
    // "FILE:LINE:COLUMN" (just "FILE" when the position is unknown).
    std::string place_text(const toml::source_region &where) const;
    ConfigPlace place(const toml::source_region &where) const { return {place_text(where)}; }
    // Sets the error "FILE:LINE:COLUMN: key: what" and returns false.
    bool fail(const toml::source_region &where, const std::string &key, const std::string &what);
    bool fail(const ConfigPlace &where, const std::string &key, const std::string &what);

    // Refuses a key of table not in valid: "key: unknown key; did you mean 'x'? Valid keys
    // in [http]: a, b". where names the table for the message ("in [http]", "at the top
    // level").
    bool check_keys(const toml::table &table, const std::string &path_prefix,
                    const std::string &where, const std::vector<std::string> &valid);
    // A string, an integer or a boolean as kw_conf_set's text; other types refused.
    bool scalar_text(const toml::node &node, const std::string &key, std::string *out);
    // A string without NUL characters (they would cut the C API's text short).
    bool string_value(const toml::node &node, const std::string &key, std::string *out);
    // Any string, NUL characters included (prefix and glob: kw_filter_set_bytes).
    bool bytes_value(const toml::node &node, const std::string &key, std::string *out);
    bool bool_value(const toml::node &node, const std::string &key, bool *out);
    // A duration: "30s" or a number of milliseconds (an integer), at least min_ms.
    bool duration_value(const toml::node &node, const std::string &key, int64_t min_ms,
                        int64_t *out);
    // The contents of the file a string value names (relative to the config's directory),
    // one trailing newline dropped; never quoted in messages. Empty contents are refused.
    bool secret_file(const toml::node &node, const std::string &key, std::string *out);
    // path as written, or joined to the config file's directory when relative.
    std::string resolve_path(const std::string &path) const;

  private:
    // " (did you mean 'x'?)", or where a key of that name belongs; "" if nowhere.
    std::string unknown_key_hint(const std::string &name,
                                 const std::vector<std::string> &valid) const;

    std::string source_;
    std::string *err_;
    std::vector<std::string> known_keys_;
};

// The whole file; false with *why ("cannot read PATH: <strerror>") otherwise.
bool read_whole_file(const std::string &path, std::string *out, std::string *why);
// "a floating-point number (1.5)", "an array", ... for "expected X, got Y": the type and, for
// a scalar, its value as written in TOML (cut at 60 bytes), unless key names a secret.
std::string got_text(const toml::node &node, const std::string &key);
// Keys whose values are never printed: those naming a secret, password, token or auth.
bool secret_key(const std::string &name);
// "[sweep] interval", "[a.b] c", or "lease" at the top level.
std::string key_path(const std::string &table, const std::string &key);
// The keys of the daemon's own sections.
extern const std::vector<std::string> kHttpKeys, kLogKeys, kMetricsKeys, kHandlerKeys, kAdoptKeys;
// The sections of the file that are not engine options, each read by its own function.
bool read_http_section(const toml::node &node, ConfigReader *reader, HttpConfig *out);
bool read_log_section(const toml::node &node, ConfigReader *reader, LogConfig *out);
bool read_metrics_section(const toml::node &node, ConfigReader *reader, MetricsConfig *out);
bool read_handler_sections(const toml::node &node, ConfigReader *reader,
                           std::vector<HandlerConfig> *out);

// One [[adopt]] table: where it is, and where each key it gives is (in kAdoptKeys order).
struct AdoptTable {
    toml::source_position at;
    ConfigPlace place;
    std::vector<std::pair<std::string, ConfigPlace>> keys;
};
// The [[adopt]] tables as the engine's adopt.rules text, one rule per table in file order.
struct AdoptSections {
    std::string rules;
    std::vector<AdoptTable> tables;
};
bool read_adopt_sections(const toml::node &node, ConfigReader *reader, AdoptSections *out);
// Sets a library message about adopt.rules as the file's error and returns false: at the
// key of the [[adopt]] table it names ("adopt.rules: rule 2 (prefix \"kw:\") names keys
// of ..." -> "[[adopt]] #2 prefix: rule 2 ..."), else at the first table.
bool fail_adopt(const AdoptSections &adopt, std::string msg, ConfigReader *reader);

}  // namespace keywatch::cli
