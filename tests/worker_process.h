// kw_queue_worker processes for the multi-process tests (queue and cluster): start one,
// wait until its engine runs, kill it with SIGKILL or stop it with SIGTERM, and read the
// lines it wrote. Not thread-safe: the test thread owns these objects.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef KW_QUEUE_WORKER_PATH
#error "KW_QUEUE_WORKER_PATH must name the kw_queue_worker binary"
#endif

namespace kwtest {

// A kw_queue_worker process; stopped with SIGTERM at destruction unless killed first.
class Worker {
  public:
    Worker(const std::string &url, const std::string &out, std::vector<std::string> extra = {}) {
        int fds[2];
        if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
        pid_ = fork();
        if (pid_ == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            std::vector<std::string> args = {KW_QUEUE_WORKER_PATH, url, out};
            args.insert(args.end(), extra.begin(), extra.end());
            std::vector<char *> argv;
            for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
        close(fds[1]);
        // Wait for "ready" (the engine has started).
        std::string line;
        char c;
        while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
        close(fds[0]);
        if (line != "ready") throw std::runtime_error("kw_queue_worker did not start: " + line);
    }
    ~Worker() { stop(); }
    void kill9() {
        if (pid_ <= 0) return;
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    // SIGSTOP / SIGCONT: a watcher that hangs (and comes back).
    void pause() {
        if (pid_ > 0) kill(pid_, SIGSTOP);
    }
    void resume() {
        if (pid_ > 0) kill(pid_, SIGCONT);
    }
    int pid() const { return pid_; }
    void stop() {
        if (pid_ <= 0) return;
        kill(pid_, SIGCONT);  // a stopped process would not see SIGTERM
        kill(pid_, SIGTERM);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

  private:
    pid_t pid_ = -1;
};

// A key as a worker's output file writes it: lowercase hex.
inline std::string hex(const std::string &bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 15]);
    }
    return out;
}

// One line of a worker's output file (see tests/queue_worker.cpp).
struct Line {
    std::string queue, key_hex;
    int source = 0, attempt = 0, pid = 0;
    long long ts_ms = 0;        // when the worker received it
    long long deadline_ms = 0;  // the item's deadline (0: none)
    long long handled_ms = 0;   // the worker's wall clock in the handler
};

std::vector<Line> read_lines(const std::string &path) {
    std::vector<Line> out;
    std::ifstream in(path);
    std::string text;
    while (std::getline(in, text)) {
        std::istringstream ss(text);
        Line l;
        std::string source, attempt, pid, ts;
        if (std::getline(ss, l.queue, '\t') && std::getline(ss, l.key_hex, '\t') &&
            std::getline(ss, source, '\t') && std::getline(ss, attempt, '\t') &&
            std::getline(ss, pid, '\t') && std::getline(ss, ts, '\t')) {
            l.source = std::stoi(source);
            l.attempt = std::stoi(attempt);
            l.pid = std::stoi(pid);
            l.ts_ms = std::stoll(ts);
            std::string deadline, handled;
            if (std::getline(ss, deadline, '\t') && std::getline(ss, handled, '\t')) {
                l.deadline_ms = std::stoll(deadline);
                l.handled_ms = std::stoll(handled);
            }
            out.push_back(l);
        }
    }
    return out;
}

}  // namespace kwtest
