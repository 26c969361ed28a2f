#include "cli/key_commands.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "cli/client_session.h"
#include "cli/exit_status.h"
#include "core/format/json_bytes.h"
#include "cli/time_text.h"
#include "cli/utf8.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::ordered_json;

struct TrackArgs {
    ClientArgs client;
    std::string key, value, ttl;
    bool nx = false, xx = false, snapshot = false, json = false;
};

struct UntrackArgs {
    ClientArgs client;
    std::string key;
    bool delete_key = false, json = false;
};

struct AdoptArgs {
    ClientArgs client;
    std::string key;
    bool snapshot = false, json = false;
};

// --ttl: a duration above zero. Checked before anything connects.
bool parse_ttl(const std::string &text, int64_t *ttl_ms, std::string *err) {
    if (!parse_duration_option("--ttl", text, "a tracked key needs a TTL above zero, e.g. 30s",
                               ttl_ms, err))
        return false;
    if (*ttl_ms <= 0) {
        *err = "--ttl: '" + text +
               "' is zero: a tracked key needs a TTL above zero, e.g. 30s (to remove a key "
               "now: keywatch untrack KEY --delete)";
        return false;
    }
    return true;
}

int run_track(const TrackArgs &a) {
    ClientSession session("track");
    int64_t ttl_ms = 0;
    std::string err;
    if (!check_key_arg("KEY", a.key, &err) || !parse_ttl(a.ttl, &ttl_ms, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    const int flags =
        (a.nx ? KW_TRACK_NX : 0) | (a.xx ? KW_TRACK_XX : 0) | (a.snapshot ? KW_TRACK_SNAPSHOT : 0);
    int64_t deadline = 0;
    const int rc = kw_client_track(session.get(), a.key.data(), a.key.size(), a.value.data(),
                                   a.value.size(), ttl_ms, flags, &deadline);
    if (rc != KW_OK) return session.fail(rc, "'" + printable(a.key) + "'");
    session.note("tracking '" + printable(a.key) + "': it expires in " + format_span_ms(ttl_ms) +
                 ", at " + format_utc_ms(deadline) +
                 (a.snapshot ? "; its value comes with the event" : "") +
                 "; keywatch watch (or your engine) delivers it then");
    if (!a.json) return session.print(std::to_string(deadline) + "\n") ? kExitOk : kExitFailure;
    Json j;
    put_bytes(j, "key", a.key);
    j["deadline_ms"] = deadline;
    j["ttl_ms"] = ttl_ms;
    j["snapshot"] = a.snapshot;
    return session.print(j.dump() + "\n") ? kExitOk : kExitFailure;
}

int run_untrack(const UntrackArgs &a) {
    ClientSession session("untrack");
    std::string err;
    if (!check_key_arg("KEY", a.key, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    const int rc =
        kw_client_untrack(session.get(), a.key.data(), a.key.size(), a.delete_key ? 1 : 0);
    if (rc == KW_ERR_NOT_FOUND) {
        session.error("'" + printable(a.key) + "' was not tracked" +
                      (a.delete_key ? " and does not exist" : "") +
                      ": nothing to do (keywatch inspect shows what is tracked) (" +
                      kw_err_name(rc) + ")");
        return kExitFailure;
    }
    if (rc != KW_OK) return session.fail(rc, "'" + printable(a.key) + "'");
    session.note("'" + printable(a.key) + "' is no longer tracked" +
                 (a.delete_key ? " and is deleted" : " (the key itself is kept)"));
    if (!a.json) return kExitOk;
    Json j;
    put_bytes(j, "key", a.key);
    j["untracked"] = true;
    j["deleted"] = a.delete_key;
    return session.print(j.dump() + "\n") ? kExitOk : kExitFailure;
}

int run_adopt(const AdoptArgs &a) {
    ClientSession session("adopt");
    std::string err;
    if (!check_key_arg("KEY", a.key, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    int64_t deadline = 0;
    const int rc = kw_client_adopt(session.get(), a.key.data(), a.key.size(),
                                   a.snapshot ? KW_TRACK_SNAPSHOT : 0, &deadline);
    if (rc != KW_OK) {
        session.fail(rc, "'" + printable(a.key) + "'");
        // A missing key or one without a TTL is the state of Redis, not a typo.
        return kExitFailure;
    }
    session.note("tracking '" + printable(a.key) + "' at its current TTL: it expires at " +
                 format_utc_ms(deadline));
    if (!a.json) return session.print(std::to_string(deadline) + "\n") ? kExitOk : kExitFailure;
    Json j;
    put_bytes(j, "key", a.key);
    j["deadline_ms"] = deadline;
    j["snapshot"] = a.snapshot;
    return session.print(j.dump() + "\n") ? kExitOk : kExitFailure;
}

}  // namespace

void add_key_commands(CLI::App &app, Runner *selected) {
    auto track = std::make_shared<TrackArgs>();
    CLI::App *cmd = app.add_subcommand(
        "track", "Set KEY to VALUE with a TTL and track it; prints the deadline (ms)");
    cmd->footer(
        "The key's `expired` event reaches an engine serving tracked keys (keywatch watch, or "
        "your application's) at the deadline, even if none ran at that moment. The deadline is "
        "printed in ms since the Unix epoch (Redis clock); --json prints an object.");
    cmd->add_option("KEY", track->key, "the key (any bytes except NUL)")->required();
    cmd->add_option("VALUE", track->value, "the value (use -- before a value starting with -)")
        ->required();
    cmd->add_option("--ttl", track->ttl, "time to live above zero: 500ms, 30s, 5m, 1h, 2d")
        ->required();
    CLI::Option *nx = cmd->add_flag("--nx", track->nx, "only if the key does not exist yet");
    CLI::Option *xx = cmd->add_flag("--xx", track->xx, "only if the key exists already");
    nx->excludes(xx);
    cmd->add_flag("--snapshot", track->snapshot,
                  "keep the value to hand to the handler with the event");
    cmd->add_flag("--json", track->json, "print {\"key\",\"deadline_ms\",\"ttl_ms\",\"snapshot\"}");
    add_client_options(cmd, &track->client);
    cmd->callback([track, selected] { *selected = [track] { return run_track(*track); }; });

    auto untrack = std::make_shared<UntrackArgs>();
    cmd = app.add_subcommand("untrack", "Stop tracking KEY (--delete: delete it too)");
    cmd->add_option("KEY", untrack->key, "the tracked key")->required();
    cmd->add_flag("--delete", untrack->delete_key, "delete the key too, in the same step");
    cmd->add_flag("--json", untrack->json, "print {\"key\",\"untracked\",\"deleted\"}");
    add_client_options(cmd, &untrack->client);
    cmd->callback([untrack, selected] { *selected = [untrack] { return run_untrack(*untrack); }; });

    auto adopt = std::make_shared<AdoptArgs>();
    cmd = app.add_subcommand("adopt",
                             "Track an existing KEY at its current TTL; prints the deadline (ms)");
    cmd->add_option("KEY", adopt->key, "an existing key with a TTL")->required();
    cmd->add_flag("--snapshot", adopt->snapshot,
                  "keep its current value (string keys) to hand to the handler");
    cmd->add_flag("--json", adopt->json, "print {\"key\",\"deadline_ms\",\"snapshot\"}");
    add_client_options(cmd, &adopt->client);
    cmd->callback([adopt, selected] { *selected = [adopt] { return run_adopt(*adopt); }; });
}

}  // namespace keywatch::cli
