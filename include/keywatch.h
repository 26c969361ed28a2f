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
 *  - Names: a function that works on a handle takes it as its first argument and is named
 *    after it, kw_<handle>_<verb>: kw_conf_* take a kw_conf_t, kw_filter_* a kw_filter_t,
 *    kw_engine_* a kw_engine_t, kw_client_* a kw_client_t, kw_event_* a kw_event_t,
 *    kw_stats_* a kw_stats_t; kw_<handle>_new makes one (kw_engine_new from a kw_conf_t).
 *    Functions without a handle (kw_version, kw_strerror, kw_err_name, kw_source_name,
 *    kw_free) have none.
 *  - Text the library allocates for the caller (the *_json functions) is returned through
 *    a char ** out-parameter, with the status as the return value; *out is NULL on failure.
 *    Release it with kw_free.
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

#include "keywatch_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KW_BUILDING_LIBRARY)
#define KW_API __attribute__((visibility("default")))
#else
#define KW_API
#endif

/* ---- Version ---------------------------------------------------------------------- */

/* Compatibility rule. From 1.0 on: same major version = same ABI, and the SONAME carries
 * the major version (libkeywatch.so.1). While the major version is 0, every minor release
 * may change the ABI: the SONAME carries major.minor (libkeywatch.so.0.2), so a program
 * built against 0.2.x never loads a 0.3 library; patch releases (0.2.x) keep the ABI. The
 * CMake package (find_package(keywatch 0.2)) accepts the same major.minor only while the
 * major version is 0, and the same major version from 1.0 on. */
/* Version of the library actually loaded (KW_VERSION layout). Any thread. */
KW_API int kw_version(void);
/* "MAJOR.MINOR.PATCH" of the library actually loaded; static storage. Any thread. */
KW_API const char *kw_version_string(void);

/* ---- Status codes ----------------------------------------------------------------- */
/* The codes themselves (KW_STATUS_TABLE, kw_status) are in keywatch_types.h. */

/* Short English text for a status code ("unknown status" for codes not in the table);
 * static storage. Any thread. */
KW_API const char *kw_strerror(int status);
/* The code's name, e.g. "KW_ERR_URL" ("KW_ERR_UNKNOWN" if not in the table). Any thread. */
KW_API const char *kw_err_name(int status);

/* ---- Configuration ---------------------------------------------------------------- */

