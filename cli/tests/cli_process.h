// Runs the real `keywatch` binary for the CLI's end-to-end tests: one call to completion
// (exit status, stdout, stderr), or one in the background (a watch) stopped with SIGTERM.
// Output goes to files in a private directory, so a chatty child never blocks on a pipe.
// Not thread-safe: the test thread owns these objects.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kwclitest {

struct Result {
    int status = -1;  // exit status; 128 + signal if killed
    std::string out, err;
    std::string command;  // for failure messages
};

// The command, its exit status and output, for a failed expectation.
inline std::string describe(const Result &r) {
    return r.command + "\nexit status " + std::to_string(r.status) + "\n--- stdout\n" + r.out +
           "--- stderr\n" + r.err;
}

inline std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A child process running the binary with args; its stdout and stderr go to files in dir.
class Process {
  public:
    struct Options {
        std::map<std::string, std::string> env;  // set in the child (KEYWATCH_REDIS_URL is
                                                 // always cleared first)
        bool stdout_closed = false;              // stdout is a pipe nobody reads (EPIPE)
    };

    Process(const std::string &binary, const std::vector<std::string> &args, const std::string &dir,
            const std::string &name, const Options &opts)
        : out_path_(dir + "/" + name + ".out"), err_path_(dir + "/" + name + ".err") {
        command_ = binary;
        for (auto &a : args) command_ += " '" + a + "'";
        pid_ = fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            unsetenv("KEYWATCH_REDIS_URL");
            for (auto &kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
            int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (opts.stdout_closed) {
                int p[2];
                if (pipe(p) != 0) _exit(126);
                close(p[0]);
                dup2(p[1], 1);
            } else {
                dup2(out, 1);
            }
            dup2(err, 2);
            std::vector<std::string> all = {binary};
            all.insert(all.end(), args.begin(), args.end());
            std::vector<char *> argv;
            for (auto &a : all) argv.push_back(const_cast<char *>(a.c_str()));
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
    }
    ~Process() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    Process(const Process &) = delete;
    Process &operator=(const Process &) = delete;

    // Waits until stderr contains text (true) or timeout passes / the process exits.
    bool wait_stderr(const std::string &text, std::chrono::milliseconds timeout) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (read_file(err_path_).find(text) != std::string::npos) return true;
            if (exited()) return read_file(err_path_).find(text) != std::string::npos;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    // What the process has written so far; status is -1 while it runs. Never blocks.
    Result peek() {
        exited();
        Result r;
        r.status = status_;
        r.out = read_file(out_path_);
        r.err = read_file(err_path_);
        r.command = command_;
        return r;
    }

    // With terminate, sends SIGTERM; then waits for the exit (SIGKILL after timeout).
    Result finish(std::chrono::milliseconds timeout, bool terminate) {
        if (terminate && pid_ > 0 && status_ < 0) kill(pid_, SIGTERM);
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!exited()) {
            if (std::chrono::steady_clock::now() >= deadline) {
                // Give it the chance to stop its own redis-server, then insist.
                kill(pid_, SIGTERM);
                std::this_thread::sleep_for(std::chrono::seconds(3));
                kill(pid_, SIGKILL);
                int st = 0;
                waitpid(pid_, &st, 0);
                pid_ = -1;
                status_ = 128 + SIGKILL;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        Result r;
        r.status = status_;
        r.out = read_file(out_path_);
        r.err = read_file(err_path_);
        r.command = command_;
        return r;
    }

  private:
    bool exited() {
        if (pid_ <= 0) return true;
        int st = 0;
        pid_t got = waitpid(pid_, &st, WNOHANG);
        if (got != pid_) return false;
        pid_ = -1;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return true;
    }

    std::string out_path_, err_path_, command_;
    pid_t pid_ = -1;
    int status_ = -1;
};

}  // namespace kwclitest
