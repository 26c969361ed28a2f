// `keywatch inspect` (per queue: due, due now, in flight, dead, oldest overdue) and
// `keywatch dead list|replay|purge` (the dead-letter streams).
// Not thread-safe: the main thread registers and runs the commands.
#pragma once

#include "cli/command.h"

namespace CLI {
class App;
}

namespace keywatch::cli {

void add_admin_commands(CLI::App &app, Runner *selected);

}  // namespace keywatch::cli