/*
 * Configuration is a set of string name/value pairs, so that new options never change the
 * ABI. Durations accept "500ms", "30s", "5m", "1h" or a plain number of milliseconds, and
 * must end (now + the duration) by KW_MAX_TIME_MS (see the client section);
 * booleans accept true/false, yes/no, on/off, 1/0.
 *
 *  redis.url              redis://[user:password@]host:port[/db][?db=N] (a ?db= query
 *                         wins over the /db path, as in redis-py), rediss://... (TLS, see
 *                         tls.*) or unix:///path/to.sock[?db=N]
 *                         (default redis://127.0.0.1:6379). For a Redis Cluster:
 *                         any node (the seed), or several comma-separated seeds tried in
 *                         turn; the topology is read from the first that answers.
 *                         For Sentinel: redis+sentinel://[user:password@]host1:26379,
 *                         host2:26379/MASTERNAME[/db] (rediss+sentinel:// for TLS to the
 *                         master): the sentinels are asked for the master, in turn, and
 *                         again at a failover; the user and password are the master's
 *  redis.mode             auto | standalone | cluster (default auto: a node with cluster
 *                         support enabled means cluster). cluster refuses a standalone server
 *  cluster.refresh        how often the cluster topology is read again besides after a lost
 *                         connection or a MOVED reply (default 5s)
 *  cluster.migration_wait how long a master keeps sweeping a slot queue that migrates in
 *                         while it still answers MOVED (the migration's last step, SETSLOT
 *                         NODE, not done yet) before it leaves the queue to the topology:
 *                         when a refresh shows the slot's new master, that master sweeps it
 *                         (default 1m)
 *  redis.user             ACL user name (overrides the URL's)
 *  redis.password         password (overrides the URL's)
 *  redis.connect_timeout  duration, connect + AUTH + first subscribe (default 5s)
 *  notify.enable          bool: if notify-keyspace-events lacks what the handlers need,
 *                         add it with CONFIG SET (default false: only warn)
 *  workers                number of handler threads, 1..256 (default: the number of cores,
 *                         at most 4; raise it for handlers that wait on I/O)
 *  dispatch.queue_size    events waiting for a worker, queued or parked at a handler's
 *                         max_in_flight: once that many wait, live events are dropped and
 *                         counted, and claims stop (they count the events in the workers'
 *                         hands too), 16..16777216 (default 65536)
 *  reconnect.min          first reconnect delay (default 100ms)
 *  reconnect.max          cap of the exponential reconnect delay (default 10s)
 *  health.interval        subscriber heartbeat period (default 1s)
 *  health.timeout         heartbeat silence after which the subscriber is reconnected
 *                         (default 5s)
 *  stop.timeout           how long kw_engine_stop() lets in-flight handlers finish
 *                         (default 10s)
 *  redis.command_timeout  a blocking client's wait for one reply (default 10s)
 *
 * TLS, for rediss:// URLs (every connection of the engine or client uses the same; a
 * failed check ends kw_engine_start / the client call with KW_ERR_CONNECT and a message
 * naming what failed and what to do: the file, which side refused which certificate, the
 * name, TLS on one side only). kw_engine_start logs a warning for tls.verify=false and for
 * tls.* options given with no rediss:// URL (they are not used then):
 *  tls.ca_file            PEM file of the CA(s) that signed the server's certificate
 *                         (default: the system's CA certificates)
 *  tls.cert_file          client certificate (PEM), for servers with tls-auth-clients
 *  tls.key_file           its private key (PEM, unencrypted); set both or neither
 *  tls.verify             bool: check the server's certificate and name (default true;
 *                         false is for tests only)
 *  tls.server_name        name to check in the server's certificate and to send as SNI
 *                         (default: the URL's host; an IP address is checked against the
 *                         certificate's IP entries; on a cluster: each node's announced
 *                         hostname, else its address; when set, for every node)
 * A rediss:// cluster seed: every node is reached at its tls-port (CLUSTER SHARDS) with
 * these same options; a node without one is refused, named, at start.
 *
 * Sentinel, for redis+sentinel:// URLs (the sentinels' own, apart from the master's):
 *  sentinel.username      ACL user on the sentinels (default: none)
 *  sentinel.password      the sentinels' password (default: none, no AUTH)
 *  sentinel.tls           bool: the sentinels listen for TLS, checked with the tls.*
 *                         options (default false)
 *
 * Reliable delivery (the compensation queue and delayed tasks):
 *  namespace              prefix of every key keywatch writes (default "kw")
 *  track.enable           bool: the engine serves the key-tracking queue: it sweeps keys
 *                         tracked with kw_client_track and claims their live expiry events
 *                         (default true)
 *  track.done_window      how long a handled tracked key is remembered, so that its late
 *                         `expired` notification is not delivered again as an untracked
 *                         key (default 10s)
 *  queue.done_mode        auto or always (default auto): with auto, a claim of tracked keys
 *                         that no other engine can hear (at most one subscriber, this
 *                         engine, on the node's engines channel, counted by PUBSUB NUMSUB
 *                         in the claim) writes no in-flight entries and no done records;
 *                         always keeps them for every claim. A user that may not run
 *                         PUBSUB gets always
 *  queues                 comma-separated task queues the engine serves besides those
 *                         named by handler filters (default none)
 *  lease                  how long a claimed item belongs to this engine before another may
 *                         take it over. Every lease/3 the engine renews the lease of each
 *                         item it holds (waiting for a worker, in a handler, or held with
 *                         kw_event_hold) until hold.timeout after the claim; an engine that
 *                         crashes or hangs loses its items within one lease (default 30s)
 *  hold.timeout           how long after its claim an item may stay with this engine
 *                         (queued, handled or held) with its lease renewed; then it is
 *                         released for redelivery and a later completion is counted in
 *                         items.late_acks, not written. At least `lease` (default 5m)
 *  retry.base, retry.max  backoff after KW_RESULT_RETRY: base * 2^(attempt-1), capped,
 *                         with jitter in [d/2, d] (defaults 1s and 5m)
 *  max_attempts           deliveries before an item goes to the dead-letter stream
 *                         (default 5)
 *  sweep.batch            items claimed per sweep call, 1..1000 (default 1000)
 *  sweep.interval         longest pause between sweeps when nothing is known to be due
 *                         (default 100ms); sweeps otherwise run at the next deadline.
 *                         On a cluster, slot queues are swept at their own deadlines and
 *                         found by keyspace notifications on their due keys (flags Kzg)
 *  sweep.scan_interval    cluster: how often each master is SCANned for queue keys, the
 *                         backstop for notifications missed while disconnected (default 30s)
 *  dedupe.enable          bool: deliver each untracked live event on one instance only,
 *                         using a short claim key in Redis (default false)
 *  dedupe.ttl             lifetime of that claim key (default 60s)
 *  limits.key_bytes       largest key kw_client_track accepts (default 1048576)
 *  limits.value_bytes     largest value or payload accepted (default 16777216)
 *
 * Adoption: keys that other programs write (SET k v EX n, EXPIRE, ...) tracked as if by
 * kw_client_track, from the moment keywatch hears that their TTL was set, at their
 * PEXPIRETIME; untracked when the TTL is removed or the key deleted:
 *  adopt.rules            the rules, separated by ";" (default none). A rule is fields
 *                         name=value separated by spaces: exactly one of prefix=BYTES
 *                         (may be empty: every key), glob=GLOB (Redis's MATCH language) or
 *                         pattern=P (a glob if it has an unescaped *, ? or [, else a
 *                         prefix); db=N (must be redis.url's database; a cluster's is 0);
 *                         queue=NAME (the key queue its keys go to, default "keys"; not a
 *                         task queue); snapshot=BOOL (store the value with the item,
 *                         strings only, default false). In values write \\, \;, "\ " or
 *                         \xNN for any byte. At most 64 rules; the first that matches a
 *                         key wins; keys of `namespace` are never adopted, and a rule
 *                         naming them is refused. Read back in canonical form. Needs
 *                         track.enable=true
 *  catchup.enable         bool: at start, after every reconnect of a node and on a new
 *                         master, SCAN the node for keys the rules match that have a TTL
 *                         and are not tracked yet (default true)
 *  catchup.count          SCAN COUNT of the catch-up scan, 10..10000 (default 1000)
 *  catchup.rate           keys the catch-up scan reads per second per master at most,
 *                         1000..10000000 (default 250000)
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
/* Called once per option by kw_conf_dump: its name, its current value and its default,
 * as kw_conf_get gives them (passwords, also inside redis.url, read back as "***"). The
 * strings are valid during the call only. */
typedef void (*kw_conf_dump_fn)(const char *name, const char *value, const char *default_value,
                                void *opaque);
/* Every option this release knows, sorted by name, through fn. Not concurrently with
 * kw_conf_set on the same conf. */
KW_API int kw_conf_dump(const kw_conf_t *conf, kw_conf_dump_fn fn, void *opaque);

/* ---- Events ----------------------------------------------------------------------- */

/* An event handed to a handler. Valid only for the duration of the handler call (copy
 * what you need to keep, or hold it: kw_event_hold). Accessors may be called from the
 * handler's thread only, except on the event of a hold (kw_hold_event): any thread. */
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
/* The deadline the item was due at (ms since the epoch, Redis clock), 0 if unknown. For a
 * tracked key whose TTL was shortened outside keywatch: when its expiry was claimed. */
KW_API int64_t kw_event_deadline_ms(const kw_event_t *ev);
/* Delivery attempt, 1 for the first. */
KW_API int kw_event_attempt(const kw_event_t *ev);
/* Deliveries an item gets before it goes to the dead letters (the engine's max_attempts);
 * 1 for untracked live events (delivered once). */
