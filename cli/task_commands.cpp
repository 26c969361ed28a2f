#include "cli/task_commands.h"

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

// --in DURATION or --at TIME, exactly one.
struct When {
    std::string in, at;
};

struct ScheduleArgs {
    ClientArgs client;
    std::string queue, id, payload;
    When when;
    bool nx = false, json = false;
};

struct CancelArgs {
    ClientArgs client;
    std::string queue, id;
    bool json = false;
};

struct RescheduleArgs {
    ClientArgs client;
    std::string queue, id;
    When when;
    bool json = false;
};

const char kAtHelp[] =
    "when to deliver: ms since the Unix epoch or an ISO-8601 UTC time like "
    "2026-11-21T10:00:00Z; a time in the past means now";

const char kWhenFooter[] =
    "TIME is ms since the Unix epoch (1795241184005) or an ISO-8601 UTC time "
    "(2026-11-21T10:00:00Z, or 2026-11-21T10:00:00.250Z). A time in the past is not an error: "
    "the task is due at once, and the output says so. The due time is printed in ms since the "
    "epoch (Redis clock); --json prints an object. Tasks reach engines serving their queue as "
    "event \"task\" (keywatch watch --queues QUEUE).";

void add_when_options(CLI::App *cmd, When *w) {
    CLI::Option *in = cmd->add_option("--in", w->in, "deliver after this delay: 0, 500ms, 30s, 5m");
    CLI::Option *at = cmd->add_option("--at", w->at, kAtHelp)->type_name("TIME");
    in->excludes(at);
}

// at_ms/delay_ms for the library (at 0 means "use the delay"). Checked before anything
// connects; false with *err.
bool parse_when(const When &w, int64_t *at_ms, int64_t *delay_ms, std::string *err) {
    *at_ms = 0;
    *delay_ms = 0;
    if (w.in.empty() && w.at.empty()) {
        *err =
            "say when: --in DURATION (e.g. --in 30s) or --at TIME (e.g. --at "
            "2026-11-21T10:00:00Z)";
        return false;
    }
    if (!w.in.empty())
        return parse_duration_option("--in", w.in, "give a delay of 0 or more, e.g. 30s", delay_ms,
                                     err);
    if (!parse_time_ms(w.at, at_ms, err)) {
        *err = "--at: " + *err;
        return false;
    }
    return true;
}

// What the note says about the time a task is due at (the Redis clock decides "past").
std::string due_text(const When &w, int64_t at_ms, int64_t delay_ms, int64_t due) {
    if (!w.in.empty()) return "due in " + format_span_ms(delay_ms) + ", at " + format_utc_ms(due);
    if (due <= at_ms) return "due at " + format_utc_ms(due);
    std::string text = "--at " + format_utc_ms(at_ms) + " is " + format_span_ms(due - at_ms) +
                       " in the past, so it is due now (" + format_utc_ms(due) + ")";
    // A plain number of seconds reads as a date in 1970.
    if (w.at.find_first_not_of("0123456789") == std::string::npos && at_ms > 0 &&
        at_ms < 100000000000)
        text += "; note that --at takes milliseconds: " + w.at + " looks like seconds";
    return text;
}

std::string task_name(const std::string &queue, const std::string &id) {
    return "task '" + printable(id) + "' in queue '" + printable(queue) + "'";
}

