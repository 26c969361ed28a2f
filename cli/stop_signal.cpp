#include "cli/stop_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "cli/child_processes.h"

namespace keywatch::cli {
namespace {

// Process-wide because signal handlers cannot carry state.
int g_pipe[2] = {-1, -1};
int g_second_pipe[2] = {-1, -1};  // the second signal's number (a byte), or 0 to quit
std::thread g_second_thread;
// Lock-free atomics: safe in a signal handler and between threads (worker threads call
// request()).
std::atomic<int> g_signal{0};
std::atomic<int> g_requested{0};
std::atomic<int> g_child{0};
std::atomic<int> g_hup_reopens{0};  // SIGHUP means "reopen the log file"
std::atomic<int> g_hup{0};          // a SIGHUP arrived and was not yet reported

const int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_signal(int sig) {
    int saved_errno = errno;
    if (sig == SIGHUP && g_hup_reopens != 0) {
        g_hup = 1;
        ssize_t ignored = write(g_pipe[1], "h", 1);
        (void)ignored;
        errno = saved_errno;
        return;
    }
    if (g_signal != 0) {
        // Second signal: the orderly stop is taking too long for the user.
        const char byte = static_cast<char>(sig);
        ssize_t ignored = write(g_second_pipe[1], &byte, 1);
        (void)ignored;
        errno = saved_errno;
        return;
    }
    g_signal = sig;
    ssize_t ignored = write(g_pipe[1], "s", 1);
    (void)ignored;
    errno = saved_errno;
}

// The second signal's thread: kills the private server, ends the other children, exits.
void exit_on_second_signal() {
    char sig = 0;
    ssize_t n;
    while ((n = read(g_second_pipe[0], &sig, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1 || sig == 0) return;  // the StopSignal goes away
    static const char msg[] = "keywatch: second signal, exiting now\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    if (g_child.load() > 0) kill(static_cast<pid_t>(g_child.load()), SIGKILL);
    end_child_processes(kChildGraceMs);
    _exit(128 + sig);
}

int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

StopSignal::StopSignal(HupMode hup) {
    g_hup_reopens = hup == HupMode::Reopen ? 1 : 0;
    g_hup = 0;
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    if (pipe2(g_second_pipe, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    g_second_thread = std::thread(exit_on_second_signal);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : kSignals) sigaction(sig, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

StopSignal::~StopSignal() {
    for (int sig : kSignals) signal(sig, SIG_DFL);
    const char quit = 0;
    ssize_t ignored = write(g_second_pipe[1], &quit, 1);
    (void)ignored;
    g_second_thread.join();
    g_child = 0;
    g_hup_reopens = 0;
    for (int *fds : {g_pipe, g_second_pipe}) {
        close(fds[0]);
        close(fds[1]);
        fds[0] = fds[1] = -1;
    }
}

void StopSignal::request() {
    g_requested = 1;
    ssize_t ignored = write(g_pipe[1], "r", 1);
    (void)ignored;
}

bool StopSignal::stop_requested() const {
    return g_signal != 0 || g_requested != 0;
}

StopSignal::Reason StopSignal::wait(int64_t timeout_ms) {
    const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        if (g_signal != 0) return Reason::Signal;
        if (g_requested != 0) return Reason::Requested;
        if (g_hup.exchange(0) != 0) return Reason::Reopen;
        int wait_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0) return Reason::Timeout;
            wait_ms = left > 60000 ? 60000 : static_cast<int>(left);
        }
        pollfd pfd{g_pipe[0], POLLIN, 0};
        if (poll(&pfd, 1, wait_ms) > 0) {
            char buf[16];
            while (read(g_pipe[0], buf, sizeof buf) > 0) {
            }
        }
    }
}

int StopSignal::signal_number() const {
    return g_signal.load();
}

void StopSignal::set_child_pid(pid_t pid) {
    g_child = pid;
}

}  // namespace keywatch::cli