KW_API int kw_event_max_attempts(const kw_event_t *ev);
/* The error recorded by the previous attempt (kw_event_set_error or a completion's
 * reason), "" if none (first attempt, or none given). NUL-terminated. */
KW_API const char *kw_event_last_error(const kw_event_t *ev);
KW_API kw_source kw_event_source(const kw_event_t *ev);
/* The source's name as the event's JSON line writes it: "notification", "sweep",
 * "lease_expired", "task"; "unknown" for any other value. Static text, never NULL. Any
 * thread. */
KW_API const char *kw_source_name(kw_source source);
/* Stable identifier: the same for every redelivery of the same item (use it for
 * idempotency). NUL-terminated text, e.g. "n:0:expired:<hex of key>" for notifications. */
KW_API const char *kw_event_id(const kw_event_t *ev);
/* Endpoint ("host:port" or socket path) of the Redis node the event came from. */
KW_API const char *kw_event_node(const kw_event_t *ev);
/* The queue the item came from: "keys" for tracked keys, the task queue's name for
 * delayed tasks, "" for untracked live events. */
KW_API const char *kw_event_queue(const kw_event_t *ev);
/* Record why the handler is about to return RETRY or REJECT; it is kept with the item and
 * written to the dead-letter stream. Call from the handler only. */
KW_API void kw_event_set_error(kw_event_t *ev, const char *reason);
/* The event as one line of JSON: exactly the line `keywatch watch` prints (without its
 * newline) and a plugin's host->event_json gives. Fields, in this order: "event"; "key", or
 * "key_b64" (base64) when the key is not valid UTF-8; "value" or "value_b64" likewise, only
 * with a snapshot or a task's payload; "db"; "ts_ms"; "deadline_ms", only when known;
 * "attempt"; "source" (kw_source_name); "queue", only for an item of a queue; "id"; "node".
 * Into *out (NUL-terminated, allocated; release with kw_free), its length into *len when
 * len is not NULL. Returns KW_OK; KW_ERR_INVALID_ARG for a NULL ev or out; KW_ERR_NOMEM
 * when out of memory. *out is NULL (and *len 0) on failure. From the handler's thread
 * during its call, or from any thread on the event of a hold (kw_hold_event). */
KW_API int kw_event_json(const kw_event_t *ev, char **out, size_t *len);

/* A handler. Runs on a worker thread, never on the event loop; several handlers may run
 * at once on different threads. Returns a kw_result: KW_RESULT_PENDING only after
 * kw_event_hold (without a hold it counts as a handler error: RETRY, handler.errors, with
 * the reason "the handler returned KW_RESULT_PENDING without holding the event"). */
typedef int (*kw_handler_fn)(kw_event_t *ev, void *opaque);

/*
 * Held events: deferred completion. A handler may take its event over and complete it
 * later, from any thread (an asyncio loop, an HTTP client, a batch):
 *
 *   kw_hold_t *h = kw_event_hold(ev);   // in the handler, on its thread
 *   ... hand h to another thread ...
 *   return KW_RESULT_PENDING;
 *   ... later, anywhere:
 *   kw_event_complete(h, KW_RESULT_ACK, NULL, -1);
 *   kw_hold_free(h);
 *
 * While an item is held, its lease is renewed (see the `lease` option) until hold.timeout
 * after its claim; then it is released for redelivery, and a completion after that
 * returns KW_OK but is not written (counted in items.late_acks). When several handlers
 * match an event, the item completes once each has: ACK only if all ack, any REJECT
 * wins, else RETRY. Untracked live events can be held too; their completion only counts.
 * kw_engine_stop waits for holds as for running handlers (up to its timeout); an item
 * still held then goes back to its queue (items.released) for another engine, and a later
 * kw_event_complete returns KW_ERR_STATE.
 */
typedef struct kw_hold_s kw_hold_t;

/* Takes the event over. Only inside the handler, on its thread: NULL otherwise (or when
 * out of memory, or while the engine is stopping). The handler then returns
 * KW_RESULT_PENDING; if it returns ACK, RETRY or REJECT instead, that completes the hold.
 * Each call returns a new handle to the same hold; the caller owns each handle and frees
 * it with kw_hold_free. */
KW_API kw_hold_t *kw_event_hold(kw_event_t *ev);
/* The held event: a copy that stays valid until the handle is freed. Any thread. */
KW_API const kw_event_t *kw_hold_event(const kw_hold_t *h);
/* Completes the held event: result is KW_RESULT_ACK, KW_RESULT_RETRY or KW_RESULT_REJECT;
 * reason (may be NULL) is kept with a retried item and written to its dead letter;
 * retry_delay_ms: when a RETRY is due again (negative: the usual backoff). Returns KW_OK,
 * KW_ERR_INVALID_ARG (bad handle, result or delay: nothing done), or KW_ERR_STATE when
 * completed already or the engine stopped (the item went back to its queue). Any thread;
 * not concurrently with kw_hold_free of the same handle. */
KW_API int kw_event_complete(kw_hold_t *h, int result, const char *reason, int64_t retry_delay_ms);
/* Frees a handle (NULL is ignored). Freeing the last handle of a hold never completed
 * releases the item: due again at once, its attempt given back (unless another handler
 * of the event asked for a retry or reject). Any thread; valid after kw_engine_free. */
KW_API void kw_hold_free(kw_hold_t *h);

/* ---- Filters ---------------------------------------------------------------------- */

/*
 * A filter selects the events a handler receives. A new filter matches the "expired"
 * event of any key in any db (tracked keys included). Names for kw_filter_set:
 *   events   comma-separated event names, or "*" for every event keywatch subscribes to
 *            (expired, evicted, del, set, expire, persist, rename_from, rename_to); other
 *            names Redis publishes (e.g. "hset", "lpush") are accepted too. "task"
 *            selects delayed tasks (it is not a Redis event)
 *   queue    only items of this queue ("keys", an adopt rule's queue, or a task queue:
 *            the engine then serves that queue, and events must include "task", or
 *            kw_engine_start refuses the handler with KW_ERR_STATE)
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

/* Called on the event-loop thread when a connection changes state. node is "host:port"
 * or a socket path; detail says why (e.g. the error that broke the connection). Must not
 * block and must not call kw_engine_stop/kw_engine_free. */
