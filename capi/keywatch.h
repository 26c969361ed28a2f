/*
 * keywatch.h - reliable Redis key expiry: the stable C API (C99).
 *
 * This header is the whole contract. What is not declared here is not API.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 *  - Functions return an int status: KW_OK (0) on success, a negative KW_ERR_* code on
 *    failure. kw_strerror() gives a short text for a code, kw_err_name() its name.
 *  - Functions that can fail for a reason worth explaining either take an errstr buffer
 *    (filled with a NUL-terminated message naming what was wrong and what to do) or
 *    record the message on the handle (kw_engine_last_error()).
 *  - Keys and values are byte strings given as (pointer, length): they may hold NUL bytes.
 *  - Every handle has a _new and a _free; freeing NULL is a no-op.
 *  - No C++ exception ever leaves a function of this API.
 *  - If a call that takes a callback fails, the callback is never invoked.
 *  - Thread-safety is stated per function: "any thread" means it may be called concurrently
 *    with any other function on the same handle; "not concurrently" means the caller
 *    serialises calls on that handle.
 */
#ifndef KEYWATCH_H
#define KEYWATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KW_BUILDING_LIBRARY)
#define KW_API __attribute__((visibility("default")))
#else
#define KW_API
#endif

/* ---- Version ---------------------------------------------------------------------- */

/* Same major version = same ABI. The SONAME carries the major version. */
#define KW_VERSION_MAJOR 0
#define KW_VERSION_MINOR 1
#define KW_VERSION_PATCH 0
#define KW_VERSION_STRING "0.1.0"
/* 0xMMmmpp: compare against kw_version() at run time. */
#define KW_VERSION ((KW_VERSION_MAJOR << 16) | (KW_VERSION_MINOR << 8) | KW_VERSION_PATCH)

/* Version of the library actually loaded (KW_VERSION layout). Any thread. */
KW_API int kw_version(void);
/* "MAJOR.MINOR.PATCH" of the library actually loaded; static storage. Any thread. */
KW_API const char *kw_version_string(void);

/* ---- Status codes ----------------------------------------------------------------- */

/* One table generates the enum, kw_strerror() and kw_err_name(). Codes are never reused. */
#define KW_STATUS_TABLE(X)                                           \
    X(KW_OK, 0, "success")                                           \
    X(KW_ERR_INVALID_ARG, -1, "invalid argument")                    \
    X(KW_ERR_UNKNOWN_CONF, -2, "unknown configuration name")         \
    X(KW_ERR_BAD_VALUE, -3, "bad configuration value")               \
    X(KW_ERR_URL, -4, "malformed Redis URL")                         \
    X(KW_ERR_CONNECT, -5, "cannot connect to Redis")                 \
    X(KW_ERR_AUTH, -6, "Redis authentication failed")                \
    X(KW_ERR_REDIS, -7, "Redis replied with an error")               \
    X(KW_ERR_TIMEOUT, -8, "timed out")                               \
    X(KW_ERR_STATE, -9, "not allowed in the handle's current state") \
    X(KW_ERR_NOMEM, -10, "out of memory")                            \
    X(KW_ERR_INTERNAL, -11, "internal error")

typedef enum kw_status {
#define KW_STATUS_ENUM_(name, code, text) name = code,
    KW_STATUS_TABLE(KW_STATUS_ENUM_)
#undef KW_STATUS_ENUM_
} kw_status;

/* Short English text for a status code ("unknown status" for codes not in the table);
 * static storage. Any thread. */
KW_API const char *kw_strerror(int status);
/* The code's name, e.g. "KW_ERR_URL" ("KW_ERR_UNKNOWN" if not in the table). Any thread. */
KW_API const char *kw_err_name(int status);

/* ---- Configuration ---------------------------------------------------------------- */

/*
 * Configuration is a set of string name/value pairs, so that new options never change the
 * ABI. Durations accept "500ms", "30s", "5m", "1h" or a plain number of milliseconds;
 * booleans accept true/false, yes/no, on/off, 1/0.
 *
 *  redis.url              redis://[user:password@]host:port[/db] or unix:///path/to.sock
 *                         [?db=N]   (default redis://127.0.0.1:6379)
 *  redis.user             ACL user name (overrides the URL's)
 *  redis.password         password (overrides the URL's)
 *  redis.connect_timeout  duration, connect + AUTH + first subscribe (default 5s)
 *  notify.enable          bool: if notify-keyspace-events lacks what the handlers need,
 *                         add it with CONFIG SET (default false: only warn)
 *  workers                number of handler threads, 1..256 (default 4)
 *  dispatch.queue_size    events waiting for a worker before live events are dropped and
 *                         counted, 16..16777216 (default 65536)
 *  reconnect.min          first reconnect delay (default 100ms)
 *  reconnect.max          cap of the exponential reconnect delay (default 10s)
 *  health.interval        subscriber heartbeat period (default 1s)
 *  health.timeout         heartbeat silence after which the subscriber is reconnected
 *                         (default 5s)
 *  stop.timeout           how long kw_engine_stop() lets in-flight handlers finish
 *                         (default 10s)
 */
