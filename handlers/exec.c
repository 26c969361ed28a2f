/*
 * exec - a built-in handler plugin: runs a program (argv from the options, no shell) per
 * event, with the event on stdin as the JSON line `keywatch watch` prints, at most
 * `max_in_flight` at once. Exit 0: ack; 75 (EX_TEMPFAIL): retry; ended by SIGTERM, SIGINT,
 * SIGHUP or SIGKILL (stopped from outside: keywatch's own stop, a service manager, the OOM
 * killer): retry; anything else (another code, another signal such as SIGSEGV): reject with
 * the end of its stderr. A program still running after timeout_ms is killed with its
 * process group (its children too) and the event retried.
 *
 * No program runs on a worker: handle() holds the event (host->hold), hands a copy of its
 * JSON line to the instance's supervisor thread through a wake pipe and returns
 * KW_RESULT_PENDING. The supervisor starts the program, feeds its stdin and reads its
 * stderr with poll(), reaps it and completes the hold. The host keeps at most
 * max_in_flight events of the instance in flight (set_max_in_flight), so every program
 * handed over starts at once and the workers stay free for the other handlers. close()
 * stops the supervisor, which kills the programs still running (their groups), reaps them
 * and completes their holds with a retry.
 *
 * Options (docs/plugins.md):
 *   argv0, argv1, ...  required argv0 (a path, or a name looked up on PATH); then its
 *                      arguments, numbered without gaps
 *   max_in_flight      programs running at once (default 4); `concurrency` is its old name
 *   timeout_ms         per run (default 30000)
 * Counters: succeeded, retried, rejected, timed_out.
 * Thread-safety: handle runs concurrently on the workers; the jobs handed over are a list
 * under a mutex; the running programs belong to the supervisor thread alone.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "holding.h"
#include "keywatch_plugin.h"

#define MAX_ARGS 64
#define TAIL 300
#define REASON 1024
#define REAP_TICK_MS 10 /* how often a program that closed stderr is checked for its exit */

extern char **environ;

/* One event's program: handed over by handle(), then run by the supervisor. */
typedef struct job {
    struct job *next;
    kw_plugin_hold_t *hold;
    char *body; /* the event's JSON line */
    size_t len, sent;
    pid_t pid;           /* 0 until started */
    int in, err;         /* the program's stdin and stderr pipes; -1 once closed */
    long long deadline;  /* CLOCK_MONOTONIC ms */
    char tail[TAIL + 1]; /* the end of stderr */
    size_t tail_len;
} job_t;

typedef struct state {
    const kw_plugin_host_t *host;
    char *argv[MAX_ARGS + 1];
    long max_in_flight, timeout_ms;
    int wake[2]; /* handle() and close() write a byte; the supervisor polls the read end */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    job_t *incoming;    /* under mu: handed over, newest first */
    int stopping;       /* under mu */
    job_t *running;     /* the supervisor's alone */
    struct pollfd *fds; /* the supervisor's: 1 + 2 per running program */
    size_t fds_cap;
} state_t;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(state_t *s) {
    ssize_t w = write(s->wake[1], "", 1); /* full: a wake is pending anyway */
    (void)w;
}

static void free_job(job_t *j) {
    if (j->in >= 0) close(j->in);
    if (j->err >= 0) close(j->err);
    free(j->body);
    free(j);
}

/* Completes the job's hold and frees the job (the host frees the hold either way). */
static void complete(state_t *s, job_t *j, int result, const char *reason) {
    s->host->complete(j->hold, result, reason, -1);
    free_job(j);
}

/* ---- options ---------------------------------------------------------------------- */

static long number(const char *v, long dflt) {
    char *end;
    long x;
    if (!v) return dflt;
    x = strtol(v, &end, 10);
    return *v && !*end && x > 0 && x <= (long)INT32_MAX ? x : -1;
}