typedef void (*kw_state_fn)(const char *node, kw_conn_state state, const char *detail,
                            void *opaque);
/* Called from any engine thread. Must not block for long. */
typedef void (*kw_log_fn)(kw_log_level level, const char *message, void *opaque);
/* The same lines as kw_log_fn (the same message text), with structured fields: fields is
 * name, value, name, value, ..., NULL (never NULL itself; no field: { NULL }), valid during
 * the call only. The names:
 *   node      the Redis node ("host:port" or socket path) the line is about: on every line
 *             of a node's subscriber and sweeper, and the cluster lines about one master
 *   queue     the queue ("keys" or a task queue) the line is about, where one is
 *   handler   the plugin instance's name, on every line a plugin logs (host->log)
 *   event_id  the event's id (kw_event_id), on the lines a plugin logs inside its handle()
 * A line carries only the fields that apply; more names may come in later versions (a
 * consumer should pass unknown names through). Called from any engine thread. Must not
 * block for long. */
typedef void (*kw_log_fields_fn)(kw_log_level level, const char *message, const char *const *fields,
                                 void *opaque);

/* Create an engine from a configuration (copied: the caller keeps and frees conf).
 * Checks the configuration but does not connect. Any thread. */
KW_API int kw_engine_new(const kw_conf_t *conf, kw_engine_t **out, char *errstr,
                         size_t errstr_size);
/* Stops the engine if running (with the configured stop.timeout), then frees it. Must not
 * be called from a handler or a callback. */
KW_API void kw_engine_free(kw_engine_t *engine);

/* Register a handler for the events the filter selects (filter may be NULL: every
 * "expired" event). The filter is copied. Only before kw_engine_start (KW_ERR_STATE
 * after). Every matching handler receives each event. Not concurrently with start.
 * free_opaque (may be NULL) is called once with opaque when the engine is freed, after
 * its last handler call; if this call fails it is not called (opaque stays the caller's). */
KW_API int kw_engine_add_handler(kw_engine_t *engine, const kw_filter_t *filter, kw_handler_fn fn,
                                 void *opaque, void (*free_opaque)(void *));
/* Load a handler plugin (docs/plugins.md) and register an instance of it for the events the
 * filter selects (NULL: every "expired" event). plugin: a path (containing '/' or ending in
 * ".so"), or a name looked up as <name>.so in $KEYWATCH_PLUGIN_PATH's directories, then in
 * the plugin directory beside this library as installed (<libdir>/keywatch/plugins; from a
 * build tree, the plugins built there), then in the plugin directory configured when it was
 * built. instance: a name for this instance (NULL: the plugin's own name);
 * several instances of one plugin need different names; its counters are the statistics
 * "plugin.<instance>.<counter>". options: name, value, name, value, ..., NULL (NULL: none),
 * passed to the plugin's init; an option it does not read is refused. A refused plugin
 * leaves the engine unchanged; errstr says why and what to do. Only before
 * kw_engine_start. Not concurrently with other calls on the engine. */
KW_API int kw_engine_add_plugin(kw_engine_t *engine, const char *plugin, const char *instance,
                                const kw_filter_t *filter, const char *const *options, char *errstr,
                                size_t errstr_size);
/* Callbacks; only before kw_engine_start (KW_ERR_STATE after). NULL removes. The default
 * log sink writes warnings and errors to stderr. An engine has one log callback: setting
 * it with kw_engine_set_log_cb or kw_engine_set_log_fields_cb replaces the one set before
 * by either (and NULL through either removes it). */
KW_API int kw_engine_set_state_cb(kw_engine_t *engine, kw_state_fn fn, void *opaque);
KW_API int kw_engine_set_log_cb(kw_engine_t *engine, kw_log_fn fn, void *opaque);
KW_API int kw_engine_set_log_fields_cb(kw_engine_t *engine, kw_log_fields_fn fn, void *opaque);

/* Start the loop and worker threads, connect, authenticate, SELECT the URL's db, check the
 * ACL permissions keywatch needs, check notify-keyspace-events and subscribe. While
 * nothing answers at redis.url (connection refused or unreachable: a server or cluster
 * still starting) the seeds are tried again, backing off from 50 ms to 1 s, until
 * redis.connect_timeout has passed; while a seed is loading its data set (it answers
 * LOADING after a restart) it is asked again every 100 ms for as long, and then
 * KW_ERR_TIMEOUT says it is still loading. Blocks until subscribed or redis.connect_timeout
 * passes: on failure nothing keeps running and kw_engine_last_error() says what was wrong
 * and what to do. What a retry cannot fix fails at once: KW_ERR_AUTH for a refused
 * password or a missing ACL permission (the message names the ACL SETUSER rule),
 * KW_ERR_REDIS for a db the server does not have; otherwise KW_ERR_CONNECT (unreachable,
 * or not speaking the Redis protocol), KW_ERR_TIMEOUT (no answer within
 * redis.connect_timeout), ... Once started, lost connections are re-established in the
 * background with capped exponential backoff, whatever the cause. Not concurrently with
 * stop/free. */
KW_API int kw_engine_start(kw_engine_t *engine);
/* A dry run of kw_engine_start, for a setup check: connects and subscribes to the server
 * or every master of a cluster with the same checks (credentials, db, the ACL user's
 * commands, channels and keys), returning what kw_engine_start would, then disconnects.
 * No handler is called and no tracked key or task is claimed (events read meanwhile are
 * dropped), and nothing is written to the server: with notify.enable, the CONFIG SET of
 * notify-keyspace-events that start would run is not run but logged (INFO, "... start
 * would set it to '<flags>'"). Plugins have been loaded and initialised by
 * kw_engine_add_plugin already.
 * The engine's node statistics stay in its snapshot; it cannot be started afterwards
 * (KW_ERR_STATE): create another. Not concurrently with other calls on the engine. */
