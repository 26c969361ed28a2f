// `keywatch track`, `keywatch untrack`, `keywatch adopt`: keys that keywatch delivers at
// their deadline even when no watcher runs at that moment (kw_client_track, kw_client_untrack,
// kw_client_adopt).
// Not thread-safe: the main thread registers and runs the commands.
#pragma once

#include "cli/command.h"

namespace CLI {
class App;
}

namespace keywatch::cli {

// Registers the three subcommands on app; the one that is parsed stores its work in
// *selected.
void add_key_commands(CLI::App &app, Runner *selected);

}  // namespace keywatch::cli
