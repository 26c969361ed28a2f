#include "cli/check/check_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/check/check_report.h"
#include "cli/client_session.h"
#include "cli/event_names.h"
#include "cli/check/deployment_check.h"
#include "cli/exit_status.h"
#include "cli/redact_url.h"
#include "cli/redis_target.h"
#include "core/config/config.h"
#include "core/engine/config_slices.h"
#include "core/engine/filter.h"
#include "core/engine/plan.h"

namespace keywatch::cli {
namespace {

struct CheckArgs {
    ClientArgs client;
    std::string events = "expired,evicted";
    std::string key;
    bool json = false;
};

void bad_input(const std::string &text) {
    std::fprintf(stderr, "keywatch check: %s\n", text.c_str());
}

// The library's configuration from --redis, --namespace and --conf, by the library's own
// rules. False (message printed) for a refused option.
bool build_config(const ClientArgs &a, Config *cfg) {
    std::vector<std::pair<std::string, std::string>> items;
    std::string err, url;
    if (!split_conf(a.conf, &items, &err) || !resolve_redis_url(a.redis, &items, &url, &err)) {
        bad_input(err);
        return false;
    }
    items.insert(items.begin(), {"redis.url", url.empty() ? kDefaultRedisUrl : url});
    if (!a.ns.empty()) items.insert(items.begin() + 1, {"namespace", a.ns});
    for (auto &[name, value] : items) {
        if (cfg->set(name, value, &err) != 0) {
            const std::string option = name == "redis.url"   ? "--redis"
                                       : name == "namespace" ? "--namespace"
                                                             : "--conf " + name;
            if (err.rfind(name + ": ", 0) == 0) err.erase(0, name.size() + 2);
            bad_input(option + ": " + cli_words(err));
            return false;
        }
    }
    if (cfg->validate(&err) != 0) {
        bad_input(cli_words(err));
        return false;
    }
    return true;
}

// What the engine's handlers would ask for (core/engine/plan.h): one handler taking
// --events as watch does (`*` and `task` as the filters mean them), and the tasks of the
// `queues` option. False (message printed) for refused input.
bool demand_of(const CheckArgs &a, const Config &cfg, Demand *out) {
    std::string events, err;
    Filter f;
    if (!parse_event_list(a.events, true, &events, &err) || !f.set("events", events, false, &err)) {
        bad_input(err);
        return false;
    }
    std::vector<HandlerNeeds> handlers = {HandlerNeeds::of(f)};
    if (!cfg.queues.empty()) {
        HandlerNeeds tasks;
        tasks.events = {"task"};
        handlers.push_back(tasks);
    }
    if (plan_demand(plan_config(cfg), handlers, out, &err) != KW_OK) {
        bad_input("--events: " + cli_words(err));
        return false;
    }
    return true;
}

int run_check(const CheckArgs &a) {
    Config cfg;
    if (!build_config(a.client, &cfg)) return kExitBadInput;
    DeploymentCheck check;
    check.seeds = cfg.effective_seeds();
    check.mode = cfg.mode;
    check.timeout_ms = cfg.connect_timeout_ms;
    check.config = plan_config(cfg);
    check.sample_key = a.key;
    check.adopt = {cfg.adopt_rules, cfg.ns, cfg.catchup_enable, cfg.catchup_rate};
    if (!demand_of(a, cfg, &check.demand)) return kExitBadInput;

    CheckReport report;
    // Every seed of a comma-separated redis.url, each password hidden.
    for (const std::string &one : split_url_list(cfg.url_text))
        report.target += (report.target.empty() ? "" : ",") + redact_url(one);
    for (const std::string &warning : cfg.tls_warnings())
        report.add("tls", "", Verdict::Warn, cli_words(warning));
    describe_adopt_rules(check.adopt, &report);
    check_deployment(check, &report);
    const std::string text = a.json ? render_json(report) : render_text(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return report.passed() ? kExitOk : kExitFailure;
}

}  // namespace

void add_check_command(CLI::App &app, Runner *selected) {
    auto args = std::make_shared<CheckArgs>();
    CLI::App *cmd = app.add_subcommand(
        "check", "Check that a Redis deployment is ready for keywatch (changes nothing)");
    cmd->footer(
        "Prints one line per check with a verdict (ok, warn, fail) and a fix for each problem: "
        "version, role, CONFIG, notify-keyspace-events (replicas too), persistence, "
        "maxmemory-policy, the ACL user's permissions for every command keywatch sends "
        "(probed as that user; writes inside a MULTI that is discarded), cluster state and "
        "slot coverage, clocks, and with -c adopt.rules=... the adopt rules and each master's "
        "catch-up scan (DBSIZE; a rule that matches every key is warned about). Exit status 0: "
        "nothing blocks keywatch (warnings allowed); 1: "
        "something does, or nothing answered; 2: bad options. See docs/production.md.");
    add_client_options(cmd, &args->client);
    cmd->add_option(
           "--events", args->events,
           "the keyevents your handlers take (comma-separated, or * as in watch; task "
           "for task queues only); del,rename_from are added while tracked keys are served "
           "(track.enable, and expired among the events)")
        ->capture_default_str();
    cmd->add_option("--key", args->key,
                    "a key your application tracks: checks that the ACL user may read it");
    cmd->add_flag("--json", args->json, "print the checklist as one JSON document");
    cmd->callback([args, selected] { *selected = [args] { return run_check(*args); }; });
}

}  // namespace keywatch::cli