int print_due(const ClientSession &session, bool json, const std::string &queue,
              const std::string &id, const When &w, int64_t at_ms, int64_t due) {
    if (!json) return session.print(std::to_string(due) + "\n") ? kExitOk : kExitFailure;
    Json j;
    j["queue"] = queue;
    put_bytes(j, "id", id);
    j["due_ms"] = due;
    j["past"] = w.in.empty() && due > at_ms;
    return session.print(j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n")
               ? kExitOk
               : kExitFailure;
}

int run_schedule(const ScheduleArgs &a) {
    ClientSession session("schedule");
    int64_t at_ms = 0, delay_ms = 0;
    std::string err;
    if (!check_queue_arg(a.queue, true, &err) || !check_key_arg("ID", a.id, &err) ||
        !parse_when(a.when, &at_ms, &delay_ms, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    int64_t due = 0;
    const int rc = kw_client_schedule(session.get(), a.queue.c_str(), a.id.data(), a.id.size(),
                                      a.payload.data(), a.payload.size(), at_ms, delay_ms,
                                      a.nx ? KW_SCHEDULE_NX : 0, &due);
    if (rc != KW_OK) return session.fail(rc, task_name(a.queue, a.id));
    session.note("scheduled " + task_name(a.queue, a.id) + ": " +
                 due_text(a.when, at_ms, delay_ms, due) +
                 "; an engine serving the queue delivers it (keywatch watch --queues " +
                 printable(a.queue) + ")");
    return print_due(session, a.json, a.queue, a.id, a.when, at_ms, due);
}

int run_cancel(const CancelArgs &a) {
    ClientSession session("cancel");
    std::string err;
    if (!check_queue_arg(a.queue, true, &err) || !check_key_arg("ID", a.id, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    const int rc = kw_client_cancel(session.get(), a.queue.c_str(), a.id.data(), a.id.size());
    if (rc == KW_ERR_NOT_FOUND) {
        session.error("no " + task_name(a.queue, a.id) +
                      " is waiting (delivered already, cancelled, or never scheduled); "
                      "keywatch inspect shows the queues (KW_ERR_NOT_FOUND)");
        return kExitFailure;
    }
    if (rc != KW_OK) return session.fail(rc, task_name(a.queue, a.id));
    session.note("cancelled " + task_name(a.queue, a.id));
    if (!a.json) return kExitOk;
    Json j;
    j["queue"] = a.queue;
    put_bytes(j, "id", a.id);
    j["cancelled"] = true;
    return session.print(j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n")
               ? kExitOk
               : kExitFailure;
}

int run_reschedule(const RescheduleArgs &a) {
    ClientSession session("reschedule");
    int64_t at_ms = 0, delay_ms = 0;
    std::string err;
    if (!check_queue_arg(a.queue, true, &err) || !check_key_arg("ID", a.id, &err) ||
        !parse_when(a.when, &at_ms, &delay_ms, &err)) {
        session.error(err);
        return kExitBadInput;
    }
    if (int rc = session.open(a.client); rc != kExitOk) return rc;
    int64_t due = 0;
    const int rc = kw_client_reschedule(session.get(), a.queue.c_str(), a.id.data(), a.id.size(),
                                        at_ms, delay_ms, &due);
    if (rc == KW_ERR_NOT_FOUND) {
        session.error("no " + task_name(a.queue, a.id) +
                      " is waiting (delivered already, cancelled, or never scheduled): schedule "
                      "it with keywatch schedule (KW_ERR_NOT_FOUND)");
        return kExitFailure;
    }
    if (rc != KW_OK) return session.fail(rc, task_name(a.queue, a.id));
    session.note("rescheduled " + task_name(a.queue, a.id) + ": " +
                 due_text(a.when, at_ms, delay_ms, due));
    return print_due(session, a.json, a.queue, a.id, a.when, at_ms, due);
}

}  // namespace

void add_task_commands(CLI::App &app, Runner *selected) {
    auto schedule = std::make_shared<ScheduleArgs>();
    CLI::App *cmd = app.add_subcommand(
        "schedule", "Schedule task ID in QUEUE --in DURATION or --at TIME; prints when it is due");
    cmd->footer(kWhenFooter);
    cmd->add_option("QUEUE", schedule->queue, "task queue name (not 'keys', no ':{}' or spaces)")
        ->required();
    cmd->add_option("ID", schedule->id,
                    "task id, unique in its queue: scheduling an existing id replaces it")
        ->required();
    cmd->add_option("PAYLOAD", schedule->payload, "bytes handed to the handler with the task")
        ->required();
    add_when_options(cmd, &schedule->when);
    cmd->add_flag("--nx", schedule->nx, "keep an existing task with this id (fail instead)");
    cmd->add_flag("--json", schedule->json, "print {\"queue\",\"id\",\"due_ms\",\"past\"}");
    add_client_options(cmd, &schedule->client);
    cmd->callback(
        [schedule, selected] { *selected = [schedule] { return run_schedule(*schedule); }; });

    auto cancel = std::make_shared<CancelArgs>();
    cmd = app.add_subcommand("cancel", "Remove a task that is not due yet");
    cmd->add_option("QUEUE", cancel->queue, "task queue name")->required();
    cmd->add_option("ID", cancel->id, "task id")->required();
    cmd->add_flag("--json", cancel->json, "print {\"queue\",\"id\",\"cancelled\"}");
    add_client_options(cmd, &cancel->client);
    cmd->callback([cancel, selected] { *selected = [cancel] { return run_cancel(*cancel); }; });

    auto reschedule = std::make_shared<RescheduleArgs>();
    cmd = app.add_subcommand("reschedule",
                             "Move a waiting task (--in or --at); prints when it is due");
    cmd->footer(kWhenFooter);
    cmd->add_option("QUEUE", reschedule->queue, "task queue name")->required();
    cmd->add_option("ID", reschedule->id, "task id")->required();
    add_when_options(cmd, &reschedule->when);
    cmd->add_flag("--json", reschedule->json, "print {\"queue\",\"id\",\"due_ms\",\"past\"}");
    add_client_options(cmd, &reschedule->client);
    cmd->callback([reschedule, selected] {
        *selected = [reschedule] { return run_reschedule(*reschedule); };
    });
}

}  // namespace keywatch::cli