KW_API int kw_engine_check(kw_engine_t *engine);
/* Stop receiving, let in-flight and queued handlers finish and held events complete for
 * up to timeout_ms (negative: stop.timeout), then stop every thread. Events not yet
 * handled by then are dropped and counted ("events.abandoned"); items still held go back
 * to their queues ("items.released") and their later kw_event_complete returns
 * KW_ERR_STATE. Returns KW_ERR_TIMEOUT if handlers were still running or events still
 * held at the deadline (handler threads are still joined before returning).
 * Idempotent. Must not be called from a handler or a callback. */
KW_API int kw_engine_stop(kw_engine_t *engine, int64_t timeout_ms);

/* Last error recorded on this engine (never NULL; "" if none). The text belongs to the
 * engine and stays valid until the next kw_engine_last_error call on this engine from the
 * same thread (calls on other engines, or from other threads, do not touch it), or until
 * kw_engine_free; the engine keeps one copy per thread that asked. Any thread. */
KW_API const char *kw_engine_last_error(kw_engine_t *engine);

/*
 * Statistics. One table (core/base/stats.h) defines them all; this list is generated from it
 * (tests/stats_table_test.cpp checks that they agree). Columns: name, type, unit, help.
 * A name holding <label> is a labelled family: one sample per node ("host:port" or socket
 * path), queue ("keys" or a task queue), handler (registration index, from 0) or event
 * name; its sample is named with the label's value in place, e.g. "queue.acked.keys".
 * Types: counter (only grows from 0), gauge (current value), histogram (observations:
 * count, sum and fixed buckets, read through kw_engine_stats).
 * KW_STATS_LIST_BEGIN
 *   events.received             counter   events      events read from Redis (all types)
 *   events.received.<event>     counter   events      events read from Redis, per event name, e.g.
 *                                                     events.received.expired
 *   events.delivered            counter   calls       events handed to handlers whose calls
 *                                                     returned (a batch of n events: n)
 *   events.dropped              counter   events      live events dropped because the dispatch
 *                                                     queue was full
 *   events.abandoned            counter   events      events still queued when stop's deadline
 *                                                     passed
 *   events.suppressed           counter   events      live expiry events of tracked keys another
 *                                                     path handles
 *   events.unrouted             counter   events      cluster: live events dropped because no
 *                                                     master was known for their slot and more than
 *                                                     100000 were waiting for one
 *   handler.errors              counter   calls       handler calls that returned RETRY or REJECT
 *                                                     or an unknown code
 *   handler.retries             counter   calls       of those, RETRY
 *   handler.calls.<handler>     counter   calls       events one handler's calls returned (a batch
 *                                                     of n events: n); <handler> is its
 *                                                     registration index, from 0
 *   handler.errors.<handler>    counter   calls       of those, the calls that returned RETRY or
 *                                                     REJECT or an unknown code
 *   handler.acked.<handler>     counter   events      events one handler acknowledged: returned
 *                                                     ACK, or completed its hold with ACK
 *   handler.retried.<handler>   counter   events      events one handler asked to retry (returned
 *                                                     RETRY, or completed its hold with RETRY)
 *   handler.rejected.<handler>  counter   events      events one handler rejected (REJECT or an
 *                                                     unknown code, returned or through its hold)
 *   handler.pending.<handler>   counter   calls       calls of one handler that held the event
 *                                                     (kw_event_hold); the hold's result is counted
 *                                                     in acked, retried or rejected when it
 *                                                     completes (a hold released unfinished: in
 *                                                     none)
 *   handler.duration.<handler>  histogram seconds     how long one handler's calls took, observed
 *                                                     once per event (each event of a batch: the
 *                                                     batch's call)
 *   handler.batches.<handler>   counter   calls       calls into one handler: one per handle_batch
 *                                                     call (a plugin's batch of events), one per
 *                                                     call of a handler that takes one event at a
 *                                                     time; events per call = calls / batches
 *   handler.waiting.<handler>   gauge     events      events of one handler parked by its
 *                                                     max_in_flight (a plugin's set_max_in_flight)
 *                                                     until room frees up; no worker waits for
 *                                                     them; 0 without a limit
 *   conn.reconnects             counter   connections successful reconnects after a lost connection
 *   conn.state                  gauge     state       kw_conn_state of the subscriber (worst over
 *                                                     all nodes)
 *   conn.nodes                  gauge     nodes       nodes subscribed to (1, or the masters of a
 *                                                     cluster)
 *   node.state.<node>           gauge     state       kw_conn_state of one node's subscriber
 *                                                     ("host:port" or socket path)
 *   node.reconnects.<node>      counter   connections successful reconnects to one node after a
 *                                                     lost connection
 *   node.received.<node>        counter   events      events read from one node (all types)
 *   node.sweeping.<node>        gauge     bool        1 while one node's sweeper is connected and
 *                                                     its claims work, else 0 (only when the engine
 *                                                     serves queues)
 *   topology.refreshes          counter   refreshes   cluster topology reads that succeeded
 *                                                     (periodic, and after a lost connection or
 *                                                     MOVED)
 *   conn.slots_uncovered        gauge     slots       cluster slots the last topology read gives no
 *                                                     working master (a master down, its replica
 *                                                     not promoted yet): their events cannot
 *                                                     arrive; 0 when standalone
 *   dispatch.queued             gauge     events      events waiting for a worker now
 *   items.claimed               counter   items       tracked keys and tasks claimed by this engine
 *   items.acked                 counter   items       of those, acknowledged
 *   items.retried               counter   items       of those, scheduled for a retry
 *   items.dead                  counter   items       of those, moved to the dead-letter stream
 *   items.lease_expired         counter   items       claims of items whose previous holder's lease
 *                                                     ran out
 *   items.unhandled             counter   items       claimed items no handler's filter matched
 *                                                     (acked)
 *   items.late_acks             counter   items       completions not written: the lease had passed
 *                                                     to another holder, or the item was released
 *                                                     at hold.timeout
 *   items.released              counter   items       claimed items given back unhandled when the
 *                                                     engine stopped
 *   queue.acked.<queue>         counter   items       items of one queue ("keys" or a task queue)
 *                                                     whose handlers all returned ACK
 *   queue.retried.<queue>       counter   items       items of one queue a handler returned RETRY
 *                                                     for (and none REJECT)
 *   queue.rejected.<queue>      counter   items       items of one queue a handler returned REJECT
 *                                                     or an unknown code for
 *   queue.claimed.<queue>       counter   items       items of one queue claimed by this engine
 *                                                     (swept when due, or on their live event)
 *   queue.dead.<queue>          counter   items       items of one queue moved to its dead-letter
 *                                                     stream
 *   queue.lease_expired.<queue> counter   items       claims of items of one queue whose previous
 *                                                     holder's lease ran out
 *   expiry.lateness.<queue>     histogram seconds     handler start minus deadline of the first
 *                                                     delivery of each tracked key or task of one
 *                                                     queue (negative counts as 0)
 *   sweep.calls                 counter   calls       claim_due script calls
 *   lateness.max_ms             gauge     ms          largest handler start minus deadline seen
 *                                                     (tracked keys and tasks)
 *   adopt.adopted               counter   keys        keys an adopt rule matches that adoption
 *                                                     tracked (events and catch-up scans)
 *   adopt.rescheduled           counter   keys        tracked keys whose deadline adoption moved to
 *                                                     their new TTL
 *   adopt.untracked             counter   keys        tracked keys adoption untracked because their
 *                                                     TTL was removed
 *   adopt.late                  counter   keys        keys gone before their adoption after an
 *                                                     event that could set a TTL (a TTL shorter
 *                                                     than the adoption delay)
 *   adopt.dropped               counter   keys        adoptions dropped (a catch-up scan follows):
 *                                                     more than 100000 waited for the connection
 *                                                     or, on a cluster, for their slot's master; a
 *                                                     reply failed; their slot had no master
 *   adopt.parked                gauge     keys        cluster: adoptions refused because their slot
 *                                                     moved, parked now to be sent again to the
 *                                                     slot's master
 *   adopt.resent                counter   keys        cluster: parked adoptions sent again to their
 *                                                     slot's master
 *   catchup.scanning.<node>     gauge     bool        1 while the catch-up scan for adopt rules
 *                                                     reads one node, else 0 (only with
 *                                                     adopt.rules)
 *   catchup.progress.<node>     gauge     permille    how far the catch-up scan of one node is, 0
 *                                                     to 1000 (1000: done; only with adopt.rules)
 *   catchup.scans               counter   scans       catch-up scans of a node completed
 *   catchup.keys                counter   keys        keys the catch-up scans found that an adopt
 *                                                     rule matches
 *   plugin.<counter>            counter   count       a plugin instance's own counter (host
 *                                                     counter_add); <counter> is the instance's
 *                                                     name, a dot and the counter's:
 *                                                     plugin.stream.appended
 * KW_STATS_LIST_END
 * Samples of a labelled family appear once their label is known (queues and handlers at
 * kw_engine_start); before kw_engine_start only unlabelled statistics exist.
 * Node samples (node.*) follow the nodes the engine subscribes to: the server, or the
 * masters of a cluster as its topology lists them. A node appears when the engine starts
 * or a topology refresh lists a new master, and its samples leave the snapshot (and
 * conn.nodes drops) when a refresh no longer lists it (a failed-over or removed master);
 * a node listed again starts from 0. So conn.nodes always equals the number of nodes
 * listed, and conn.state is the worst of their node.state. node.sweeping exists only when
 * the engine serves queues (tracked keys or task queues): an engine that is ready to
 * deliver has every node.state READY and, when serving queues, every node.sweeping 1.
 * Per handler, handler.acked + retried + rejected count each event's result once (a held
 * event when its hold completes); handler.pending counts the calls that held.
 * plugin.<counter> has a sample per counter a plugin instance added to (host counter_add),
 * named plugin.<instance>.<name> like the statistic kw_engine_stat reads; its label value
 * is "<instance>.<name>" (an instance's name holds no dot, so the first dot splits them).
 */
