// The daemon's configuration file (`keywatch run --config keywatch.toml`), read with
// toml++ into plain data. One vocabulary: every table other than [http], [log], [metrics],
// [[handler]] and [[adopt]] holds engine options, named as kw_conf_set names them ("[sweep]
// interval" is "sweep.interval"), with the same value syntax (TOML strings, integers and
// booleans become kw_conf_set's text). [redis] url may be one URL or an array of seeds;
// [redis] password_file reads the password from a file. Each [[handler]] table is one
// plugin instance: plugin (a built-in's name or a path), name (the instance's name), the
// filter (events, prefix, glob, db, queue, as kw_filter_set names them) and
// [handler.options] (the plugin's own options). Each [[adopt]] table is one adopt rule
// (prefix or glob, db, queue, snapshot); together, in file order, they are the engine
// option adopt.rules, whose text the library parses ([catchup] is an ordinary table of
// engine options). [http] token_file reads the token from a file. Relative paths
// (password_file, token_file, [log] file, a plugin path) are taken relative to the config
// file's directory; HandlerConfig::plugin and LogConfig::file hold the resolved path.
// docs/daemon.md is the reference.
// Everything is checked while reading: unknown keys are refused with the valid names
// listed, values are checked by kw_conf_set / kw_filter_set themselves, the engine options
// together by kw_engine_new, and every message starts with "FILE:LINE:COLUMN: " and names
// the key (and quotes a refused value; never a password or a secret file's contents).
// Plugin options are checked when the plugin is loaded (run, run --check): prefix that
// error with HandlerConfig::place so it names the file and line too.
// Pure functions over their arguments: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace keywatch::cli {

// Where a value came from, for messages: "keywatch.toml:12:1".
struct ConfigPlace {
    std::string text;
};

struct HandlerConfig {
    // A built-in's name ("stream") or a path (plugin_spec_is_path: contains '/' or ends in
    // ".so"; resolved against the config file's directory).
    std::string plugin;
    std::string name;  // the instance's name as written; "" when the file gives none
    // kw_filter_set names and values, in file order, each already accepted by it; events
    // joined with ','. prefix and glob may hold any bytes (NUL included): give them to
    // kw_filter_set_bytes.
    std::vector<std::pair<std::string, std::string>> filter;
    // [handler.options]: the plugin's options as text, in file order.
    std::vector<std::pair<std::string, std::string>> options;
    std::vector<ConfigPlace> option_places;  // options[i] came from option_places[i]
    ConfigPlace place;                       // the [[handler]] header, "keywatch.toml:12:1"
};

// The name the engine gives a handler's instance (its statistics, metrics and log lines):
// name when written, else the built-in's name, or for a path the file's name without its
// directory and ".so"; a name not written has each character the instance-name rule
// (core/plugins/plugin_set.h) refuses replaced by '_' and is cut at 64 bytes
// ("/x/recorder-v1.2.so" -> "recorder-v1_2"). "" when nothing is left to name it by. No two
// handlers of a file share one.
std::string instance_name(const HandlerConfig &handler);

enum class LogFormat { Json, Text };

struct LogConfig {
    LogFormat format = LogFormat::Json;
    int level = 1;     // kw_log_level: 0 debug, 1 info, 2 warn, 3 error
    std::string file;  // "" = stderr; reopened on SIGHUP (resolved against the file's directory)
};

struct HttpConfig {
    bool enabled = true;                    // [http] enabled = false turns the server off
    std::string listen = "127.0.0.1:9464";  // "host:port"; port 0 = any free port
    std::string token;                      // bearer token ([http] token or token_file); "" = none
    bool admin = false;  // the API's and dashboard's actions (replay, purge); needs a token
};

struct MetricsConfig {
    // How often the gauges read from Redis (due, in flight, dead letters per queue) are
    // refreshed, in ms. Scrapes read the cached figures.
    int64_t queue_interval_ms = 10000;
};

struct DaemonConfig {
    std::string path;  // the file as given
    // kw_conf_set name and value, in file order, each already accepted by kw_conf_set.
    // redis.url holds the seeds joined with ','; redis.password_file became redis.password;
    // the [[adopt]] tables became adopt.rules (at the first table's place).
    std::vector<std::pair<std::string, std::string>> engine;
    std::vector<ConfigPlace> engine_places;  // engine[i] came from engine_places[i]
    HttpConfig http;
    LogConfig log;
    MetricsConfig metrics;
    std::vector<HandlerConfig> handlers;

    // The value of an engine option given in the file ("" if absent).
    std::string engine_option(const std::string &name) const;
};

// Reads and checks the file. False with *err ("keywatch.toml:3:1: [sweep] intervall:
// unknown key (did you mean 'interval'?); valid keys in [sweep]: ...", "cannot read
// keywatch.toml: No such file or directory") on any problem; *out is then unspecified.
// A file without [[handler]] or without [redis] url is not an error here (run decides:
// --embedded supplies both).
bool load_daemon_config(const std::string &path, DaemonConfig *out, std::string *err);
// The same for text already in memory; source names it in messages, and relative paths
// are taken relative to source's directory.
bool parse_daemon_config(const std::string &text, const std::string &source, DaemonConfig *out,
                         std::string *err);

}  // namespace keywatch::cli
