#include "cli/admin_commands.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/client_session.h"
#include "cli/dead_replay.h"
#include "cli/exit_status.h"
#include "cli/inspect_table.h"
#include "cli/utf8.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::ordered_json;

struct InspectArgs {
    ClientArgs client;
    std::string queues;  // always listed, even when empty
    bool json = false;
};

struct DeadArgs {
    ClientArgs client;
    std::string queue;
    std::string entry;   // empty: not one entry
    int64_t limit = -1;  // -1: the default (list: 100, replay: all)
    bool json = false;
};

constexpr int64_t kDefaultListLimit = 100;

// A dead-letter entry id as `keywatch dead list` prints it: "<ms>-<seq>".
CLI::Validator entry_id_validator() {
    return CLI::Validator(
        [](std::string &text) -> std::string {
            const size_t dash = text.find('-');
            const auto digits = [](const std::string &s) {
                return !s.empty() && s.size() <= 20 &&
                       s.find_first_not_of("0123456789") == std::string::npos;
            };
            if (dash != std::string::npos && digits(text.substr(0, dash)) &&
                digits(text.substr(dash + 1)))
                return "";
            return "'" + text +
                   "' is not a dead-letter entry id: use the \"entry\" field that keywatch dead "
                   "list prints, like 1795241184005-0";
        },
        "ENTRY", "entry id");
}

CLI::Validator limit_validator() {
    return CLI::Validator(
        [](std::string &text) -> std::string {
            if (!text.empty() && text.size() <= 9 &&
                text.find_first_not_of("0123456789") == std::string::npos && std::stoll(text) >= 1)
                return "";
            return "'" + text + "' is not a count: give a whole number from 1 to 999999999";
        },
        "N", "count");
}

// The figures of every queue, or false (message printed, *status set).
bool inspect(ClientSession &session, std::vector<QueueFigures> *queues, std::string *json,
             int *status, std::vector<NodeFigures> *nodes = nullptr) {
    char *text = nullptr;
    if (int rc = kw_client_inspect_json(session.get(), &text); rc != KW_OK) {
        *status = session.fail(rc, "");
        return false;
    }
    *json = text;
    kw_free(text);
    int64_t now = 0;
    std::string err;
    if (!parse_inspect_json(*json, queues, &now, &err, nodes)) {
        session.error(err);
        *status = kExitFailure;
        return false;
    }
    return true;
}

// What an incomplete inspection left out (its JSON): a row per master or shard that was not
// read and per range of unassigned slots, for the NOT READ table, and the same in a phrase.
void unread_parts(const Json &doc, std::string *rows, std::string *names) {
    auto add = [&](const std::string &what, int64_t slots, const std::string &why) {
        const std::string count = std::to_string(slots) + " slots";
        *rows += "  " + what + "  " + count + "  " + why + "\n";
        *names += (names->empty() ? "" : ", ") + what + " (" + count + ")";
    };
    for (const auto &u : doc.value("unreachable", Json::array()))
        add(u.value("node", std::string("?")), u.value("slots", int64_t{0}),
            u.value("error", std::string()));
    // Slots no shard holds: whatever queue keys a node still keeps for them, no master serves
    // them and nothing can read them.
    for (const auto &r : doc.value("unassigned", Json::array())) {
        const int64_t first = r.at(0).get<int64_t>(), last = r.at(1).get<int64_t>();
        add(first == last ? "slot " + std::to_string(first)
                          : "slots " + std::to_string(first) + "-" + std::to_string(last),
            last - first + 1,
            "no shard holds them (unassigned: CLUSTER ADDSLOTS gives them a master)");
    }
    if (names->empty()) *names = "no master serves them";
}

int run_inspect(const InspectArgs &a) {
    ClientSession session("inspect");
    std::vector<std::pair<std::string, std::string>> extra;
    if (!a.queues.empty()) extra.emplace_back("queues", a.queues);
    if (int rc = session.open(a.client, extra); rc != kExitOk) return rc;
    std::vector<QueueFigures> queues;
    std::vector<NodeFigures> nodes;
    std::string json;
    int status = kExitOk;
    if (!inspect(session, &queues, &json, &status, &nodes)) return status;
    // A master or shard that could not be read: its queues are missing from every total, so
    // they are named and the exit status says the picture is incomplete.
    std::string missing_rows, missing_names;
    int64_t unread_slots = 0;
    const Json doc = Json::parse(json, nullptr, false);
    if (!doc.is_discarded() && doc.value("complete", true) == false) {
        unread_slots = doc.value("unread_slots", int64_t{0});
        unread_parts(doc, &missing_rows, &missing_names);
    }
    const bool complete = unread_slots == 0;
    if (a.json) {
        if (!session.print(json + "\n")) return kExitFailure;
    } else {
        std::string text = inspect_table(queues);
        // A cluster: the same figures per master, too.
        if (!nodes.empty()) text += "\n" + inspect_node_table(nodes);
        if (!complete) text += "\nNOT READ (unreachable)\n" + missing_rows;
        if (!session.print(text)) return kExitFailure;
    }
    if (complete) return kExitOk;
    session.error("incomplete: the queues of " + std::to_string(unread_slots) +
                  " slot(s) could not be read and are left out of the figures: " + missing_names +
                  "; run inspect again once they are back");
    return kExitFailure;
}