/* Reads the options into s; 0, or -1 with err saying which option is wrong. */
static int read_options(state_t *s, const kw_plugin_config_t *config, char *err, size_t n) {
    const kw_plugin_host_t *host = s->host;
    const char *max = host->config_get(config, "max_in_flight");
    const char *old = host->config_get(config, "concurrency");
    int i;
    for (i = 0; i < MAX_ARGS; i++) {
        char name[16];
        const char *v;
        snprintf(name, sizeof name, "argv%d", i);
        v = host->config_get(config, name);
        if (!v) break;
        s->argv[i] = (char *)malloc(strlen(v) + 1);
        if (!s->argv[i]) return snprintf(err, n, "out of memory"), -1;
        memcpy(s->argv[i], v, strlen(v) + 1);
    }
    s->max_in_flight = number(max ? max : old, 4);
    s->timeout_ms = number(host->config_get(config, "timeout_ms"), 30000);
    if (!s->argv[0] || !*s->argv[0])
        snprintf(err, n, "option \"argv0\" is required: the program to run (no shell)");
    else if (max && old)
        snprintf(err, n, "option \"concurrency\" is the old name of \"max_in_flight\": give one");
    else if (s->max_in_flight < 0)
        snprintf(err, n, "option \"%s\": use a number > 0", max ? "max_in_flight" : "concurrency");
    else if (s->timeout_ms < 0)
        snprintf(err, n, "option \"timeout_ms\": use a number of milliseconds > 0");
    else
        return 0;
    return -1;
}

/* ---- the supervisor: starting a program ---------------------------------------------- */

/* Starts j's program (its own process group, stdout to /dev/null); 0, or -1 with err. */
static int spawn(const state_t *s, job_t *j, char *err, size_t n) {
    int in[2], er[2], rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, pipe_set;
    /* Close-on-exec everywhere: no other program started meanwhile inherits an end. */
    if (pipe2(in, O_CLOEXEC) != 0) return snprintf(err, n, "pipe: %s", strerror(errno)), -1;
    if (pipe2(er, O_CLOEXEC) != 0) {
        close(in[0]), close(in[1]);
        return snprintf(err, n, "pipe: %s", strerror(errno)), -1;
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK), fcntl(er[0], F_SETFL, O_NONBLOCK);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, er[1], 2);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0); /* its own group: a timeout kills its children */
    /* Not the supervisor's mask (every signal blocked), and SIGPIPE at its default. */
    sigemptyset(&none);
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &pipe_set);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawnp(&j->pid, s->argv[0], &fa, &attr, s->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]), close(er[1]);
    if (rc != 0) {
        close(in[1]), close(er[0]);
        j->pid = 0;
        return snprintf(err, n, "cannot run %s: %s", s->argv[0], strerror(rc)), -1;
    }
    j->in = in[1], j->err = er[0];
    j->deadline = now_ms() + s->timeout_ms;
    return 0;
}

/* Starts the jobs handed over (newest first), oldest first. */
static void start_all(state_t *s, job_t *fresh) {
    job_t *oldest_first = NULL, *j;
    while (fresh) {
        j = fresh, fresh = fresh->next;
        j->next = oldest_first, oldest_first = j;
    }
    while ((j = oldest_first) != NULL) {
        char reason[REASON];
        oldest_first = j->next;
        if (spawn(s, j, reason, sizeof reason) != 0) {
            complete(s, j, KW_RESULT_RETRY, reason);
            continue;
        }
        j->next = s->running, s->running = j;
    }
}

/* ---- the supervisor: a program's exit --------------------------------------------- */

/* The signals that stop a program rather than say it failed on this event. */
static int stopped_from_outside(int sig) {
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
}

/* The result of a run (and its reason in err), counted. */
static int outcome(const state_t *s, const job_t *j, int status, int timed_out, char *err,
                   size_t n) {
    const kw_plugin_host_t *h = s->host;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (timed_out) {
        snprintf(err, n, "%s ran longer than %ldms: killed", s->argv[0], s->timeout_ms);
        h->counter_add(h, "timed_out", 1);
        return KW_RESULT_RETRY;
    }
    if (code < 0 && stopped_from_outside(WTERMSIG(status))) {
        snprintf(err, n, "%s was stopped by signal %d: %s", s->argv[0], WTERMSIG(status), j->tail);
        h->counter_add(h, "retried", 1);
        return KW_RESULT_RETRY;
    }
    if (code == 0) {
        h->counter_add(h, "succeeded", 1);
        return KW_RESULT_ACK;
    }
    if (code == 75) {
        snprintf(err, n, "%s exited 75 (EX_TEMPFAIL): %s", s->argv[0], j->tail);
        h->counter_add(h, "retried", 1);
        return KW_RESULT_RETRY;
    }
    if (code >= 0)
        snprintf(err, n, "%s exited %d: %s", s->argv[0], code, j->tail);
    else
        snprintf(err, n, "%s killed by signal %d: %s", s->argv[0], WTERMSIG(status), j->tail);
    h->counter_add(h, "rejected", 1);
    return KW_RESULT_REJECT;
}