typedef struct kw_conf_s kw_conf_t;

/* A configuration holding every default. NULL only when out of memory. Any thread. */
KW_API kw_conf_t *kw_conf_new(void);
/* Independent copy. Not concurrently with kw_conf_set on the same conf. */
KW_API kw_conf_t *kw_conf_dup(const kw_conf_t *conf);
KW_API void kw_conf_free(kw_conf_t *conf);
/* Set one option. KW_ERR_UNKNOWN_CONF for a name not listed above, KW_ERR_BAD_VALUE or
 * KW_ERR_URL for a value that does not parse; errstr (may be NULL) says which and how to
 * fix it. On failure the conf is unchanged. Not concurrently on the same conf. */
KW_API int kw_conf_set(kw_conf_t *conf, const char *name, const char *value, char *errstr,
                       size_t errstr_size);
/* Current value of an option as text, copied into buf (NUL-terminated, truncated to fit).
 * Passwords read back as "***". Not concurrently with kw_conf_set on the same conf. */
KW_API int kw_conf_get(const kw_conf_t *conf, const char *name, char *buf, size_t buf_size);

/* ---- Events ----------------------------------------------------------------------- */

/* Where an event came from. */
typedef enum kw_source {
    KW_SOURCE_NOTIFICATION = 0,  /* a live keyspace notification */
    KW_SOURCE_SWEEP = 1,         /* found due by the sweeper (reliable delivery) */
    KW_SOURCE_LEASE_EXPIRED = 2, /* redelivered because a holder's lease ran out */
    KW_SOURCE_TASK = 3           /* a delayed task came due */
} kw_source;

/* An event handed to a handler. Valid only for the duration of the handler call; copy
 * what you need to keep. Accessors may be called from the handler's thread only. */
typedef struct kw_event_s kw_event_t;

/* Event name as Redis publishes it: "expired", "evicted", "del", "set", "expire",
 * "persist", "rename_from", "rename_to", ... */
KW_API const char *kw_event_name(const kw_event_t *ev);
/* The key's bytes; *len receives the length (the bytes may contain NUL). */
KW_API const void *kw_event_key(const kw_event_t *ev, size_t *len);
/* A snapshot of the value if one was kept, else NULL with *len = 0. */
KW_API const void *kw_event_value(const kw_event_t *ev, size_t *len);
/* Logical database number the event happened in. */
KW_API int kw_event_db(const kw_event_t *ev);
/* When keywatch received the event (ms since the Unix epoch, local clock). */
KW_API int64_t kw_event_ts_ms(const kw_event_t *ev);
/* The deadline the item was due at (ms since the epoch, Redis clock), 0 if unknown. */
KW_API int64_t kw_event_deadline_ms(const kw_event_t *ev);
/* Delivery attempt, 1 for the first. */
KW_API int kw_event_attempt(const kw_event_t *ev);
KW_API kw_source kw_event_source(const kw_event_t *ev);
/* Stable identifier: the same for every redelivery of the same item (use it for
 * idempotency). NUL-terminated text, e.g. "n:0:expired:<hex of key>" for notifications. */
KW_API const char *kw_event_id(const kw_event_t *ev);
/* Endpoint ("host:port" or socket path) of the Redis node the event came from. */
KW_API const char *kw_event_node(const kw_event_t *ev);

/* What a handler returns. */
typedef enum kw_result {
    KW_RESULT_ACK = 0,   /* done: the event is consumed */
    KW_RESULT_RETRY = 1, /* failed for now: redeliver later (with backoff) where possible */
    KW_RESULT_REJECT = 2 /* failed for good: do not redeliver */
} kw_result;

/* A handler. Runs on a worker thread, never on the event loop; several handlers may run
 * at once on different threads. Return a kw_result. */
typedef int (*kw_handler_fn)(const kw_event_t *ev, void *opaque);

/* ---- Filters ---------------------------------------------------------------------- */

/*
 * A filter selects the events a handler receives. A new filter matches the "expired"
 * event of any key in any db. Names for kw_filter_set:
 *   events   comma-separated event names, or "*" for every event keywatch subscribes to
 *            (expired, evicted, del, set, expire, persist, rename_from, rename_to); other
 *            names Redis publishes (e.g. "hset", "lpush") are accepted too
 *   db       a database number, or "*" / "-1" for any (default any)
 *   prefix   keys starting with these bytes (text form; use kw_filter_set_bytes for binary)
 *   glob     keys matching a Redis-style glob (* ? [a-z] [^x] \x)
 * A key must match both prefix and glob when both are set.
 */
typedef struct kw_filter_s kw_filter_t;

KW_API kw_filter_t *kw_filter_new(void);
KW_API void kw_filter_free(kw_filter_t *filter);
/* Not concurrently on the same filter. KW_ERR_UNKNOWN_CONF / KW_ERR_BAD_VALUE + errstr. */
KW_API int kw_filter_set(kw_filter_t *filter, const char *name, const char *value, char *errstr,
                         size_t errstr_size);
