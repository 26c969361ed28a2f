// `keywatch check --redis URL [--json]`: inspects a Redis deployment before keywatch runs
// on it and prints a checklist (check_report.h) with a verdict and a fix per line. Exit 0
// when nothing blocks keywatch, 1 when something does (or nothing answered), 2 for bad
// options. Not thread-safe: the main thread registers and runs it.
#pragma once

#include "cli/command.h"

namespace CLI {
class App;
}

namespace keywatch::cli {

void add_check_command(CLI::App &app, Runner *selected);

}  // namespace keywatch::cli
