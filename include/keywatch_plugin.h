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
 *    runs on worker threads, concurrently unless the descriptor sets KW_PLUGIN_SERIAL.
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
 * with the exception's text, one from handle means KW_RESULT_RETRY. Use once per plugin. */
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
