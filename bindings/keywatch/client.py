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
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _calls, _keywatch
from ._calls import Call
from ._convert import Bytes, Duration, Text, from_epoch_ms, options_text
from ._errors import Error, from_status, in_context


def _deadline(ms: int) -> _dt.datetime:
    when = from_epoch_ms(ms)
    assert when is not None
    return when


def _json(text: str) -> Any:
    return json.loads(text)


# Each call of the extension by its operation, and what the Python method returns.
_RUN: Dict[str, Callable[[Any, Any], Any]] = {
    "track": lambda c, a: _deadline(c.track(*a)),
    "untrack": lambda c, a: c.untrack(*a),
    "adopt": lambda c, a: _deadline(c.adopt(*a)),
    "schedule": lambda c, a: _deadline(c.schedule(*a)),
    "cancel": lambda c, a: c.cancel(*a),
    "reschedule": lambda c, a: _deadline(c.reschedule(*a)),
    "inspect": lambda c, a: _json(c.inspect_json()),
    "dead_letters": lambda c, a: _json(c.dead_list_json(*a)),
    "replay": lambda c, a: int(c.dead_replay(*a)),
    "purge": lambda c, a: int(c.dead_purge(*a)),
}


def _pipeline_call(call: Call) -> Any:
    """A pipelined call as the extension queues it (positional: pybind11 matches keywords
    slowly, and this is per call)."""
    a = call.args
    if call.op == "track":
        return _keywatch.PipelineCall("track", a[0], a[1], b"", a[2], 0, a[3])
    if call.op == "untrack":
        return _keywatch.PipelineCall("untrack", a[0], b"", b"", 0, 0, 1 if a[1] else 0)
    if call.op == "schedule":
        return _keywatch.PipelineCall("schedule", a[0].encode(), a[1], a[2], a[3], a[4], a[5])
    return _keywatch.PipelineCall("cancel", a[0].encode(), a[1])