/* Binary form for "prefix" and "glob". Not concurrently on the same filter. */
KW_API int kw_filter_set_bytes(kw_filter_t *filter, const char *name, const void *value, size_t len,
                               char *errstr, size_t errstr_size);

/* ---- Engine ----------------------------------------------------------------------- */

typedef struct kw_engine_s kw_engine_t;

/* Connection states reported to the state callback and by the "conn.state" stat. */
typedef enum kw_conn_state {
    KW_CONN_DISCONNECTED = 0,
    KW_CONN_CONNECTING = 1,
    KW_CONN_READY = 2, /* connected, authenticated and subscribed */
    KW_CONN_BROKEN = 3 /* lost; a reconnect is scheduled */
} kw_conn_state;

/* Log levels for the log callback. */
typedef enum kw_log_level {
    KW_LOG_DEBUG = 0,
    KW_LOG_INFO = 1,
    KW_LOG_WARN = 2,
    KW_LOG_ERROR = 3
} kw_log_level;

/* Called on the event-loop thread when a connection changes state. node is "host:port"
 * or a socket path; detail says why (e.g. the error that broke the connection). Must not
 * block and must not call kw_engine_stop/kw_engine_free. */
typedef void (*kw_state_fn)(const char *node, kw_conn_state state, const char *detail,
                            void *opaque);
/* Called from any engine thread. Must not block for long. */
typedef void (*kw_log_fn)(kw_log_level level, const char *message, void *opaque);

/* Create an engine from a configuration (copied: the caller keeps and frees conf).
 * Checks the configuration but does not connect. Any thread. */
KW_API int kw_engine_new(const kw_conf_t *conf, kw_engine_t **out, char *errstr,
                         size_t errstr_size);
/* Stops the engine if running (with the configured stop.timeout), then frees it. Must not
 * be called from a handler or a callback. */
KW_API void kw_engine_free(kw_engine_t *engine);

/* Register a handler for the events the filter selects (filter may be NULL: every
 * "expired" event). The filter is copied. Only before kw_engine_start (KW_ERR_STATE
 * after). Every matching handler receives each event. Not concurrently with start. */
KW_API int kw_engine_add_handler(kw_engine_t *engine, const kw_filter_t *filter, kw_handler_fn fn,
                                 void *opaque);
/* Callbacks; only before kw_engine_start. NULL removes. The default log sink writes
 * warnings and errors to stderr. */
KW_API int kw_engine_set_state_cb(kw_engine_t *engine, kw_state_fn fn, void *opaque);
KW_API int kw_engine_set_log_cb(kw_engine_t *engine, kw_log_fn fn, void *opaque);

/* Start the loop and worker threads, connect, authenticate, check notify-keyspace-events
 * and subscribe. Blocks until subscribed or redis.connect_timeout passes: on failure
 * (KW_ERR_CONNECT, KW_ERR_AUTH, KW_ERR_TIMEOUT, KW_ERR_REDIS, ...) nothing keeps running
 * and kw_engine_last_error() says what was wrong. Once started, lost connections are
 * re-established in the background. Not concurrently with stop/free. */
KW_API int kw_engine_start(kw_engine_t *engine);
/* Stop receiving, let in-flight and queued handlers finish for up to timeout_ms
 * (negative: stop.timeout), then stop every thread. Events not yet handled by then are
 * dropped and counted ("events.abandoned"). Returns KW_ERR_TIMEOUT if handlers were
 * still running at the deadline (their threads are still joined before returning).
 * Idempotent. Must not be called from a handler or a callback. */
KW_API int kw_engine_stop(kw_engine_t *engine, int timeout_ms);

/* Last error recorded on this engine (never NULL; "" if none). The text belongs to the
 * engine and stays valid until the next call on this engine from the same thread.
 * Any thread. */
KW_API const char *kw_engine_last_error(kw_engine_t *engine);

/*
 * Statistics, by name. Any thread. Names:
 *   events.received          events read from Redis (all types)
 *   events.received.<name>   per event name, e.g. events.received.expired
 *   events.delivered         handler calls that returned
 *   events.dropped           live events dropped because the dispatch queue was full
 *   events.abandoned         events still queued when stop's deadline passed
 *   handler.errors           handler calls that returned RETRY or REJECT or an unknown code
 *   handler.retries          of those, RETRY
 *   conn.reconnects          successful reconnects after a lost connection
 *   conn.state               kw_conn_state of the subscriber (worst over all nodes)
 *   dispatch.queued          events waiting for a worker now
 * Unknown names give KW_ERR_INVALID_ARG. Counters start at 0.
 */
KW_API int kw_engine_stat(kw_engine_t *engine, const char *name, int64_t *value);
/* Every statistic as one JSON object, NUL-terminated, allocated; release with kw_free.
 * NULL when out of memory. Any thread. */
KW_API char *kw_engine_stats_json(kw_engine_t *engine);

/* Frees memory that this library allocated for the caller. NULL is a no-op. */
KW_API void kw_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* KEYWATCH_H */
