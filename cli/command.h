// How a subcommand hands its work to main(): its CLI11 callback (run once parsing has
// succeeded) stores what to run; main() runs it and exits with its status.
// A type only; a Runner is called on the main thread.
#pragma once

#include <functional>

namespace keywatch::cli {

// Returns the process exit status (see exit_status.h).
using Runner = std::function<int()>;

}  // namespace keywatch::cli