/* One statistic by name (a sample's name for a labelled family; for a histogram its
 * count). KW_ERR_INVALID_ARG for a name that matches no row; a labelled sample whose label
 * value was never seen reads 0. Any thread. */
KW_API int kw_engine_stat(kw_engine_t *engine, const char *name, int64_t *value);
/* Every sample as one JSON object into *out (allocated; release with kw_free): "name":
 * integer for counters and gauges, and for a histogram "name": {"count": n, "sum": seconds,
 * "buckets": [[upper bound in seconds, cumulative count], ..., ["+Inf", count]]}.
 * KW_ERR_NOMEM (*out NULL) when out of memory, KW_ERR_INVALID_ARG for a NULL argument.
 * Any thread. */
KW_API int kw_engine_stats_json(kw_engine_t *engine, char **out);

/*
 * A snapshot of every statistic as structured samples, for exporters (Prometheus /metrics,
 * Python's stats dict) that must not parse text. Sample i of count: the row's name (with
 * its <label> placeholder, e.g. "expiry.lateness.<queue>"), type, unit and help from the
 * table above, the label's name and value ("" and "" when unlabelled), and its value.
 * Samples come in the table's order, a labelled family's samples next to each other.
 * Histograms have fixed buckets in seconds, the same for every histogram; counts are
 * cumulative, as Prometheus' le buckets: counts[k] observations were <= upper_bounds[k],
 * and the last bound is +infinity (HUGE_VAL), whose count is the total.
 * Recording costs a few relaxed atomic adds; the snapshot reads them without stopping
 * the engine, so figures of different samples may be a few events apart.
 * The snapshot is immutable and owned by the caller: any thread may read it; free it with
 * kw_stats_free. Accessors given an index past the count return "", 0 or NULL.
 */
typedef enum kw_stat_type {
    KW_STAT_COUNTER = 0,
    KW_STAT_GAUGE = 1,
    KW_STAT_HISTOGRAM = 2
} kw_stat_type;
typedef struct kw_stats_s kw_stats_t;

