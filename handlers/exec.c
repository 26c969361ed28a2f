/*
 * exec - a built-in handler plugin: runs a program (argv from the options, no shell) per
 * event, with the event on stdin as the JSON line `keywatch watch` prints, at most
 * `concurrency` at once. Exit 0: ack; 75 (EX_TEMPFAIL): retry; ended by SIGTERM, SIGINT,
 * SIGHUP or SIGKILL (stopped from outside: keywatch's own stop, a service manager, the OOM
 * killer): retry; anything else (another code, another signal such as SIGSEGV): reject with
 * the end of its stderr. A program still running after timeout_ms is killed with its
 * process group (its children too) and the event retried.
 *
 * Options (docs/plugins.md):
 *   argv0, argv1, ...  required argv0 (a path, or a name looked up on PATH); then its
 *                      arguments, numbered without gaps
 *   concurrency        programs running at once (default 4)
 *   timeout_ms         per run (default 30000)
 * Counters: succeeded, retried, rejected, timed_out.
 * Thread-safety: handle runs concurrently; the running count is guarded by a mutex.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keywatch_plugin.h"

#define MAX_ARGS 64
#define TAIL 300

extern char **environ;

typedef struct state {
    const kw_plugin_host_t *host;
    char *argv[MAX_ARGS + 1];
    long concurrency, timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long running;
} state_t;

typedef struct run {
    char tail[TAIL + 1]; /* the end of stderr */
    size_t tail_len;
    int timed_out;
    int status; /* waitpid status */
} run_t;

