// Drives kw_c99_smoke (a C99 program that includes only keywatch.h) against a real
// redis-server: the program subscribes and says "ready", this test writes a key with a
// short TTL, and the program must report the expired event and exit 0.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "embedded/redis_process.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A child process with its stdout and stderr on pipes; killed by pid if still running
// when the object goes away.
class Child {
  public:
    explicit Child(const std::vector<std::string> &argv) {
        int out[2], err[2];
        if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe failed");
        pid_ = fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            dup2(out[1], 1);
            dup2(err[1], 2);
            close(out[0]);
            close(err[0]);
            close(out[1]);
            close(err[1]);
            std::vector<char *> args;
            for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
            args.push_back(nullptr);
            execv(args[0], args.data());
            _exit(127);
        }
        close(out[1]);
        close(err[1]);
        out_ = out[0];
        err_ = err[0];
        fcntl(out_, F_SETFL, O_NONBLOCK);
        fcntl(err_, F_SETFL, O_NONBLOCK);
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        close(out_);
        close(err_);
    }

    // Reads what is available from both pipes, waiting up to timeout for something.
    void pump(milliseconds timeout) {
        pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
        if (poll(fds, 2, static_cast<int>(timeout.count())) <= 0) return;
        char buf[4096];
        ssize_t n;
        while ((n = read(out_, buf, sizeof buf)) > 0) out.append(buf, n);
        while ((n = read(err_, buf, sizeof buf)) > 0) err.append(buf, n);
    }
    // Waits until stdout holds `text` or timeout passes.
    bool wait_output(const std::string &text, milliseconds timeout) {
        auto deadline = Clock::now() + timeout;
        while (out.find(text) == std::string::npos) {
            if (Clock::now() >= deadline || exited()) {
                pump(milliseconds(0));
                return out.find(text) != std::string::npos;
            }
            pump(milliseconds(50));
        }
        return true;
    }
    bool exited() {
        if (pid_ <= 0) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return true;
        }
        return false;
    }
    // Waits for the exit (killing the child after timeout); its exit code.
    int wait_exit(milliseconds timeout) {
        auto deadline = Clock::now() + timeout;
        while (!exited()) {
            if (Clock::now() >= deadline) {
                kill(pid_, SIGKILL);
                waitpid(pid_, nullptr, 0);
                pid_ = -1;
                return -1;
            }
            pump(milliseconds(20));
        }
        pump(milliseconds(0));
        return exit_code_;
    }

    std::string out, err;

  private:
    pid_t pid_ = -1;
    int out_ = -1, err_ = -1;
    int exit_code_ = -1;
};

TEST(C99Program, ReceivesExpiredEventThroughTheCApi) {
    keywatch::RedisProcess redis;
    redis.start();
    const std::string key = "c99:key";
    Child child({KW_C99_SMOKE_PATH, redis.url(), key});
    ASSERT_TRUE(child.wait_output("ready\n", milliseconds(15000)))
        << "stdout: " << child.out << "\nstderr: " << child.err;

    ASSERT_EQ(redis.command({"SET", key, "v", "PX", "50"}), "OK");
    // Touch the key until the program has seen it expire (lazy expiry publishes at once).
    bool reported = false;
    auto deadline = Clock::now() + milliseconds(15000);
    while (!reported && Clock::now() < deadline && !child.exited()) {
        redis.command({"EXISTS", key});
        reported = child.wait_output("expired ", milliseconds(100));
    }
    int code = child.wait_exit(milliseconds(15000));
    EXPECT_EQ(code, 0) << "stdout: " << child.out << "\nstderr: " << child.err;
    EXPECT_NE(child.out.find("expired c99:key db=0\n"), std::string::npos)
        << "stdout: " << child.out << "\nstderr: " << child.err;
}

TEST(C99Program, ReportsAnUnreachableServerAndExitsNonZero) {
    int port = keywatch::RedisProcess::free_port();
    Child child({KW_C99_SMOKE_PATH, "redis://127.0.0.1:" + std::to_string(port), "k"});
    int code = child.wait_exit(milliseconds(20000));
    EXPECT_EQ(code, 1) << "stdout: " << child.out << "\nstderr: " << child.err;
    EXPECT_NE(child.err.find("kw_engine_start"), std::string::npos) << child.err;
    EXPECT_TRUE(child.err.find("KW_ERR_CONNECT") != std::string::npos ||
                child.err.find("KW_ERR_TIMEOUT") != std::string::npos)
        << child.err;
    EXPECT_EQ(child.out.find("ready"), std::string::npos);
}

}  // namespace