/* The job is over when its program closed stderr and exited, or ran past its deadline
 * (then its group is killed). 1 when over: the hold is completed and the job freed. */
static int finish_if_over(state_t *s, job_t *j, long long now) {
    char reason[REASON] = "";
    int status = 0, timed_out = 0;
    if (j->err < 0 && waitpid(j->pid, &status, WNOHANG) != 0) {
        /* exited (or, -1, reaped by someone else: taken as exit 0, as ever) */
    } else if (now >= j->deadline) {
        kill(-j->pid, SIGKILL);
        kill(j->pid, SIGKILL); /* also when it left its group */
        waitpid(j->pid, &status, 0);
        timed_out = 1;
    } else {
        return 0;
    }
    complete(s, j, outcome(s, j, status, timed_out, reason, sizeof reason), reason);
    return 1;
}

static void reap(state_t *s) {
    long long now = now_ms();
    job_t **at = &s->running;
    while (*at) {
        job_t *j = *at, *next = j->next;
        if (finish_if_over(s, j, now))
            *at = next;
        else
            at = &j->next;
    }
}

/* ---- the supervisor: the pipes ---------------------------------------------------- */

static void keep_tail(job_t *r, const char *buf, size_t len) {
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

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* stdin: writes what the pipe takes; closed when all is sent or the program is gone. */
static void feed(job_t *j) {
    ssize_t w = write(j->in, j->body + j->sent, j->len - j->sent);
    if (w > 0) j->sent += (size_t)w;
    if ((w < 0 && errno != EAGAIN && errno != EINTR) || j->sent == j->len) close_fd(&j->in);
}

/* stderr: keeps its end. At its end (the program is ending), stdin is closed too. */
static void drain(job_t *j) {
    char buf[512];
    ssize_t got = read(j->err, buf, sizeof buf);
    if (got > 0) {
        keep_tail(j, buf, (size_t)got);
    } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close_fd(&j->err);
        close_fd(&j->in);
    }
}

/* How long poll may wait: until the nearest deadline, or a reap tick; -1: no program. */
static int poll_timeout(const state_t *s) {
    long long now = now_ms(), wait = -1;
    const job_t *j;
    for (j = s->running; j; j = j->next) {
        long long left = j->deadline > now ? j->deadline - now : 0;
        if (j->err < 0 && left > REAP_TICK_MS) left = REAP_TICK_MS;
        if (wait < 0 || left < wait) wait = left;
    }
    return (int)wait;
}

/* One poll over the wake pipe and every program's pipes, and what it found done. */
static void serve(state_t *s) {
    size_t n = 1, i;
    job_t *j;
    char buf[64];
    for (j = s->running; j; j = j->next) n += 2;
    if (n > s->fds_cap) {
        struct pollfd *more = (struct pollfd *)realloc(s->fds, n * sizeof *more);
        if (!more) { /* out of memory: wait a tick, the deadlines still hold */
            poll(NULL, 0, REAP_TICK_MS);
            return;
        }
        s->fds = more, s->fds_cap = n;
    }
    s->fds[0].fd = s->wake[0], s->fds[0].events = POLLIN;
    for (i = 1, j = s->running; j; j = j->next, i += 2) {
        s->fds[i].fd = j->in, s->fds[i].events = POLLOUT; /* a closed one (-1) is skipped */
        s->fds[i + 1].fd = j->err, s->fds[i + 1].events = POLLIN;
    }
    if (poll(s->fds, (nfds_t)n, poll_timeout(s)) <= 0) return;
    if (s->fds[0].revents)
        while (read(s->wake[0], buf, sizeof buf) > 0) {
        }
    for (i = 1, j = s->running; j; j = j->next, i += 2) {
        if (j->in >= 0 && s->fds[i].revents) feed(j);
        if (j->err >= 0 && s->fds[i + 1].revents) drain(j);
    }
}

