"""keywatch.aio.Client: the blocking client's methods as coroutines, one worker thread per
client that pipelines the calls queued meanwhile (see the class)."""

from __future__ import annotations

import asyncio
import datetime as _dt
import queue as _queue
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import _calls
from .._calls import Call
from .._convert import Bytes, Duration, Text
from .._errors import StateError
from ..client import Client as _SyncClient

_Queued = Tuple[Call, "asyncio.Future[Any]", asyncio.AbstractEventLoop]
_Outcome = Tuple["asyncio.Future[Any]", bool, Any]


class Client:
    """An asyncio client: the methods of keywatch.Client as coroutines. One worker thread
    per client takes every call queued meanwhile and sends the track/untrack/schedule/cancel
    among them as one pipeline (the others one by one), then resolves the batch's futures
    with one ``call_soon_threadsafe``. The loop never waits on Redis. A call's outcome does
    not depend on that batching: its arguments are checked when it is made (the same
    checks as keywatch.Client's), and a call that fails in a pipeline raises what it would
    have raised alone, with the library's message. ``track`` and ``schedule`` return None
    here (a pipelined call reports its status, not its deadline); the other methods return
    what keywatch.Client's do."""

    def __init__(self, url: Optional[str] = None, **options: Any) -> None:
        self._sync = _SyncClient(url, **options)
        self._calls: "_queue.SimpleQueue[Optional[_Queued]]" = _queue.SimpleQueue()
        self._worker = threading.Thread(target=self._work, name="keywatch-aio-client",
                                        daemon=True)
        self._worker.start()
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<keywatch.aio.Client {self.options['redis.url']} {state}>"

    @property
    def options(self) -> Mapping[str, str]:
        """The library's options as this client uses them (keywatch.Client.options)."""
        return self._sync.options

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Finishes the queued calls, stops the worker, closes the connection."""
        if self._closed:
            return
        self._closed = True
        self._calls.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._worker.join)
        self._sync.close()

    def _call(self, call: Call) -> "asyncio.Future[Any]":
        if self._closed:
            raise StateError("the client is closed", -9)
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[Any]" = loop.create_future()
        self._calls.put((call, future, loop))
        return future

    async def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
                    xx: bool = False, snapshot: bool = False) -> None:
        """keywatch.Client.track as a coroutine (returns None)."""
        await self._call(_calls.track(key, value, ttl, nx, xx, snapshot))

    async def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        """keywatch.Client.untrack as a coroutine."""
        await self._call(_calls.untrack(key, delete))

    async def adopt(self, key: Bytes, *, snapshot: bool = False) -> _dt.datetime:
        """keywatch.Client.adopt as a coroutine."""
        result: _dt.datetime = await self._call(_calls.adopt(key, snapshot))
        return result

    async def schedule(self, queue: Text, id: Bytes, payload: Bytes = b"", *,
                       at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                       nx: bool = False) -> None:
        """keywatch.Client.schedule as a coroutine (returns None)."""
        await self._call(_calls.schedule(queue, id, payload, at, delay, nx))

    async def cancel(self, queue: Text, id: Bytes) -> None:
        """keywatch.Client.cancel as a coroutine."""
        await self._call(_calls.cancel(queue, id))

    async def reschedule(self, queue: Text, id: Bytes, *, at: Optional[_dt.datetime] = None,
                         delay: Optional[Duration] = None) -> _dt.datetime:
        """keywatch.Client.reschedule as a coroutine."""
        result: _dt.datetime = await self._call(_calls.reschedule(queue, id, at, delay))
        return result

    async def inspect(self) -> Dict[str, Any]:
        """keywatch.Client.inspect as a coroutine."""
        result: Dict[str, Any] = await self._call(_calls.inspect())
        return result

    async def dead_letters(self, queue: Text, limit: int = 100) -> List[Dict[str, Any]]:
        """keywatch.Client.dead_letters as a coroutine."""
        result: List[Dict[str, Any]] = await self._call(_calls.dead_letters(queue, limit))
        return result

    async def replay(self, queue: Text, entry: Optional[str] = None, *, limit: int = 100) -> int:
        """keywatch.Client.replay as a coroutine."""
        result: int = await self._call(_calls.replay(queue, entry, limit))
        return result

    async def purge(self, queue: Text, entry: Optional[str] = None) -> int:
        """keywatch.Client.purge as a coroutine."""
        result: int = await self._call(_calls.purge(queue, entry))
        return result

    # ---- the worker thread ----
    def _work(self) -> None:
        while True:
            first = self._calls.get()
            batch: List[_Queued] = [] if first is None else [first]
            stop = first is None
            while not stop:
                try:
                    more = self._calls.get_nowait()
                except _queue.Empty:
                    break
                if more is None:
                    stop = True
                else:
                    batch.append(more)
            if batch:
                self._run(batch)
            if stop:
                return

    def _run(self, batch: List[_Queued]) -> None:
        piped = [q for q in batch if q[0].op in _calls.PIPELINED]
        if len(piped) < 2:
            piped = []
        outcomes = {id(q[1]): outcome for q, outcome in zip(piped, self._run_pipeline(piped))}
        by_loop: Dict[asyncio.AbstractEventLoop, List[_Outcome]] = {}
        for call, future, loop in batch:
            outcome = outcomes.get(id(future))
            if outcome is None:
                try:
                    outcome = (future, True, self._sync._run(call))
                except BaseException as e:
                    outcome = (future, False, e)
            by_loop.setdefault(loop, []).append(outcome)
        for loop, results in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, results)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass

    def _run_pipeline(self, queued: List[_Queued]) -> List[_Outcome]:
        if not queued:
            return []
        try:
            errors = self._sync._run_pipeline([q[0] for q in queued])
        except BaseException as e:  # not sent at all (a lost connection): every call fails
            return [(q[1], False, e) for q in queued]
        return [(q[1], e is None, e) for q, e in zip(queued, errors)]


def _resolve(results: List[_Outcome]) -> None:
    for future, ok, value in results:
        if future.done():  # cancelled meanwhile
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