// "jobs (2), keys (1)": queues that hold dead letters, for messages.
std::string queues_with_dead_letters(ClientSession &session) {
    std::vector<QueueFigures> queues;
    std::string json, out;
    int status = 0;
    if (!inspect(session, &queues, &json, &status)) return "";
    for (const auto &q : queues) {
        if (q.dead == 0) continue;
        if (!out.empty()) out += ", ";
        out += q.queue + " (" + std::to_string(q.dead) + ")";
    }
    return out;
}

// One dead letter with its fields in a fixed order (entry, id, attempts, deadline,
// failed_ms, error, payload), then any others.
Json ordered_dead_letter(const nlohmann::json &in) {
    Json out;
    for (const char *name : {"entry", "id", "id_b64", "attempts", "deadline", "failed_ms", "error",
                             "error_b64", "payload", "payload_b64"})
        if (in.contains(name)) out[name] = in[name];
    for (auto it = in.begin(); it != in.end(); ++it)
        if (!out.contains(it.key())) out[it.key()] = it.value();
    return out;
}

int run_dead_list(const DeadArgs &a) {
    ClientSession session("dead list");
    std::string err;
    if (!check_queue_arg(a.queue, false, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    const int64_t limit = a.limit > 0 ? a.limit : kDefaultListLimit;
    // One more than asked, to say whether there are more.
    char *text = nullptr;
    if (int rc = kw_client_dead_list_json(session.get(), a.queue.c_str(),
                                          static_cast<size_t>(limit + 1), &text);
        rc != KW_OK)
        return session.fail(rc, "queue '" + printable(a.queue) + "'");
    nlohmann::json list;
    try {
        list = nlohmann::json::parse(text);
    } catch (const std::exception &e) {
        kw_free(text);
        session.error(std::string("unexpected dead-letter list from the library: ") + e.what());
        return kExitFailure;
    }
    kw_free(text);
    std::string out;
    int64_t shown = 0;
    for (const auto &item : list) {
        if (shown == limit) break;
        out +=
            ordered_dead_letter(item).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
        shown++;
    }
    if (!session.print(out)) return kExitFailure;
    if (static_cast<int64_t>(list.size()) > limit)
        session.note("showed the oldest " + std::to_string(limit) +
                     " dead letters; there are more: raise --limit");
    else if (shown == 0)
        session.note("queue '" + printable(a.queue) + "' has no dead letters");
    return kExitOk;
}

int run_dead_replay(const DeadArgs &a) {
    ClientSession session("dead replay");
    std::string err;
    if (!check_queue_arg(a.queue, false, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    // How many: one entry, --limit, or every dead letter there is now (the queue's figure).
    int64_t want = a.entry.empty() ? a.limit : 1;
    if (want < 0) {
        std::vector<QueueFigures> queues;
        std::string json;
        int status = kExitOk;
        if (!inspect(session, &queues, &json, &status)) return status;
        want = 0;
        for (const auto &q : queues)
            if (q.queue == a.queue) want = q.dead;
    }
    int64_t count = 0;
    int rc = replay_dead_letters(session.get(), a.queue.c_str(),
                                 a.entry.empty() ? nullptr : a.entry.c_str(), want, &count);
    if (rc != KW_OK && count > 0) {
        session.fail(rc, "queue '" + printable(a.queue) + "'",
                     "after replaying " + std::to_string(count) + " dead letters");
        return kExitFailure;
    }
    // Nothing replayed is a failure, as for cancel and untrack: the stream may exist, empty.
    if (rc == KW_OK && count == 0) rc = KW_ERR_NOT_FOUND;
    if (rc == KW_ERR_NOT_FOUND && a.entry.empty()) {
        const std::string known = queues_with_dead_letters(session);
        session.error("queue '" + printable(a.queue) +
                      "' has no dead letters (unknown queue, none yet, or all replayed): "
                      "nothing was replayed; " +
                      (known.empty() ? std::string("no queue has any now")
                                     : "queues with dead letters: " + known) +
                      "; keywatch inspect lists every queue (KW_ERR_NOT_FOUND)");
        return kExitFailure;
    }
    if (rc == KW_ERR_NOT_FOUND)
        return session.fail(rc, "queue '" + printable(a.queue) + "'",
                            "keywatch dead list " + printable(a.queue) + " shows the entries");
    if (rc != KW_OK) return session.fail(rc, "queue '" + printable(a.queue) + "'");
    session.note("replayed " + std::to_string(count) + " dead letter" + (count == 1 ? "" : "s") +
                 " of queue '" + printable(a.queue) +
                 "': due now, attempts reset; an engine serving the queue delivers them");
    if (!a.json) return session.print(std::to_string(count) + "\n") ? kExitOk : kExitFailure;
    Json j;
    j["queue"] = a.queue;
    j["replayed"] = count;
    return session.print(j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n")
               ? kExitOk
               : kExitFailure;
}

int run_dead_purge(const DeadArgs &a) {
    ClientSession session("dead purge");
    std::string err;
    if (!check_queue_arg(a.queue, false, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    int64_t count = 0;
    const int rc = kw_client_dead_purge(session.get(), a.queue.c_str(),
                                        a.entry.empty() ? nullptr : a.entry.c_str(), &count);
    if (rc == KW_ERR_NOT_FOUND)
        return session.fail(rc, "queue '" + printable(a.queue) + "'",
                            "keywatch dead list " + printable(a.queue) + " shows the entries");
    if (rc != KW_OK) return session.fail(rc, "queue '" + printable(a.queue) + "'");
    session.note("deleted " + std::to_string(count) + " dead letter" + (count == 1 ? "" : "s") +
                 " of queue '" + printable(a.queue) + "'");
    if (!a.json) return session.print(std::to_string(count) + "\n") ? kExitOk : kExitFailure;
    Json j;
    j["queue"] = a.queue;
    j["purged"] = count;
    return session.print(j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n")
               ? kExitOk
               : kExitFailure;
}

CLI::App *add_dead_command(CLI::App *dead, const char *name, const char *help,
                           std::shared_ptr<DeadArgs> a) {
    CLI::App *cmd = dead->add_subcommand(name, help);
    cmd->add_option("QUEUE", a->queue, "queue name ('keys' for tracked keys, or a task queue)")
        ->required();
    add_client_options(cmd, &a->client);
    return cmd;
}

}  // namespace

void add_admin_commands(CLI::App &app, Runner *selected) {
    auto inspect_args = std::make_shared<InspectArgs>();
    CLI::App *cmd =
        app.add_subcommand("inspect", "Per queue: due, due now, in flight, dead, oldest overdue");
    cmd->add_flag("--json", inspect_args->json, "print the library's JSON instead of a table");
    cmd->add_option("--queues", inspect_args->queues,
                    "comma-separated task queues to list even when they are empty");
    add_client_options(cmd, &inspect_args->client);
    cmd->callback([inspect_args, selected] {
        *selected = [inspect_args] { return run_inspect(*inspect_args); };
    });

    CLI::App *dead = app.add_subcommand("dead", "Dead letters: list, replay or purge");
    dead->require_subcommand(1);

    auto list = std::make_shared<DeadArgs>();
    cmd = add_dead_command(
        dead, "list", "Print a queue's dead letters, oldest first, one JSON object per line", list);
    cmd->add_option("--limit", list->limit, "at most N (default 100)")->check(limit_validator());
    cmd->callback([list, selected] { *selected = [list] { return run_dead_list(*list); }; });

    auto replay = std::make_shared<DeadArgs>();
    cmd = add_dead_command(
        dead, "replay",
        "Put dead letters back in their queue, due now with attempts reset (all of them, one "
        "--entry, or the oldest --limit N). Prints how many",
        replay);
    CLI::Option *entry =
        cmd->add_option("--entry", replay->entry, "only this entry (see dead list)")
            ->check(entry_id_validator());
    cmd->add_option("--limit", replay->limit, "only the oldest N")
        ->check(limit_validator())
        ->excludes(entry);
    cmd->add_flag("--json", replay->json, "print {\"queue\",\"replayed\"}");
    cmd->callback(
        [replay, selected] { *selected = [replay] { return run_dead_replay(*replay); }; });

    auto purge = std::make_shared<DeadArgs>();
    cmd = add_dead_command(dead, "purge",
                           "Delete a queue's dead letters for good (all, or one --entry). "
                           "Prints how many",
                           purge);
    cmd->add_option("--entry", purge->entry, "only this entry (see dead list)")
        ->check(entry_id_validator());
    cmd->add_flag("--json", purge->json, "print {\"queue\",\"purged\"}");
    cmd->callback([purge, selected] { *selected = [purge] { return run_dead_purge(*purge); }; });
}

}  // namespace keywatch::cli
