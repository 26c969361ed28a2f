// How the CLI stops: SIGINT, SIGTERM and SIGHUP become a wake-up that the main thread
// waits for, and the main thread then stops the engine and the private redis-server in
// order. For `keywatch run` (HupMode::Reopen) SIGHUP is not a stop but a request to reopen
// the log file: wait() returns Reason::Reopen, and a SIGHUP never counts as a first signal. The
// signal handler only write()s to a self-pipe (async-signal-safe). A second signal while stopping
// exits at once (status 128 + the signal) from a thread of its own that first kills the private
// server (if any) and ends every other process this one started (the exec plugin's programs:
// SIGTERM to their process groups, SIGKILL after kChildGraceMs; cli/child_processes.h), so
// an impatient Ctrl-C leaves neither a redis-server nor a handler's program behind. Also ignores
// SIGPIPE, so a closed stdout is an error to handle, not a silent death. One instance per
// process; request() and stop_requested() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace keywatch::cli {

class StopSignal {
  public:
    enum class Reason { Signal, Requested, Timeout, Reopen };
    enum class HupMode { Stop, Reopen };

    // Installs the handlers and starts the thread that acts on a second signal; throws
    // std::runtime_error on failure.
    explicit StopSignal(HupMode hup = HupMode::Stop);
    ~StopSignal();  // restores the default dispositions, joins the thread
    StopSignal(const StopSignal &) = delete;
    StopSignal &operator=(const StopSignal &) = delete;

    // Ask the waiting thread to stop (e.g. stdout went away). Any thread.
    void request();
    // True once a signal or a request arrived. Any thread.
    bool stop_requested() const;
    // Blocks until a signal, a request or timeout_ms (negative: no timeout) passes.
    // Returns at once when a stop was already requested. With HupMode::Reopen, a SIGHUP
    // returns Reason::Reopen (once per SIGHUP received, however many arrived). Main thread.
    Reason wait(int64_t timeout_ms);
    // The signal that arrived (0 if none).
    int signal_number() const;
    // A child process to SIGKILL on a second signal (0: none).
    void set_child_pid(pid_t pid);
};

}  // namespace keywatch::cli
