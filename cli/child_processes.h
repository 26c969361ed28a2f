// The processes this process started and has not reaped (the exec plugin's programs, each
// the leader of a process group of its own; the private redis-server), found through /proc
// (a child of any thread has this process as its parent), and how keywatch ends them on
// its way out: SIGTERM to each one's process group, then SIGKILL to what is left after a
// grace, so that no program (nor a program's own children) outlives the daemon.
// Nothing is reaped here: whoever started a child keeps waiting for it.
// Thread-safety: no state; any thread (not a signal handler: it reads /proc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace keywatch::cli {

// How long keywatch's children get between SIGTERM and SIGKILL on its way out.
inline constexpr int64_t kChildGraceMs = 1000;

struct ChildProcess {
    pid_t pid;
    pid_t pgid;  // its process group: its own (pgid == pid), or another
};

// The live children of this process (zombies, already ended, left out).
std::vector<ChildProcess> child_processes();

// Ends every live child but those in `spare`: SIGTERM to its process group (to the child
// alone when it shares this process's group), then, once grace_ms passed or every group
// ended, SIGKILL to the groups still there. Returns the number of children signalled.
size_t end_child_processes(int64_t grace_ms, const std::vector<pid_t> &spare = {});

}  // namespace keywatch::cli
