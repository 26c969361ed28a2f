// SigpipeGuard: while alive, SIGPIPE is blocked for the calling thread, so that a write to a
// connection whose peer is gone (OpenSSL writes a TLS socket with write(), libevent a plain
// one with writev(), neither with MSG_NOSIGNAL) fails with EPIPE and is handled as a lost
// connection, instead of killing the host process. A SIGPIPE raised meanwhile is taken off
// the pending set before the thread's mask is restored; the application's own handling of
// SIGPIPE is never changed. Held around every event loop that writes to Redis (the engine's
// loop thread, the blocking client's calls). Header-only; per thread: thread-safe.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace keywatch {

class SigpipeGuard {
  public:
    SigpipeGuard() {
        sigset_t pipe = only_sigpipe();
        pthread_sigmask(SIG_BLOCK, &pipe, &old_);
        sigset_t pending;
        sigemptyset(&pending);
        was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    }
    ~SigpipeGuard() {
        sigset_t pipe = only_sigpipe();
        const timespec now{0, 0};
        if (!was_pending_)
            while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
            }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeGuard(const SigpipeGuard &) = delete;
    SigpipeGuard &operator=(const SigpipeGuard &) = delete;

  private:
    static sigset_t only_sigpipe() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        return s;
    }
    sigset_t old_;
    bool was_pending_ = false;
};

}  // namespace keywatch