class Client:
    """A blocking client. ``url`` is a redis:// or unix:// URL (a cluster: any node;
    ``?db=N`` or ``/N`` names the database; Sentinel:
    ``redis+sentinel://host1:26379,host2:26379/MASTERNAME[/db]``); ``options`` are the library's configuration
    options (``namespace="kw"``, ``redis_command_timeout=5``, ...; a '.' in a name may be
    written '_'; durations follow the package's rule: a number is seconds, a timedelta a
    duration, a str the library's text). Raises keywatch.ConnectionError, InvalidURL,
    UnknownOption, ... on failure."""

    def __init__(self, url: Optional[str] = None, **options: Any) -> None:
        self._lock = threading.Lock()
        self._closed = True  # until connected
        self._c = _keywatch.Client(options_text(url, options))
        self._closed = False

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if not hasattr(self, "_c"):
            return "<keywatch.Client not connected>"
        state = "closed" if self._closed else "open"
        return f"<keywatch.Client {self.options['redis.url']} {state}>"

    @property
    def options(self) -> Mapping[str, str]:
        """The library's options as this client uses them, as text (passwords, also inside
        ``redis.url``, read ``***``)."""
        result: Mapping[str, str] = self._c.options()
        return result

    def close(self) -> None:
        """Closes the connections. Idempotent; later calls raise keywatch.StateError."""
        with self._lock:
            self._closed = True
            self._c.close()

    def _run(self, call: Call) -> Any:
        """Runs one call (its arguments already checked), under the client's lock."""
        with self._lock:
            return _RUN[call.op](self._c, call.args)

    def _run_pipeline(self, calls: List[Call]) -> List[Optional[Error]]:
        """Sends calls as one pipeline: None per call that succeeded, else its error with
        the library's message (what it was about and where it stood is the caller's to
        add)."""
        with self._lock:
            outcomes = self._c.run_pipeline([_pipeline_call(c) for c in calls])
        return [None if status == 0 else from_status(status, message)
                for status, message in outcomes]

    def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
              xx: bool = False, snapshot: bool = False) -> _dt.datetime:
        """SET key value with a TTL and track it, atomically: a handler gets ``expired``
        for it at least once after its deadline, even if no engine ran at that moment.
        ``ttl`` is seconds, a timedelta or the library's text ("250ms"), more than 0.
        ``nx``/``xx``: only if the key does not / does exist (else ConditionFailed);
        ``snapshot``: hand the value to the handler with the event. Returns the deadline."""
        result: _dt.datetime = self._run(_calls.track(key, value, ttl, nx, xx, snapshot))
        return result

    def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        """Stops tracking a key (``delete``: also DEL it). NotFound if it was not tracked."""
        self._run(_calls.untrack(key, delete))

    def adopt(self, key: Bytes, *, snapshot: bool = False) -> _dt.datetime:
        """Tracks a key written elsewhere, at its current TTL. Returns its deadline."""
        result: _dt.datetime = self._run(_calls.adopt(key, snapshot))
        return result

    def schedule(self, queue: Text, id: Bytes, payload: Bytes = b"", *,
                 at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                 nx: bool = False) -> _dt.datetime:
        """Schedules a delayed task, delivered as event ``task`` of ``queue`` at ``at`` (an
        aware datetime) or after ``delay`` (seconds, a timedelta or the library's text;
        neither: now). A task with the same id is replaced unless ``nx`` (then
        ConditionFailed). Returns when it is due."""
        result: _dt.datetime = self._run(_calls.schedule(queue, id, payload, at, delay, nx))
        return result

    def cancel(self, queue: Text, id: Bytes) -> None:
        """Removes a waiting task. NotFound if none, InFlight if it is being handled."""
        self._run(_calls.cancel(queue, id))

    def reschedule(self, queue: Text, id: Bytes, *, at: Optional[_dt.datetime] = None,
                   delay: Optional[Duration] = None) -> _dt.datetime:
        """Moves a waiting task to ``at`` or now + ``delay``. Returns when it is due."""
        result: _dt.datetime = self._run(_calls.reschedule(queue, id, at, delay))
        return result

    def inspect(self) -> Dict[str, Any]:
        """The queues' figures (what ``keywatch inspect`` shows) as a dict: ``now_ms``,
        ``mode``, ``queues`` (a list of dicts: queue, due, due_now, inflight, dead,
        oldest_overdue_ms), ``nodes``, ``complete``, ``unread_slots``, ``unreachable``,
        ``unassigned``."""
        result: Dict[str, Any] = self._run(_calls.inspect())
        return result

    def dead_letters(self, queue: Text, limit: int = 100) -> List[Dict[str, Any]]:
        """A queue's dead letters, oldest first, at most ``limit`` (1 or more): dicts with
        entry, id, attempts, deadline, error, failed_ms and payload (``payload_b64``/
        ``id_b64`` when not UTF-8)."""
        result: List[Dict[str, Any]] = self._run(_calls.dead_letters(queue, limit))
        return result

    def replay(self, queue: Text, entry: Optional[str] = None, *, limit: int = 100) -> int:
        """Puts dead letters back in their queue, due now: one ``entry`` or the oldest
        ``limit`` (1 or more). Returns how many."""
        result: int = self._run(_calls.replay(queue, entry, limit))
        return result

    def purge(self, queue: Text, entry: Optional[str] = None) -> int:
        """Deletes one dead letter (``entry``) or all of a queue's. Returns how many."""
        result: int = self._run(_calls.purge(queue, entry))
        return result

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
    """Calls queued for one round trip; see :meth:`Client.pipeline`. Each call checks its
    arguments as the same call of :class:`Client` does (raising at once if they cannot be
    sent); the library's own checks and Redis's answers come with the results. After the
    block, ``results`` holds None for each call that succeeded and its exception otherwise
    (the library's message, after the call's position and subject); the first failure is
    also raised."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._calls: List[Call] = []
        self.results: List[Optional[Error]] = []

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.execute()

    def __len__(self) -> int:
        return len(self._calls)

    def __repr__(self) -> str:
        return f"<keywatch.Pipeline {len(self._calls)} calls queued>"

    def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
              xx: bool = False, snapshot: bool = False) -> None:
        """Queues :meth:`Client.track`."""
        self._calls.append(_calls.track(key, value, ttl, nx, xx, snapshot))

    def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        """Queues :meth:`Client.untrack`."""
        self._calls.append(_calls.untrack(key, delete))

    def schedule(self, queue: Text, id: Bytes, payload: Bytes = b"", *,
                 at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                 nx: bool = False) -> None:
        """Queues :meth:`Client.schedule`."""
        self._calls.append(_calls.schedule(queue, id, payload, at, delay, nx))

    def cancel(self, queue: Text, id: Bytes) -> None:
        """Queues :meth:`Client.cancel`."""
        self._calls.append(_calls.cancel(queue, id))

    def execute(self) -> List[Optional[Error]]:
        """Sends the queued calls now (the ``with`` block does it for you)."""
        calls, self._calls = self._calls, []
        if not calls:
            self.results = []
            return self.results
        errors = self._client._run_pipeline(calls)
        n = len(calls)
        self.results = [
            None if e is None
            else in_context(e, f"pipelined call {i + 1} of {n} ({_calls.describe(calls[i])}): ")
            for i, e in enumerate(errors)
        ]
        failed = [r for r in self.results if r is not None]
        if failed:
            raise failed[0]
        return self.results
