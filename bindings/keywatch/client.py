"""keywatch.Client: track keys, schedule delayed tasks and administer the queues.

Example::

    from datetime import timedelta
    import keywatch

    with keywatch.Client("redis://127.0.0.1:6379") as client:
        client.track("session:alice", b"alice's session", ttl=timedelta(minutes=30))
        client.schedule("emails", "welcome:alice", b'{"to": "alice"}', delay=60)
        print(client.inspect()["queues"])

Thread-safety: a Client may be shared by threads. Calls are serialised by a lock (the C
client holds one connection per master), so threads that want to run calls in parallel use
one Client each. Every call releases the GIL while it waits for Redis.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import _keywatch
from ._convert import Bytes, Duration, from_epoch_ms, options_text, to_bytes, to_epoch_ms, to_ms
from ._errors import Error, from_status

TRACK_NX = 1
TRACK_XX = 2
TRACK_SNAPSHOT = 4
SCHEDULE_NX = 1


def _deadline(ms: int) -> _dt.datetime:
    when = from_epoch_ms(ms)
    assert when is not None
    return when


def _when(at: Optional[_dt.datetime], delay: Optional[Duration]) -> Tuple[int, int]:
    """(at_ms, delay_ms) of the C API from at= or delay= (neither: now)."""
    if at is not None and delay is not None:
        raise ValueError("give at= or delay=, not both")
    if at is not None:
        at_ms = to_epoch_ms(at, "at")
        if at_ms <= 0:
            raise ValueError(f"at={at.isoformat()} is not after 1970-01-01T00:00:00Z")
        return at_ms, 0
    delay_ms = 0 if delay is None else to_ms(delay, "delay")
    if delay_ms < 0:
        raise ValueError(f"delay must not be negative (got {delay!r})")
    return 0, delay_ms


def _track_flags(nx: bool, xx: bool, snapshot: bool) -> int:
    return (TRACK_NX if nx else 0) | (TRACK_XX if xx else 0) | (TRACK_SNAPSHOT if snapshot else 0)


class Client:
    """A blocking client. ``url`` is a redis:// or unix:// URL (a cluster: any node);
    ``options`` are the library's configuration options (``namespace="kw"``,
    ``redis_command_timeout=timedelta(seconds=5)``, ...; a '.' in a name may be written
    '_'). Raises keywatch.ConnectionError, InvalidURL, UnknownOption, ... on failure."""

    def __init__(self, url: Optional[str] = None, **options: Any) -> None:
        self._lock = threading.Lock()
        self._c = _keywatch.Client(options_text(url, options))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections. Idempotent; later calls raise keywatch.StateError."""
        with self._lock:
            self._c.close()

    def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
              xx: bool = False, snapshot: bool = False) -> _dt.datetime:
        """SET key value with a TTL and track it, atomically: a handler gets ``expired``
        for it at least once after its deadline, even if no engine ran at that moment.
        ``nx``/``xx``: only if the key does not / does exist (else ConditionFailed);
        ``snapshot``: hand the value to the handler with the event. Returns the deadline."""
        k, v = to_bytes(key, "key"), to_bytes(value, "value")
        with self._lock:
            return _deadline(self._c.track(k, v, to_ms(ttl, "ttl"), _track_flags(nx, xx, snapshot)))

    def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        """Stops tracking a key (``delete``: also DEL it). NotFound if it was not tracked."""
        k = to_bytes(key, "key")
        with self._lock:
            self._c.untrack(k, delete)

    def adopt(self, key: Bytes, *, snapshot: bool = False) -> _dt.datetime:
        """Tracks a key written elsewhere, at its current TTL. Returns its deadline."""
        k = to_bytes(key, "key")
        with self._lock:
            return _deadline(self._c.adopt(k, TRACK_SNAPSHOT if snapshot else 0))

    def schedule(self, queue: str, id: Bytes, payload: Bytes = b"", *,
                 at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                 nx: bool = False) -> _dt.datetime:
        """Schedules a delayed task, delivered as event ``task`` of ``queue`` at ``at`` (an
        aware datetime) or after ``delay`` (neither: now). A task with the same id is
        replaced unless ``nx`` (then ConditionFailed). Returns when it is due."""
        i, p = to_bytes(id, "id"), to_bytes(payload, "payload")
        at_ms, delay_ms = _when(at, delay)
        with self._lock:
            return _deadline(self._c.schedule(queue, i, p, at_ms, delay_ms, SCHEDULE_NX if nx else 0))

    def cancel(self, queue: str, id: Bytes) -> None:
        """Removes a waiting task. NotFound if none, InFlight if it is being handled."""
        i = to_bytes(id, "id")
        with self._lock:
            self._c.cancel(queue, i)

    def reschedule(self, queue: str, id: Bytes, *, at: Optional[_dt.datetime] = None,
                   delay: Optional[Duration] = None) -> _dt.datetime:
        """Moves a waiting task to ``at`` or now + ``delay``. Returns when it is due."""
        i = to_bytes(id, "id")
        at_ms, delay_ms = _when(at, delay)
        with self._lock:
            return _deadline(self._c.reschedule(queue, i, at_ms, delay_ms))

    def inspect(self) -> Dict[str, Any]:
        """The queues' figures (what ``keywatch inspect`` shows) as a dict: ``now_ms``,
        ``mode``, ``queues`` (a list of dicts: queue, due, due_now, inflight, dead,
        oldest_overdue_ms), ``nodes``, ``complete``, ``unread_slots``, ``unreachable``,
        ``unassigned``."""
        with self._lock:
            text = self._c.inspect_json()
        result: Dict[str, Any] = json.loads(text)
        return result

    def dead_letters(self, queue: str, limit: int = 100) -> List[Dict[str, Any]]:
        """A queue's dead letters, oldest first: dicts with entry, id, attempts, deadline,
        error, failed_ms and payload (``payload_b64``/``id_b64`` when not UTF-8)."""
        with self._lock:
            text = self._c.dead_list_json(queue, limit)
        result: List[Dict[str, Any]] = json.loads(text)
        return result

    def replay(self, queue: str, entry: Optional[str] = None, *, limit: int = 100) -> int:
        """Puts dead letters back in their queue, due now: one ``entry`` or the oldest
        ``limit``. Returns how many."""
        with self._lock:
            return int(self._c.dead_replay(queue, entry, limit))

    def purge(self, queue: str, entry: Optional[str] = None) -> int:
        """Deletes one dead letter (``entry``) or all of a queue's. Returns how many."""
        with self._lock:
            return int(self._c.dead_purge(queue, entry))

    def pipeline(self) -> "Pipeline":
        """Collects track/untrack/schedule/cancel calls and sends them as one pipeline when
        the ``with`` block ends without an exception (an exception sends nothing)::

            with client.pipeline() as p:
                for i in range(1000):
                    p.track(f"k:{i}", b"v", ttl=60)
            assert p.results == [None] * 1000
        """
        return Pipeline(self)