/* Takes a snapshot. KW_ERR_INVALID_ARG for NULL arguments, KW_ERR_NOMEM. Any thread. */
KW_API int kw_engine_stats(kw_engine_t *engine, kw_stats_t **out);
KW_API void kw_stats_free(kw_stats_t *stats);
KW_API size_t kw_stats_count(const kw_stats_t *stats);
KW_API const char *kw_stats_name(const kw_stats_t *stats, size_t i);
KW_API kw_stat_type kw_stats_type(const kw_stats_t *stats, size_t i);
KW_API const char *kw_stats_unit(const kw_stats_t *stats, size_t i);
KW_API const char *kw_stats_help(const kw_stats_t *stats, size_t i);
KW_API const char *kw_stats_label_name(const kw_stats_t *stats, size_t i);
KW_API const char *kw_stats_label_value(const kw_stats_t *stats, size_t i);
/* Counter or gauge: its value; histogram: its count. */
KW_API int64_t kw_stats_value(const kw_stats_t *stats, size_t i);
/* Histogram: the sum of the observations (in its unit, seconds); else the value. */
KW_API double kw_stats_sum(const kw_stats_t *stats, size_t i);
/* Histogram: the number of buckets, with *upper_bounds and *counts (cumulative) pointing
 * into the snapshot; 0 with both NULL for other types. Either pointer may be NULL. */
KW_API size_t kw_stats_buckets(const kw_stats_t *stats, size_t i, const double **upper_bounds,
                               const uint64_t **counts);

/* ---- Client: tracking, delayed tasks and administration ----------------------------- */

/*
 * A blocking client for producers and operators. It holds one connection (opened by
 * kw_client_new, re-opened on the next call after a failure), or on a Redis Cluster one per
 * master, each call going to the master of its key's (or task id's) slot and following
 * MOVED/ASK redirections. A server or master loading its data set (it answers LOADING after a
 * restart) is asked again every 100 ms for up to redis.connect_timeout, then the call fails
 * with KW_ERR_TIMEOUT; an unreachable one is reported at once. Not thread-safe: use one
 * client per thread. Every call records a message for kw_client_last_error on failure.
 * Times are ms since the Unix epoch on Redis's clock; TTLs and delays are ms.
 *
 * The latest deadline keywatch accepts is KW_MAX_TIME_MS, 9999-12-31T23:59:59.999Z (a queue's
 * score is a double, exact only up to 2^53 ms, and the deadline is part of the event id). A
 * time after it, or a TTL or delay that ends after it (local clock now + duration, checked
 * again on Redis's clock by the script that would write it), is refused with
 * KW_ERR_INVALID_ARG and nothing is written. Duration options of kw_conf_set obey the same
 * rule (KW_ERR_BAD_VALUE).
 *
 * Flags arguments: a bit this release does not define is refused with KW_ERR_INVALID_ARG (the
 * last error names the bits); nothing is done.
 */
#define KW_MAX_TIME_MS INT64_C(253402300799999)
typedef struct kw_client_s kw_client_t;

KW_API int kw_client_new(const kw_conf_t *conf, kw_client_t **out, char *errstr,
                         size_t errstr_size);
KW_API void kw_client_free(kw_client_t *client);
/* Never NULL; valid until the next call on this client. */
KW_API const char *kw_client_last_error(kw_client_t *client);

/* Flags of kw_client_track and kw_client_adopt: KW_TRACK_* (keywatch_types.h). */

/* SET key value with a TTL of ttl_ms and record the key in the key-tracking queue,
 * atomically. The deadline is taken on the server's clock (the client keeps its offset to
 * it, measured with TIME at most once a second), given to the key as PXAT and to the queue
 * as the score, so the two agree to the millisecond. A handler gets event "expired" for it
 * once its deadline has passed: at least once, by one engine at a time, even if no watcher
 * ran at that moment. deadline_ms (may be NULL) receives the deadline.
 * KW_ERR_INVALID_ARG for ttl_ms <= 0, a deadline after KW_MAX_TIME_MS, NX with XX, or unknown
 * flag bits; KW_ERR_TOO_LARGE past the limits. */
KW_API int kw_client_track(kw_client_t *client, const void *key, size_t key_len, const void *value,
                           size_t value_len, int64_t ttl_ms, int flags, int64_t *deadline_ms);
/* Stop tracking a key; with delete_key also DEL it (atomically). KW_ERR_NOT_FOUND if it
 * was not tracked (and, with delete_key, did not exist). */
KW_API int kw_client_untrack(kw_client_t *client, const void *key, size_t key_len, int delete_key);
/* Track a key written elsewhere, at its current TTL. flags: KW_TRACK_SNAPSHOT (string keys
 * only; other bits are refused). KW_ERR_NOT_FOUND if the key does not exist,
 * KW_ERR_INVALID_ARG if it has no TTL or expires after KW_MAX_TIME_MS. */
KW_API int kw_client_adopt(kw_client_t *client, const void *key, size_t key_len, int flags,
                           int64_t *deadline_ms);

/* Flags of kw_client_schedule: KW_SCHEDULE_* (keywatch_types.h). */

/* Schedule a delayed task: delivered as event "task" at at_ms, or after delay_ms when
 * at_ms is 0. A time in the past means now (documented, not an error). An existing task
 * with the same id is replaced unless KW_SCHEDULE_NX. at_out (may be NULL) receives the
 * time it is due. KW_ERR_INVALID_ARG for a negative at_ms or delay_ms, a time after
 * KW_MAX_TIME_MS, or unknown flag bits. */
KW_API int kw_client_schedule(kw_client_t *client, const char *queue, const void *id, size_t id_len,
                              const void *payload, size_t payload_len, int64_t at_ms,
                              int64_t delay_ms, int flags, int64_t *at_out);
/* Remove a task that is not yet due. KW_ERR_NOT_FOUND if there is none, KW_ERR_IN_FLIGHT
 * if it is being handled. */
