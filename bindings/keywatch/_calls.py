"""The client's calls, their arguments checked and converted once for every path: a call
alone (keywatch.Client), queued in a pipeline (keywatch.Pipeline) or gathered in asyncio
(keywatch.aio.Client, which pipelines what it gathers). A call refused here raises the same
exception on every path; the library checks the rest and says why in its own words.

Each function returns a :class:`Call`: the operation and the extension's arguments."""

from __future__ import annotations

import datetime as _dt
from typing import Any, NamedTuple, Optional, Tuple

from ._convert import Bytes, Duration, Text, to_bytes, to_int, to_ms, to_text, when_ms

TRACK_NX = 1
TRACK_XX = 2
TRACK_SNAPSHOT = 4
SCHEDULE_NX = 1
_MAX_LIMIT = 2**63 - 1

#: The calls a pipeline can carry (kw_client_pipeline_begin).
PIPELINED = frozenset(("track", "untrack", "schedule", "cancel"))


class Call(NamedTuple):
    """One call: ``op`` (the method's name) and ``args`` (the extension's arguments)."""

    op: str
    args: Tuple[Any, ...]


def describe(call: Call) -> str:
    """What a call is about, for messages: ``track key b'k'``, ``schedule queue 'q' id b't'``."""
    if call.op in ("track", "untrack", "adopt"):
        return f"{call.op} key {call.args[0]!r}"
    return f"{call.op} queue {call.args[0]!r} id {call.args[1]!r}"


def track(key: Bytes, value: Bytes, ttl: Duration, nx: bool, xx: bool, snapshot: bool) -> Call:
    flags = (TRACK_NX if nx else 0) | (TRACK_XX if xx else 0) | (TRACK_SNAPSHOT if snapshot else 0)
    return Call("track", (to_bytes(key, "key"), to_bytes(value, "value"), to_ms(ttl, "ttl"),
                          flags))


def untrack(key: Bytes, delete: bool) -> Call:
    return Call("untrack", (to_bytes(key, "key"), bool(delete)))


def adopt(key: Bytes, snapshot: bool) -> Call:
    return Call("adopt", (to_bytes(key, "key"), TRACK_SNAPSHOT if snapshot else 0))


def schedule(queue: Text, id: Bytes, payload: Bytes, at: Optional[_dt.datetime],
             delay: Optional[Duration], nx: bool) -> Call:
    at_ms, delay_ms = when_ms(at, delay)
    return Call("schedule", (to_text(queue, "queue"), to_bytes(id, "id"),
                             to_bytes(payload, "payload"), at_ms, delay_ms,
                             SCHEDULE_NX if nx else 0))


def cancel(queue: Text, id: Bytes) -> Call:
    return Call("cancel", (to_text(queue, "queue"), to_bytes(id, "id")))


def reschedule(queue: Text, id: Bytes, at: Optional[_dt.datetime],
               delay: Optional[Duration]) -> Call:
    at_ms, delay_ms = when_ms(at, delay)
    return Call("reschedule", (to_text(queue, "queue"), to_bytes(id, "id"), at_ms, delay_ms))


def inspect() -> Call:
    return Call("inspect", ())


def dead_letters(queue: Text, limit: int) -> Call:
    return Call("dead_letters", (to_text(queue, "queue"), to_int(limit, "limit", 1, _MAX_LIMIT)))


def replay(queue: Text, entry: Optional[Text], limit: int) -> Call:
    return Call("replay", (to_text(queue, "queue"),
                           None if entry is None else to_text(entry, "entry"),
                           to_int(limit, "limit", 1, _MAX_LIMIT)))


def purge(queue: Text, entry: Optional[Text]) -> Call:
    return Call("purge", (to_text(queue, "queue"),
                          None if entry is None else to_text(entry, "entry")))