static void release(void *p) {
    state_t *s = (state_t *)p;
    int i;
    if (!s) return;
    for (i = 0; s->argv[i]; i++) free(s->argv[i]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static long number(const char *v, long dflt) {
    char *end;
    long x;
    if (!v) return dflt;
    x = strtol(v, &end, 10);
    return *v && !*end && x > 0 ? x : -1;
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s = (state_t *)calloc(1, sizeof *s);
    int i;
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    for (i = 0; i < MAX_ARGS; i++) {
        char name[16];
        const char *v;
        snprintf(name, sizeof name, "argv%d", i);
        v = host->config_get(config, name);
        if (!v) break;
        s->argv[i] = (char *)malloc(strlen(v) + 1);
        if (!s->argv[i]) break;
        memcpy(s->argv[i], v, strlen(v) + 1);
    }
    s->concurrency = number(host->config_get(config, "concurrency"), 4);
    s->timeout_ms = number(host->config_get(config, "timeout_ms"), 30000);
    if (!s->argv[0] || !*s->argv[0])
        snprintf(err, n, "option \"argv0\" is required: the program to run (no shell)");
    else if (s->concurrency < 0)
        snprintf(err, n, "option \"concurrency\": use a number > 0");
    else if (s->timeout_ms < 0)
        snprintf(err, n, "option \"timeout_ms\": use a number of milliseconds > 0");
    else {
        *state = s;
        return KW_OK;
    }
    release(s);
    return KW_ERR_BAD_VALUE;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void keep_tail(run_t *r, const char *buf, size_t len) {
    if (len >= TAIL) {
        memcpy(r->tail, buf + len - TAIL, TAIL);
        r->tail_len = TAIL;
    } else {
        size_t keep = r->tail_len + len > TAIL ? TAIL - len : r->tail_len;
        memmove(r->tail, r->tail + r->tail_len - keep, keep);
        memcpy(r->tail + keep, buf, len);
        r->tail_len = keep + len;
    }
    r->tail[r->tail_len] = '\0';
}

/* Feeds stdin and drains stderr until the program closes stderr or the deadline passes. */
static void talk(int in, int errfd, const char *body, size_t len, long long deadline, run_t *r) {
    size_t sent = 0;
    while (errfd >= 0) {
        struct pollfd fds[2];
        int nfds = 0, left = (int)(deadline - now_ms());
        char buf[512];
        if (left <= 0) {
            r->timed_out = 1;
            break;
        }
        fds[nfds].fd = errfd, fds[nfds].events = POLLIN, nfds++;
        if (in >= 0) fds[nfds].fd = in, fds[nfds].events = POLLOUT, nfds++;
        if (poll(fds, (nfds_t)nfds, left) < 0 && errno != EINTR) break;
        if (in >= 0 && fds[1].revents) {
            ssize_t w = fds[1].revents & POLLOUT ? write(in, body + sent, len - sent) : -1;
            if (w > 0) sent += (size_t)w;
            if (w < 0 || sent == len) {
                close(in);
                in = -1;
            }
        }
        if (fds[0].revents) {
            ssize_t got = read(errfd, buf, sizeof buf);
            if (got > 0)
                keep_tail(r, buf, (size_t)got);
            else if (got == 0 || errno != EINTR)
                break;
        }
    }
    if (in >= 0) close(in);
}

/* Runs the program; 0, or -1 when it could not be started (err says why). */
static int run_program(const state_t *s, const char *body, size_t len, run_t *r, char *err,
                       size_t n) {
    int in[2], er[2], rc;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    long long deadline = now_ms() + s->timeout_ms;
    if (pipe(in) != 0) return snprintf(err, n, "pipe: %s", strerror(errno)), -1;
    if (pipe(er) != 0) {
        close(in[0]), close(in[1]);
        return snprintf(err, n, "pipe: %s", strerror(errno)), -1;
    }
    fcntl(in[1], F_SETFD, FD_CLOEXEC), fcntl(er[0], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, er[1], 2);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0); /* its own group: a timeout kills its children */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    rc = posix_spawnp(&pid, s->argv[0], &fa, &attr, s->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]), close(er[1]);
    if (rc != 0) {
        close(in[1]), close(er[0]);
        return snprintf(err, n, "cannot run %s: %s", s->argv[0], strerror(rc)), -1;
    }
    talk(in[1], er[0], body, len, deadline, r);
    close(er[0]);
    while (!r->timed_out && waitpid(pid, &r->status, WNOHANG) == 0) {
        struct timespec tick = {0, 5000000};
        if (now_ms() >= deadline)
            r->timed_out = 1;
        else
            nanosleep(&tick, NULL);
    }
    if (r->timed_out) {
        kill(-pid, SIGKILL);
        waitpid(pid, &r->status, 0);
    }
    return 0;
}

/* The signals that stop a program rather than say it failed on this event. */
static int stopped_from_outside(int sig) {
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    state_t *s = (state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t len = 0;
    const char *body = h->event_json(ev, &len);
    run_t r;
    int started, code;
    sigset_t pipe_set, old;
    struct timespec zero = {0, 0};
    memset(&r, 0, sizeof r);
    pthread_mutex_lock(&s->mu);
    while (s->running >= s->concurrency) pthread_cond_wait(&s->cv, &s->mu);
    s->running++;
    pthread_mutex_unlock(&s->mu);
    /* A program that exits without reading stdin must not SIGPIPE the engine. */
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    started = body ? run_program(s, body, len, &r, err, n) : -1;
    while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_lock(&s->mu);
    s->running--;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (started != 0) return KW_RESULT_RETRY;
    if (r.timed_out) {
        snprintf(err, n, "%s ran longer than %ldms: killed", s->argv[0], s->timeout_ms);
        h->counter_add(h, "timed_out", 1);
        return KW_RESULT_RETRY;
    }
    code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
    if (code < 0 && stopped_from_outside(WTERMSIG(r.status))) {
        snprintf(err, n, "%s was stopped by signal %d: %s", s->argv[0], WTERMSIG(r.status), r.tail);
        h->counter_add(h, "retried", 1);
        return KW_RESULT_RETRY;
    }
    if (code == 0) {
        h->counter_add(h, "succeeded", 1);
        return KW_RESULT_ACK;
    }
    if (code == 75) {
        snprintf(err, n, "%s exited 75 (EX_TEMPFAIL): %s", s->argv[0], r.tail);
        h->counter_add(h, "retried", 1);
        return KW_RESULT_RETRY;
    }
    if (code >= 0)
        snprintf(err, n, "%s exited %d: %s", s->argv[0], code, r.tail);
    else
        snprintf(err, n, "%s killed by signal %d: %s", s->argv[0], WTERMSIG(r.status), r.tail);
    h->counter_add(h, "rejected", 1);
    return KW_RESULT_REJECT;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "exec",
                                                  "1.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