KW_API int kw_client_cancel(kw_client_t *client, const char *queue, const void *id, size_t id_len);
/* Move a waiting task to at_ms (or now + delay_ms when at_ms is 0). KW_ERR_NOT_FOUND,
 * KW_ERR_IN_FLIGHT as for kw_client_cancel; KW_ERR_INVALID_ARG as for kw_client_schedule. */
KW_API int kw_client_reschedule(kw_client_t *client, const char *queue, const void *id,
                                size_t id_len, int64_t at_ms, int64_t delay_ms, int64_t *at_out);

/* Pipelining: after kw_client_pipeline_begin, kw_client_track, kw_client_untrack,
 * kw_client_schedule and kw_client_cancel only check their arguments and queue the command
 * (returning KW_OK, outputs untouched); kw_client_pipeline_end sends them all and stores
 * each call's status, in order, into statuses[0..cap) (may be NULL), with the number of
 * calls in *count. It returns KW_OK if every call succeeded, else the first failure. */
KW_API int kw_client_pipeline_begin(kw_client_t *client);
KW_API int kw_client_pipeline_end(kw_client_t *client, int *statuses, size_t cap, size_t *count);
/* The message of call `index` (0-based, in the order of the statuses) of the last
 * kw_client_pipeline_end: why it failed, as kw_client_last_error would have said had it
 * been made alone; "" for a call that succeeded, an index past the calls or a NULL client.
 * (A call refused while it was queued was not sent: its message is kw_client_last_error
 * right after it.) Never NULL; valid until the next kw_client_pipeline_end or
 * kw_client_free. */
KW_API const char *kw_client_pipeline_error(kw_client_t *client, size_t index);

/* Queue figures as one JSON object into *out (allocated; release with kw_free). Returns
 * KW_OK, or a status with *out NULL and kw_client_last_error saying why (KW_ERR_CONNECT,
 * KW_ERR_AUTH, KW_ERR_REDIS, KW_ERR_TIMEOUT, KW_ERR_INVALID_ARG for a NULL out). Fields:
 *   now_ms             Redis's clock when the figures were read (ms since the epoch)
 *   mode               "standalone" or "cluster"
 *   queues             one object per queue, sorted by name: "keys" (tracked keys) always,
 *                      each queue named in the `queues` option, and every queue that holds
 *                      anything; summed over every master of a cluster
 *   nodes              one object per master (standalone: the one server): "node" (its
 *                      "host:port" or socket path), "reachable" (false when it could not be
 *                      read: its share is missing) and "queues", that master's share of the
 *                      queues it holds anything for, same objects as above
 *   complete           false when some queues could not be read: every figure then leaves
 *                      them out (the JSON is still returned, not NULL)
 *   unread_slots       how many hash slots' queues could not be read (0 when complete;
 *                      16384 for a standalone server that stopped answering)
 *   unreachable        one object per master or shard that could not be read: "node"
 *                      ("host:port"; for a shard whose master the cluster marks failed with
 *                      no replica promoted, that failed master), "slots" (how many it
 *                      holds) and "error" (why: no answer, or the master refuses commands,
 *                      e.g. CLUSTERDOWN while it counts the cluster down)
 *   unassigned         the slots no shard holds (CLUSTER DELSLOTS), as [first, last]
 *                      ranges: their queues cannot be read and count in unread_slots
 * A queue object: "queue" (name), "due" (items waiting, due or not), "due_now" (of those,
 * past their deadline), "inflight" (claimed by an engine, not yet acked), "dead" (entries
 * in its dead-letter stream), "oldest_overdue_ms" (how long ago the oldest due-now item's
 * deadline passed; -1 when none is due now). */
KW_API int kw_client_inspect_json(kw_client_t *client, char **out);
/* Dead letters of a queue, oldest first, at most limit (0 counts as 1), into *out: a JSON
 * array of objects with entry, cursor (the letter's name for a page's `after` and for
 * kw_client_dead_replay/purge: its entry, on a cluster followed by "@" and its slot_tag),
 * id, attempts, deadline, error, failed_ms, payload (when the item had one), on a cluster
 * slot_tag, and any further field the stream entry holds;
 * each text field as "<name>_b64" (base64) instead when it is not valid UTF-8. Allocated;
 * release with kw_free. Returns KW_OK (an empty array for an unknown queue), or a status
 * with *out NULL: KW_ERR_INVALID_ARG for a bad queue name, else as kw_client_inspect_json. */
KW_API int kw_client_dead_list_json(kw_client_t *client, const char *queue, size_t limit,
                                    char **out);
/* The same, one page at a time: the entries after `after`, the `cursor` field of the last
 * entry of the previous page (its entry, "<ms>-<seq>", on a cluster followed by "@" and its
 * slot_tag: streams of different slots may hold the same entry id); NULL or "" for the
 * first page. Oldest first (by entry, then slot_tag), at most limit (0 counts as 1).
 * KW_ERR_INVALID_ARG also for an `after` that is not such a cursor. */
KW_API int kw_client_dead_page_json(kw_client_t *client, const char *queue, const char *after,
                                    size_t limit, char **out);
/* Put dead letters back in their queue, due now, attempts reset: one entry (entry_id: its
 * entry "<ms>-<seq>", or its cursor "<ms>-<seq>@<slot_tag>", which acts on that slot's
 * stream only) or the oldest `limit` (entry_id NULL). *count (may be NULL) receives how
 * many. KW_ERR_NOT_FOUND for an unknown queue or entry; KW_ERR_INVALID_ARG for an entry_id
 * that is neither. */
KW_API int kw_client_dead_replay(kw_client_t *client, const char *queue, const char *entry_id,
                                 size_t limit, int64_t *count);
/* Delete one dead letter (entry_id, as kw_client_dead_replay takes it) or all of a queue's
 * (entry_id NULL). */
KW_API int kw_client_dead_purge(kw_client_t *client, const char *queue, const char *entry_id,
                                int64_t *count);

/* Frees memory that this library allocated for the caller. NULL is a no-op. */
KW_API void kw_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* KEYWATCH_H */