class Pipeline:
    """Calls queued for one round trip; see :meth:`Client.pipeline`. After the block,
    ``results`` holds None for each call that succeeded and its exception otherwise; the
    first failure is also raised."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._calls: List[Any] = []
        self._what: List[Tuple[str, Bytes]] = []  # (operation, key): named on failure only
        self.results: List[Optional[Error]] = []

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.execute()

    def __len__(self) -> int:
        return len(self._calls)

    def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
              xx: bool = False, snapshot: bool = False) -> None:
        ttl_ms = to_ms(ttl, "ttl")
        if ttl_ms <= 0:
            raise ValueError(f"ttl must be positive (got {ttl!r})")
        if nx and xx:
            raise ValueError("nx and xx exclude each other")
        # Positional arguments: pybind11 matches keywords slowly, and this is per call.
        self._add("track", key, _keywatch.PipelineCall(
            "track", to_bytes(key, "key"), to_bytes(value, "value"), b"", ttl_ms, 0,
            _track_flags(nx, xx, snapshot)))

    def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        self._add("untrack", key, _keywatch.PipelineCall(
            "untrack", to_bytes(key, "key"), flags=1 if delete else 0))

    def schedule(self, queue: str, id: Bytes, payload: Bytes = b"", *,
                 at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                 nx: bool = False) -> None:
        at_ms, delay_ms = _when(at, delay)
        self._add("schedule", id, _keywatch.PipelineCall(
            "schedule", queue.encode("utf-8"), to_bytes(id, "id"), to_bytes(payload, "payload"),
            at_ms, delay_ms, SCHEDULE_NX if nx else 0))

    def cancel(self, queue: str, id: Bytes) -> None:
        self._add("cancel", id, _keywatch.PipelineCall(
            "cancel", queue.encode("utf-8"), to_bytes(id, "id")))

    def _add(self, op: str, key: Bytes, call: Any) -> None:
        self._calls.append(call)
        self._what.append((op, key))

    def execute(self) -> List[Optional[Error]]:
        """Sends the queued calls now (the ``with`` block does it for you)."""
        calls, self._calls = self._calls, []
        if not calls:
            self.results = []
            return self.results
        with self._client._lock:
            statuses = self._client._c.run_pipeline(calls)
        self.results = [
            None if s == 0
            else from_status(s, f"pipelined call {i + 1} of {len(calls)} ({self._what[i][0]} "
                                f"{self._what[i][1]!r}): {_keywatch.strerror(s)}")
            for i, s in enumerate(statuses)
        ]
        self._what = []
        failed = [r for r in self.results if r is not None]
        if failed:
            raise failed[0]
        return self.results
