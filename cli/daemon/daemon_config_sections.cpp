// The daemon's own sections of the config file: [http], [log] and [metrics].
#include <algorithm>

#include "cli/daemon/config_reader.h"
#include "core/redis/endpoint.h"

namespace keywatch::cli {
namespace {

const toml::table *section_table(const toml::node &node, const std::string &name,
                                 ConfigReader *reader) {
    const toml::table *table = node.as_table();
    if (!table)
        reader->fail(node.source(), name,
                     "expected a table ([" + name + "]), got " + got_text(node, name));
    return table;
}

bool read_listen(const toml::node &node, ConfigReader *reader, std::string *out) {
    if (!reader->string_value(node, "[http] listen", out)) return false;
    std::string why;
    if (!Endpoint::parse(*out, Endpoint::Form::Strict, &why))
        return reader->fail(node.source(), "[http] listen",
                            "'" + *out + "' is not host:port: " + why);
    return true;
}

}  // namespace

const std::vector<std::string> kHttpKeys = {"admin", "enabled", "listen", "token", "token_file"};
const std::vector<std::string> kLogKeys = {"file", "format", "level"};
const std::vector<std::string> kMetricsKeys = {"queue_interval"};

bool read_http_section(const toml::node &node, ConfigReader *reader, HttpConfig *out) {
    const toml::table *t = section_table(node, "http", reader);
    if (!t || !reader->check_keys(*t, "[http] ", "in [http]", kHttpKeys)) return false;
    if (auto n = t->get("enabled"); n && !reader->bool_value(*n, "[http] enabled", &out->enabled))
        return false;
    if (auto n = t->get("listen"); n && !read_listen(*n, reader, &out->listen)) return false;
    const toml::node *token = t->get("token");
    const toml::node *token_file = t->get("token_file");
    if (token && token_file)
        return reader->fail(token_file->source(), "[http] token_file",
                            "token is set too: give the token once, with token or token_file");
    if (token) {
        if (!reader->string_value(*token, "[http] token", &out->token)) return false;
        if (out->token.empty())
            return reader->fail(token->source(), "[http] token",
                                "empty token: leave token out to serve without one");
    }
    if (token_file && !reader->secret_file(*token_file, "[http] token_file", &out->token))
        return false;
    if (auto n = t->get("admin"); n && !reader->bool_value(*n, "[http] admin", &out->admin))
        return false;
    if (out->admin && out->token.empty())
        return reader->fail(t->get("admin")->source(), "[http] admin",
                            "the dashboard's actions (replay, purge) need a token: set [http] "
                            "token or token_file, or leave admin out");
    return true;
}

bool read_log_section(const toml::node &node, ConfigReader *reader, LogConfig *out) {
    const toml::table *t = section_table(node, "log", reader);
    if (!t || !reader->check_keys(*t, "[log] ", "in [log]", kLogKeys)) return false;
    std::string text;
    if (auto n = t->get("format")) {
        if (!reader->string_value(*n, "[log] format", &text)) return false;
        if (text != "json" && text != "text")
            return reader->fail(n->source(), "[log] format",
                                "'" + text + "' is not a log format: use \"json\" or \"text\"");
        out->format = text == "json" ? LogFormat::Json : LogFormat::Text;
    }
    if (auto n = t->get("level")) {
        static const std::vector<std::string> levels = {"debug", "info", "warn", "error"};
        if (!reader->string_value(*n, "[log] level", &text)) return false;
        auto it = std::find(levels.begin(), levels.end(), text);
        if (it == levels.end())
            return reader->fail(
                n->source(), "[log] level",
                "'" + text + "' is not a log level: use debug, info, warn or error");
        out->level = static_cast<int>(it - levels.begin());
    }
    if (auto n = t->get("file")) {
        if (!reader->string_value(*n, "[log] file", &text)) return false;
        if (text.empty())
            return reader->fail(n->source(), "[log] file",
                                "empty path: leave file out to log to stderr");
        out->file = reader->resolve_path(text);
    }
    return true;
}

bool read_metrics_section(const toml::node &node, ConfigReader *reader, MetricsConfig *out) {
    const toml::table *t = section_table(node, "metrics", reader);
    if (!t || !reader->check_keys(*t, "[metrics] ", "in [metrics]", kMetricsKeys)) return false;
    if (auto n = t->get("queue_interval"))
        return reader->duration_value(*n, "[metrics] queue_interval", 100, &out->queue_interval_ms);
    return true;
}

}  // namespace keywatch::cli
