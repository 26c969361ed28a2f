#include "cli/child_processes.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace keywatch::cli {
namespace {

struct ProcStat {
    pid_t pid = 0;
    char state = '?';
    pid_t ppid = 0;
    pid_t pgrp = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...". The command name may hold spaces and
// parentheses: the fields start after its last ')'.
bool read_stat(pid_t pid, ProcStat *out) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = fopen(path, "re");
    if (!f) return false;
    char buf[1024];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    int ppid = 0, pgrp = 0;
    if (!close || sscanf(close + 1, " %c %d %d", &out->state, &ppid, &pgrp) != 3) return false;
    out->pid = pid;
    out->ppid = ppid;
    out->pgrp = pgrp;
    return true;
}

// Every process /proc lists.
std::vector<ProcStat> all_processes() {
    std::vector<ProcStat> out;
    DIR *dir = opendir("/proc");
    if (!dir) return out;
    while (dirent *e = readdir(dir)) {
        char *end = nullptr;
        const long pid = strtol(e->d_name, &end, 10);
        ProcStat st;
        if (pid > 0 && end && *end == '\0' && read_stat(static_cast<pid_t>(pid), &st))
            out.push_back(st);
    }
    closedir(dir);
    return out;
}

bool ended(char state) {
    return state == 'Z' || state == 'X' || state == 'x';
}

// The target of a child's signals: its group (negative), or itself when it shares ours.
pid_t target(const ChildProcess &c) {
    return c.pgid == c.pid && c.pgid != getpgrp() ? -c.pgid : c.pid;
}

// True while some process of the target (a group, or one pid) has not ended.
bool alive(pid_t who, const std::vector<ProcStat> &procs) {
    return std::any_of(procs.begin(), procs.end(), [who](const ProcStat &p) {
        return !ended(p.state) && (who < 0 ? p.pgrp == -who : p.pid == who);
    });
}

}  // namespace

std::vector<ChildProcess> child_processes() {
    std::vector<ChildProcess> out;
    const pid_t self = getpid();
    for (const ProcStat &p : all_processes())
        if (p.ppid == self && !ended(p.state)) out.push_back({p.pid, p.pgrp});
    return out;
}

size_t end_child_processes(int64_t grace_ms, const std::vector<pid_t> &spare) {
    std::vector<pid_t> targets;
    for (const ChildProcess &c : child_processes())
        if (std::find(spare.begin(), spare.end(), c.pid) == spare.end())
            targets.push_back(target(c));
    for (pid_t t : targets) kill(t, SIGTERM);
    const size_t signalled = targets.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    while (!targets.empty()) {
        const std::vector<ProcStat> procs = all_processes();
        targets.erase(std::remove_if(targets.begin(), targets.end(),
                                     [&](pid_t t) { return !alive(t, procs); }),
                      targets.end());
        if (targets.empty() || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (pid_t t : targets) kill(t, SIGKILL);
    return signalled;
}

}  // namespace keywatch::cli
