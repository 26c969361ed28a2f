#include "cli/client_session.h"

#include <CLI/CLI.hpp>

#include <errno.h>

#include <cstdio>
#include <cstring>

#include "cli/empty_values.h"
#include "cli/exit_status.h"
#include "cli/redis_target.h"
#include "core/queue/queue_keys.h"

namespace keywatch::cli {
namespace {

void replace_all(std::string *text, const std::string &from, const std::string &to) {
    for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at)) {
        text->replace(at, from.size(), to);
        at += to.size();
    }
}

}  // namespace

void add_client_options(CLI::App *cmd, ClientArgs *a) {
    cmd->add_option("--redis", a->redis,
                    "redis://[user:password@]host:port[/db][?db=N] or unix:///path/to.sock[?db=N]")
        ->envname("KEYWATCH_REDIS_URL")
        ->default_str(kDefaultRedisUrl);
    cmd->add_option(
        "--namespace", a->ns,
        "prefix of keywatch's keys in Redis (default kw); use the one your engines use");
    cmd->add_option("-c,--conf", a->conf,
                    "NAME=VALUE: any library option, e.g. limits.value_bytes=1024 or "
                    "redis.command_timeout=2s (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false);  // one NAME=VALUE per -c: never swallow the positionals
    cmd->add_flag("-q,--quiet", a->quiet, "no notes on stderr (errors are still reported)");
}

bool split_conf(const std::vector<std::string> &items,
                std::vector<std::pair<std::string, std::string>> *out, std::string *err) {
    for (const auto &item : items) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0) {
            *err = "--conf '" + item +
                   "': write NAME=VALUE, e.g. --conf limits.value_bytes=1024 (the names are "
                   "listed in the README's Configuration section)";
            return false;
        }
        out->emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    return true;
}

bool check_key_arg(const std::string &what, const std::string &key, std::string *err) {
    if (!key.empty()) return true;
    *err = what + " is empty: give at least one byte";
    return false;
}

bool check_queue_arg(const std::string &queue, bool task_queue, std::string *err) {
    std::string why;
    if (!valid_queue_name(queue, &why)) {
        *err = "QUEUE: " + why;
        return false;
    }
    if (task_queue && queue == kKeysQueue) {
        *err =
            "QUEUE: 'keys' is the key-tracking queue: track keys with keywatch track, and give "
            "task queues another name";
        return false;
    }
    return true;
}

int exit_status_for(int status) {
    switch (status) {
        case KW_ERR_INVALID_ARG:
        case KW_ERR_TOO_LARGE:
        case KW_ERR_URL:
        case KW_ERR_BAD_VALUE:
        case KW_ERR_UNKNOWN_CONF:
            return kExitBadInput;
        default:
            return kExitFailure;
    }
}

std::string cli_words(std::string m) {
    replace_all(&m, "check redis.url", "check --redis URL (or KEYWATCH_REDIS_URL)");
    replace_all(&m, "or raise redis.connect_timeout",
                "or raise it (--conf redis.connect_timeout=DURATION)");
    replace_all(&m, "(use kw_client_untrack with delete to remove a key now)",
                "(to remove a key now: keywatch untrack KEY --delete)");
    replace_all(&m, "use kw_client_track for keys", "use keywatch track for keys");
    replace_all(&m, "or use kw_client_track", "or track it with keywatch track");
    replace_all(&m, "without KW_TRACK_SNAPSHOT", "without --snapshot");
    replace_all(&m, "or set redis.password", "or --conf redis.password=...");
    if (m.find("limits.value_bytes") != std::string::npos)
        replace_all(&m, "raise the limit", "raise the limit (--conf limits.value_bytes=BYTES)");
    if (m.find("limits.key_bytes") != std::string::npos)
        replace_all(&m, "raise the limit", "raise the limit (--conf limits.key_bytes=BYTES)");
    return m;
}

ClientSession::ClientSession(std::string verb) : verb_(std::move(verb)) {}

ClientSession::~ClientSession() {
    kw_client_free(client_);
    kw_conf_free(conf_);
}

int ClientSession::open(const ClientArgs &a,
                        const std::vector<std::pair<std::string, std::string>> &extra) {
    quiet_ = a.quiet;
    std::vector<std::pair<std::string, std::string>> conf_items;
    std::string err;
    if (!split_conf(a.conf, &conf_items, &err)) {
        error(err);
        return kExitBadInput;
    }
    conf_ = kw_conf_new();
    if (!conf_) {
        error("out of memory");
        return kExitFailure;
    }
    struct Item {
        std::string name, value, option;
    };
    std::string url;
    if (!resolve_redis_url(a.redis, &conf_items, &url, &err)) {
        error(err);
        return kExitBadInput;
    }
    if (url.empty()) {
        if (const std::string env = empty_env_note("KEYWATCH_REDIS_URL"); !env.empty())
            note(env + std::string(": using ") + kDefaultRedisUrl);
        url = kDefaultRedisUrl;
    }
    std::vector<Item> items = {{"redis.url", url, "--redis"}};
    if (!a.ns.empty()) items.push_back({"namespace", a.ns, "--namespace"});
    for (auto &nv : extra) items.push_back({nv.first, nv.second, nv.first});
    for (auto &nv : conf_items) items.push_back({nv.first, nv.second, "--conf " + nv.first});
    for (const auto &item : items) {
        char errstr[512] = "";
        const int rc =
            kw_conf_set(conf_, item.name.c_str(), item.value.c_str(), errstr, sizeof errstr);
        if (rc != KW_OK) {
            std::string why = errstr;
            // The library names its option; the command line names ours instead.
            if (why.rfind(item.name + ": ", 0) == 0) why.erase(0, item.name.size() + 2);
            error(item.option + ": " + cli_words(why));
            return kExitBadInput;
        }
    }
    char errstr[512] = "";
    const int rc = kw_client_new(conf_, &client_, errstr, sizeof errstr);
    if (rc != KW_OK) {
        // The library's message names the endpoint (never the password) and what to do.
        error(cli_words(errstr) + " (" + kw_err_name(rc) + ")");
        return exit_status_for(rc);
    }
    return kExitOk;
}

void ClientSession::note(const std::string &text) const {
    if (quiet_) return;
    std::fprintf(stderr, "keywatch %s: %s\n", verb_.c_str(), text.c_str());
    std::fflush(stderr);
}

void ClientSession::error(const std::string &text) const {
    std::fprintf(stderr, "keywatch %s: %s\n", verb_.c_str(), text.c_str());
    std::fflush(stderr);
}

int ClientSession::fail(int status, const std::string &what, const std::string &hint) const {
    std::string detail = client_ ? kw_client_last_error(client_) : "";
    if (detail.empty()) detail = kw_strerror(status);
    std::string text = what.empty() ? "" : what + ": ";
    text += cli_words(detail);
    if (!hint.empty()) text += "; " + hint;
    text += std::string(" (") + kw_err_name(status) + ")";
    error(text);
    return exit_status_for(status);
}

bool ClientSession::print(const std::string &text) const {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
        if (errno != EPIPE) error(std::string("cannot write to stdout: ") + std::strerror(errno));
        return false;
    }
    return true;
}

}  // namespace keywatch::cli
