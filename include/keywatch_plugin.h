/*
 * keywatch_plugin.h - the handler plugin ABI (C99). A plugin is a shared object that
 * includes this header (and keywatch_types.h, installed beside it), links nothing of
 * keywatch, and exports one entry function made by KW_HANDLER_DEFINE. keywatch loads it
 * with dlopen(RTLD_NOW | RTLD_LOCAL) and calls it through the descriptor it returns; the
 * plugin calls keywatch back only through the host table handed to init.
 *
 * The rules (docs/plugins.md, "Writing a handler plugin"):
 *  - Both tables begin with a size: the descriptor with its ABI version and its own size,
 *    the host table with its own size. Members are only ever appended; each side reads a
 *    member only when the other side's size covers it (KW_PLUGIN_HAS). Nothing is ever
 *    renumbered, removed or retyped while KW_PLUGIN_ABI_VERSION stays the same.
 *  - Threading: init and close run on the thread that loads and frees the engine; handle
 *    and handle_batch run on worker threads, concurrently unless the descriptor sets
 *    KW_PLUGIN_SERIAL (which serialises both together).
 *    Every host function may be called from any thread at any time between init and the
 *    return of close, unless its comment says otherwise.
 *  - No C++ exception may leave the plugin: KW_HANDLER_DEFINE catches them when the plugin
 *    is compiled as C++.
 */
#ifndef KEYWATCH_PLUGIN_H
#define KEYWATCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "keywatch_types.h"

