// `keywatch schedule`, `keywatch cancel`, `keywatch reschedule`: delayed tasks in named
// queues (kw_client_schedule, kw_client_cancel, kw_client_reschedule), delivered as event "task" to
// engines serving the queue (e.g. `keywatch watch --queues QUEUE`).
// Not thread-safe: the main thread registers and runs the commands.
#pragma once

#include "cli/command.h"

namespace CLI {
class App;
}

namespace keywatch::cli {

void add_task_commands(CLI::App &app, Runner *selected);

}  // namespace keywatch::cli