/* At stop: kills what still runs (its group), reaps it, and gives every event back. */
static void give_back(state_t *s, job_t *list) {
    while (list) {
        job_t *j = list;
        list = j->next;
        if (j->pid > 0) {
            kill(-j->pid, SIGKILL);
            kill(j->pid, SIGKILL); /* also when it left its group */
            waitpid(j->pid, NULL, 0);
        }
        complete(s, j, KW_RESULT_RETRY, "the engine is stopping");
    }
}

/* The supervisor thread. Every signal is blocked in it (from init): a write to a program
 * that exited fails with EPIPE instead of raising SIGPIPE, and the process's signals go to
 * the threads that expect them. It reaps its programs by pid only and installs no SIGCHLD
 * handler: those belong to the host process. */
static void *supervise(void *p) {
    state_t *s = (state_t *)p;
    for (;;) {
        job_t *fresh;
        int stopping;
        pthread_mutex_lock(&s->mu);
        fresh = s->incoming, s->incoming = NULL;
        stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stopping) {
            give_back(s, fresh);
            break;
        }
        start_all(s, fresh);
        serve(s);
        reap(s);
    }
    give_back(s, s->running);
    s->running = NULL;
    return NULL;
}

/* ---- the plugin's entries --------------------------------------------------------- */

static void release(void *p) {
    state_t *s = (state_t *)p;
    int i;
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_mutex_unlock(&s->mu);
        wake(s);
        pthread_join(s->thread, NULL);
    }
    if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
    for (i = 0; s->argv[i]; i++) free(s->argv[i]);
    free(s->fds);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Starts the supervisor with every signal blocked (it inherits the mask); 0 or errno. */
static int start_supervisor(state_t *s) {
    sigset_t all, old;
    int rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->thread, NULL, supervise, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->thread_started = rc == 0;
    return rc;
}

static int init(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t n) {
    state_t *s = (state_t *)calloc(1, sizeof *s);
    int rc = KW_ERR_BAD_VALUE;
    if (!s) return KW_ERR_NOMEM;
    s->host = host;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    if (read_options(s, config, err, n) != 0) {
        /* refused */
    } else if ((rc = kw_host_holds(host, "exec", err, n)) != KW_OK) {
        /* refused */
    } else if ((rc = host->set_max_in_flight(host, (uint32_t)s->max_in_flight)) != KW_OK) {
        snprintf(err, n, "set_max_in_flight(%ld) failed", s->max_in_flight);
    } else if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, n, "pipe: %s", strerror(errno));
        rc = KW_ERR_INTERNAL;
    } else if ((rc = start_supervisor(s)) != 0) {
        snprintf(err, n, "cannot start the supervisor thread: %s", strerror(rc));
        rc = KW_ERR_INTERNAL;
    } else {
        *state = s;
        return KW_OK;
    }
    release(s);
    return rc;
}

static int handle(void *p, const kw_plugin_event_t *ev, char *err, size_t n) {
    state_t *s = (state_t *)p;
    const kw_plugin_host_t *h = s->host;
    size_t len = 0;
    const char *body = h->event_json(ev, &len);
    job_t *j = (job_t *)calloc(1, sizeof *j);
    if (!body || !j || !(j->body = (char *)malloc(len ? len : 1))) {
        free(j);
        return snprintf(err, n, "out of memory"), KW_RESULT_RETRY;
    }
    memcpy(j->body, body, len);
    j->len = len;
    j->in = j->err = -1;
    j->hold = h->hold(ev);
    if (!j->hold) {
        free_job(j);
        return snprintf(err, n, "the engine is stopping"), KW_RESULT_RETRY;
    }
    pthread_mutex_lock(&s->mu);
    j->next = s->incoming, s->incoming = j;
    pthread_mutex_unlock(&s->mu);
    wake(s);
    return KW_RESULT_PENDING;
}

static const kw_plugin_descriptor_t descriptor = {KW_PLUGIN_ABI_VERSION,
                                                  sizeof(kw_plugin_descriptor_t),
                                                  "exec",
                                                  "2.0.0",
                                                  0,
                                                  init,
                                                  handle,
                                                  release,
                                                  NULL};

KW_HANDLER_DEFINE(descriptor)
