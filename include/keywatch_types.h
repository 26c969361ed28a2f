/*
 * keywatch_types.h - the vocabulary every keywatch interface shares (C99): status codes,
 * event sources, handler results, connection states, log levels and the client's flags, plus the
 * version macros. Included by keywatch.h (the C API), keywatch_plugin.h (the handler plugin ABI)
 * and the engine's own code, so one table serves all three. Declares no functions and no
 * objects: it is thread-safe trivially. Values are never renumbered; new ones are appended.
 */
#ifndef KEYWATCH_TYPES_H
#define KEYWATCH_TYPES_H

/* ---- Version ---------------------------------------------------------------------- */
/* See keywatch.h for the compatibility rule while the major version is 0. */
#define KW_VERSION_MAJOR 0
#define KW_VERSION_MINOR 3
#define KW_VERSION_PATCH 0
#define KW_VERSION_STRING "0.3.0"
/* 0xMMmmpp: compare against kw_version() at run time. */
#define KW_VERSION ((KW_VERSION_MAJOR << 16) | (KW_VERSION_MINOR << 8) | KW_VERSION_PATCH)

/* ---- Status codes ----------------------------------------------------------------- */
/* One table generates the enum, kw_strerror() and kw_err_name(). Codes are never reused. */
#define KW_STATUS_TABLE(X)                                                     \
    X(KW_OK, 0, "success")                                                     \
    X(KW_ERR_INVALID_ARG, -1, "invalid argument")                              \
    X(KW_ERR_UNKNOWN_CONF, -2, "unknown configuration name")                   \
    X(KW_ERR_BAD_VALUE, -3, "bad configuration value")                         \
    X(KW_ERR_URL, -4, "malformed Redis URL")                                   \
    X(KW_ERR_CONNECT, -5, "cannot connect to Redis")                           \
    X(KW_ERR_AUTH, -6, "Redis authentication failed")                          \
    X(KW_ERR_REDIS, -7, "Redis replied with an error")                         \
    X(KW_ERR_TIMEOUT, -8, "timed out")                                         \
    X(KW_ERR_STATE, -9, "not allowed in the handle's current state")           \
    X(KW_ERR_NOMEM, -10, "out of memory")                                      \
    X(KW_ERR_INTERNAL, -11, "internal error")                                  \
    X(KW_ERR_CONDITION, -12, "condition not met (NX/XX): nothing was written") \
    X(KW_ERR_NOT_FOUND, -13, "no such key, item or entry")                     \
    X(KW_ERR_TOO_LARGE, -14, "key or value larger than the configured limit")  \
    X(KW_ERR_IN_FLIGHT, -15, "the item is being handled right now")

typedef enum kw_status {
#define KW_STATUS_ENUM_(name, code, text) name = code,
    KW_STATUS_TABLE(KW_STATUS_ENUM_)
#undef KW_STATUS_ENUM_
} kw_status;

/* Where an event came from. */
typedef enum kw_source {
    KW_SOURCE_NOTIFICATION = 0,  /* a live keyspace notification */
    KW_SOURCE_SWEEP = 1,         /* found due by the sweeper (reliable delivery) */
    KW_SOURCE_LEASE_EXPIRED = 2, /* redelivered because a holder's lease ran out */
    KW_SOURCE_TASK = 3           /* a delayed task came due */
} kw_source;

/* What a handler returns. */
typedef enum kw_result {
    KW_RESULT_ACK = 0,    /* done: the event is consumed */
    KW_RESULT_RETRY = 1,  /* failed for now: redeliver later (with backoff) where possible */
    KW_RESULT_REJECT = 2, /* failed for good: do not redeliver */
    KW_RESULT_PENDING = 3 /* held: the handler completes the event later (see kw_event_hold) */
} kw_result;

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

/* ---- Flags of the client's producer calls (keywatch.h) ---------------------------- */
#define KW_TRACK_NX 1       /* only if the key does not exist (KW_ERR_CONDITION otherwise) */
#define KW_TRACK_XX 2       /* only if the key exists (KW_ERR_CONDITION otherwise) */
#define KW_TRACK_SNAPSHOT 4 /* keep the value to hand to the handler with the event */
#define KW_SCHEDULE_NX 1    /* keep an existing task with the same id (KW_ERR_CONDITION) */

#endif /* KEYWATCH_TYPES_H */