#ifdef __cplusplus
#include <cstdio>
#include <exception>
extern "C" {
#endif

/* The ABI version this header describes. A host loads only plugins built with its own. */
#define KW_PLUGIN_ABI_VERSION 1
/* The one symbol a plugin exports (KW_HANDLER_DEFINE makes it). */
#define KW_PLUGIN_ENTRY_SYMBOL "kw_handler_entry"

/* True when a table of `size` bytes holds `member` of `type`. */
#define KW_PLUGIN_HAS(size, type, member) \
    ((size_t)(size) >= offsetof(type, member) + sizeof(((type *)0)->member))

/* Descriptor flags. */
#define KW_PLUGIN_SERIAL 0x1u /* handle calls must not overlap: the host runs one at a time */

typedef struct kw_plugin_host kw_plugin_host_t;
/* The event being handled. Valid during handle() only: copy what must outlive the call. */
typedef struct kw_plugin_event kw_plugin_event_t;
/* The instance's configuration (name/value strings), passed to init(). */
typedef struct kw_plugin_config kw_plugin_config_t;
/* An event taken over by host->hold; completed exactly once by host->complete. */
typedef struct kw_plugin_hold kw_plugin_hold_t;

/* handle_batch's result slots come pre-filled with this; an entry still holding it when
 * the call returns is retried (see handle_batch). Not a kw_result. */
#define KW_PLUGIN_NO_RESULT (-1)

/* One command for host->redis_pipeline. Arrays of it are passed, so it never grows: a
 * future need gets a new host function. */
typedef struct kw_redis_command {
    int argc;
    const char *const *argv;
    const size_t *argvlen; /* NULL: every argv[i] is a C string */
} kw_redis_command_t;

/* ---- Redis replies ---------------------------------------------------------------- */
typedef enum kw_reply_type {
    KW_REPLY_NIL = 0,
    KW_REPLY_STRING = 1,  /* bulk string: str/len, binary safe (also NUL-terminated) */
    KW_REPLY_INTEGER = 2, /* integer */
    KW_REPLY_ARRAY = 3,   /* elements/element */
    KW_REPLY_STATUS = 4,  /* simple string ("OK"): str/len */
    KW_REPLY_ERROR = 5    /* the command's own error ("WRONGTYPE ..."): str/len */
} kw_reply_type;

/* One node of a reply tree, owned by the host: free the root with host->reply_free. */
typedef struct kw_reply {
    int type;                       /* kw_reply_type */
    int64_t integer;                /* KW_REPLY_INTEGER */
    const char *str;                /* STRING, STATUS, ERROR; NULL otherwise */
    size_t len;                     /* bytes in str */
    size_t elements;                /* KW_REPLY_ARRAY: number of elements */
    const struct kw_reply *element; /* KW_REPLY_ARRAY: `elements` nodes, contiguous */
} kw_reply_t;

/* ---- The host table: keywatch's side, passed to init, valid until close returns ---- */
struct kw_plugin_host {
    uint32_t size;                /* sizeof the host's table: test members with KW_PLUGIN_HAS */
    uint32_t abi_version;         /* KW_PLUGIN_ABI_VERSION of the host */
    const char *keywatch_version; /* the host's KW_VERSION_STRING (keywatch_types.h) */
    const char *instance;         /* this instance's name (several may share one plugin) */

    /* A log line through the engine's log callback, prefixed with the instance name. */
    void (*log)(const kw_plugin_host_t *host, int level /* kw_log_level */, const char *message);

    /* Configuration: the value of `name`, or NULL when not given; the string stays valid
     * until close returns. Every option given but never asked for during init makes the
     * host refuse the instance ("unknown option"), so ask for each name you accept. */
    const char *(*config_get)(const kw_plugin_config_t *config, const char *name);

    /* Adds delta to the instance's counter `name`, readable as the engine statistic
     * "plugin.<instance>.<name>". */
    void (*counter_add)(const kw_plugin_host_t *host, const char *name, int64_t delta);

    /* Runs one Redis command (any command, scripts included: binary-safe argv) on the node
     * that serves its first key, following cluster redirections; the plugin never sees
     * nodes. The first key is argv[1], or for EVAL/EVALSHA/FCALL (and their _RO forms)
     * argv[3] when numkeys > 0; a command without keys goes to any master. Blocking; safe
     * from any thread concurrently. Returns KW_OK with *reply set (possibly of type
     * KW_REPLY_ERROR: the command's own error), or a kw_status with *reply NULL and err
     * filled (no connection, cluster down, ...): usually a reason to return
     * KW_RESULT_RETRY. */
    int (*redis)(const kw_plugin_host_t *host, int argc, const char *const *argv,
                 const size_t *argvlen, kw_reply_t **reply, char *err, size_t err_size);
    /* Frees a reply tree returned by redis (NULL is fine). */
    void (*reply_free)(kw_reply_t *reply);

    /* Event accessors, valid on the event passed to handle() during the call. */
    const char *(*event_name)(const kw_plugin_event_t *ev);               /* "expired", ... */
    const void *(*event_key)(const kw_plugin_event_t *ev, size_t *len);   /* binary */
    const void *(*event_value)(const kw_plugin_event_t *ev, size_t *len); /* NULL: none */
    const char *(*event_id)(const kw_plugin_event_t *ev);      /* stable across redeliveries */
    const char *(*event_queue)(const kw_plugin_event_t *ev);   /* "" for live events */
    int64_t (*event_deadline_ms)(const kw_plugin_event_t *ev); /* 0: unknown */
    int64_t (*event_ts_ms)(const kw_plugin_event_t *ev);       /* received, ms since epoch */
    int (*event_attempt)(const kw_plugin_event_t *ev);         /* 1 on first delivery */
    int (*event_db)(const kw_plugin_event_t *ev);
    int (*event_source)(const kw_plugin_event_t *ev); /* kw_source */
    /* The event as the one JSON line `keywatch watch` prints (without the newline). */
    const char *(*event_json)(const kw_plugin_event_t *ev, size_t *len);
    /* The same fields one by one, in that order and encoding (key or key_b64, ...;
     * numbers in decimal): KW_OK, or KW_ERR_NOT_FOUND past the last field. */
    int (*event_field)(const kw_plugin_event_t *ev, size_t index, const char **name,
                       const char **value, size_t *value_len);

    /* Deferred completion: takes the event over so that handle() can return
     * KW_RESULT_PENDING and complete it later from any thread. NULL when this host cannot
     * hold events (then return a final result). */
    kw_plugin_hold_t *(*hold)(const kw_plugin_event_t *ev);
    /* Completes a held event once (ack, retry after retry_delay_ms, reject with reason) and
     * frees the hold (also when it returns an error). Any thread. The reason is recorded as
     * "<instance>: <reason>", like handle()'s err. A synchronous handle() that wants a retry
     * after a delay of its choosing holds, completes at once with KW_RESULT_RETRY and the
     * delay, and returns KW_RESULT_PENDING (docs/plugins.md). */
    int (*complete)(kw_plugin_hold_t *hold, int result, const char *reason, int64_t retry_delay_ms);

    /* ---- Since keywatch 0.3.0. A host whose table has these members also calls
     * handle_batch; a host that calls handle_batch has them all. ---- */

    /* The reason for ev's KW_RESULT_RETRY or KW_RESULT_REJECT (copied; the last call for
     * an event wins), recorded as "<instance>: <reason>" like handle()'s err, which it
     * takes precedence over. Only on an event of a handle or handle_batch call in
     * progress, from the thread of that call. Ignored for ACK and PENDING. */
    void (*event_set_error)(const kw_plugin_event_t *ev, const char *reason);

    /* Runs n commands (0 <= n <= 65536) with one wait. Each goes to the master of its own
     * first key's slot (the rule of `redis`: argv[1], or argv[3] for EVAL/EVALSHA/FCALL
     * and their _RO forms when numkeys > 0; keyless: any master). The commands for one
     * node are sent back to back on one connection, all nodes at once.
     * For each i: statuses[i] == KW_OK and replies[i] is the reply (possibly
     * KW_REPLY_ERROR, the command's own error: free it with reply_free), or
     * statuses[i] is a kw_status and replies[i] is NULL:
     *   KW_ERR_CONNECT      no connection to its node, or the connection was lost after
     *                       the command was sent: it may have run. It is never sent twice.
     *   KW_ERR_REDIS        no master serves the slot, the cluster refuses commands, the
     *                       command was redirected too often (resharding), or the node
     *                       was still loading after the retries
     *   KW_ERR_TIMEOUT      no reply within redis.command_timeout
     *   KW_ERR_AUTH         the node refuses the password
     *   KW_ERR_NOMEM, KW_ERR_INTERNAL  out of memory, an internal failure
     *   KW_ERR_INVALID_ARG  argc <= 0, argv or one of its arguments NULL (nothing sent for
     *                       this command)
     * A command answered MOVED, ASK, TRYAGAIN, CLUSTERDOWN or LOADING did not run: it is
     * sent again where the cluster says (the others keep their replies). Order: the commands
     * for one node start in the order given; a redirected command runs after the others.
     * Commands that must run together belong in one script.
     * Returns KW_OK when every status is KW_OK; else the first failure's status, with err
     * naming it and how many commands failed. Blocking, like `redis`; any thread; safe
     * concurrently. */
    int (*redis_pipeline)(const kw_plugin_host_t *host, size_t n,
                          const kw_redis_command_t *commands, kw_reply_t **replies, int *statuses,
                          char *err, size_t err_size);

    /* In init only: at most n events of this instance in flight at once, counting those in
     * a handle or handle_batch call and those held and not yet completed (or freed). While
     * the instance is at n, the host holds back its next events: the worker that has them
     * waits while other workers go on, and the events wait for room. When the engine stops
     * while they wait, they go back to their queues (the attempt is not counted).
     * handle_batch never gets more events than the room left. 0: no limit (the default).
     * Returns KW_OK, or KW_ERR_STATE outside init. */
    int (*set_max_in_flight)(const kw_plugin_host_t *host, uint32_t n);
    /* New members are appended here. */
};

/* ---- The descriptor: the plugin's side, static, returned by the entry function ------- */
typedef struct kw_plugin_descriptor {
    uint32_t abi_version; /* KW_PLUGIN_ABI_VERSION: never moves */
    uint32_t size;        /* sizeof(kw_plugin_descriptor_t) as the plugin was built: never moves */
    const char *name;     /* the plugin's name, e.g. "session_index" */
    const char *version;  /* the plugin's own version, e.g. "1.0.0" */
    uint64_t flags;       /* KW_PLUGIN_SERIAL, ... */
    /* Optional (NULL: no state). Reads its options with host->config_get, sets *state.
     * Returns KW_OK, or a kw_status with a message for the operator in err. */
    int (*init)(const kw_plugin_host_t *host, const kw_plugin_config_t *config, void **state,
                char *err, size_t err_size);
    /* Required. Returns KW_RESULT_ACK, _RETRY, _REJECT (with the reason in err), or
     * _PENDING after host->hold. Worker threads. */
    int (*handle)(void *state, const kw_plugin_event_t *ev, char *err, size_t err_size);
    /* Optional. Releases state; no handle call runs or follows. */
    void (*close)(void *state);
    /* Optional, since keywatch 0.3.0. NULL: the host calls handle once per event. An older
     * host never calls it, so handle must stay correct on its own (a plugin that works only
     * batched refuses an older host in init: !KW_PLUGIN_HAS(host->size, kw_plugin_host_t,
     * redis_pipeline)).
     * Handles events[0..n-1] (n >= 1; how many depends on the load and on
     * set_max_in_flight: size buffers from n). For each event, write its kw_result to
     * results[i] (pre-filled with KW_PLUGIN_NO_RESULT): ACK, RETRY or REJECT (the reason
     * through host->event_set_error, else err), or PENDING after host->hold(events[i]).
     * Results are per event: one event's RETRY retries that event alone.
     * Returns KW_OK, or a kw_status when the batch failed as a whole: then every event
     * still at KW_PLUGIN_NO_RESULT is retried with err as its reason. An event left at
     * KW_PLUGIN_NO_RESULT after KW_OK is retried as a plugin error; any other value that
     * is not a kw_result is rejected, as from handle.
     * The events, the array and results are valid during the call only. Worker threads;
     * concurrently unless KW_PLUGIN_SERIAL, which serialises handle and handle_batch
     * together. */
    int (*handle_batch)(void *state, const kw_plugin_event_t *const *events, size_t n, int *results,
                        char *err, size_t err_size);
    /* New members are appended here. */
} kw_plugin_descriptor_t;

typedef const kw_plugin_descriptor_t *(*kw_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KW_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KW_PLUGIN_EXPORT
#endif

/* KW_HANDLER_DEFINE(descriptor): exports the entry function returning &descriptor. In C++,
 * the callbacks are wrapped so that no exception leaves the plugin: one from init fails it
 * with the exception's text, one from handle means KW_RESULT_RETRY, one from handle_batch retries
 * the events it had not given a result. Use once per plugin. */
#ifndef __cplusplus
#define KW_HANDLER_DEFINE(descriptor)                                       \
    KW_PLUGIN_EXPORT const kw_plugin_descriptor_t *kw_handler_entry(void);  \
    KW_PLUGIN_EXPORT const kw_plugin_descriptor_t *kw_handler_entry(void) { \
        return &(descriptor);                                               \
    }
#else
#define KW_HANDLER_DEFINE(descriptor)                                                     \
    namespace {                                                                           \
    struct kw_plugin_guard_ {                                                             \
        static void say(char *err, size_t n, const char *what) {                          \
            if (err && n) std::snprintf(err, n, "%s", what);                              \
        }                                                                                 \
        static int init(const kw_plugin_host_t *h, const kw_plugin_config_t *c, void **s, \
                        char *err, size_t n) {                                            \
            try {                                                                         \
                return (descriptor).init(h, c, s, err, n);                                \
            } catch (const std::exception &e) {                                           \
                say(err, n, e.what());                                                    \
            } catch (...) {                                                               \
                say(err, n, "init threw an exception");                                   \
            }                                                                             \
            return KW_ERR_INTERNAL;                                                       \
        }                                                                                 \
        static int handle(void *s, const kw_plugin_event_t *ev, char *err, size_t n) {    \
            try {                                                                         \
                return (descriptor).handle(s, ev, err, n);                                \
            } catch (const std::exception &e) {                                           \
                say(err, n, e.what());                                                    \
            } catch (...) {                                                               \
                say(err, n, "handle threw an exception");                                 \
            }                                                                             \
            return KW_RESULT_RETRY;                                                       \
        }                                                                                 \
        static int handle_batch(void *s, const kw_plugin_event_t *const *ev, size_t n,    \
                                int *results, char *err, size_t en) {                     \
            try {                                                                         \
                return (descriptor).handle_batch(s, ev, n, results, err, en);             \
            } catch (const std::exception &e) {                                           \
                say(err, en, e.what());                                                   \
            } catch (...) {                                                               \
                say(err, en, "handle_batch threw an exception");                          \
            }                                                                             \
            return KW_ERR_INTERNAL; /* results not yet written: retried with err */       \
        }                                                                                 \
        static void close(void *s) {                                                      \
            try {                                                                         \
                (descriptor).close(s);                                                    \
            } catch (...) {                                                               \
            }                                                                             \
        }                                                                                 \
        static kw_plugin_descriptor_t make() {                                            \
            kw_plugin_descriptor_t d = (descriptor);                                      \
            if (d.init) d.init = &init;                                                   \
            if (d.handle) d.handle = &handle;                                             \
            if (d.close) d.close = &close;                                                \
            if (d.handle_batch) d.handle_batch = &handle_batch;                           \
            return d;                                                                     \
        }                                                                                 \
    };                                                                                    \
    }                                                                                     \
    extern "C" KW_PLUGIN_EXPORT const kw_plugin_descriptor_t *kw_handler_entry(void) {    \
        static const kw_plugin_descriptor_t d = kw_plugin_guard_::make();                 \
        return &d;                                                                        \
    }
#endif

#endif /* KEYWATCH_PLUGIN_H */
