"""keywatch.aio.Client: the blocking client's methods as coroutines, one worker thread per
client that pipelines the calls queued meanwhile (see the class)."""

from __future__ import annotations

import asyncio
import datetime as _dt
import queue as _queue
import threading
from typing import Any, Dict, List, Optional, Tuple

from .._convert import Bytes, Duration
from .._errors import StateError
from ..client import Client as _SyncClient

_PIPELINED = ("track", "untrack", "schedule", "cancel")
_Call = Tuple[str, Tuple[Any, ...], Dict[str, Any], "asyncio.Future[Any]",
              asyncio.AbstractEventLoop]
_Outcome = Tuple["asyncio.Future[Any]", bool, Any]


class Client:
    """An asyncio client: the methods of keywatch.Client as coroutines. One worker thread
    per client takes every call queued meanwhile and sends the track/untrack/schedule/cancel
    among them as one pipeline (the others one by one), then resolves the batch's futures
    with one ``call_soon_threadsafe``. The loop never waits on Redis. ``track`` and
    ``schedule`` return None here (a pipelined call reports its status, not its
    deadline); the other methods return what keywatch.Client's do."""

    def __init__(self, url: Optional[str] = None, **options: Any) -> None:
        self._sync = _SyncClient(url, **options)
        self._calls: "_queue.SimpleQueue[Optional[_Call]]" = _queue.SimpleQueue()
        self._worker = threading.Thread(target=self._work, name="keywatch-aio-client",
                                        daemon=True)
        self._worker.start()
        self._closed = False

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

    def _call(self, op: str, *args: Any, **kwargs: Any) -> "asyncio.Future[Any]":
        if self._closed:
            raise StateError("the client is closed", -9)
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[Any]" = loop.create_future()
        self._calls.put((op, args, kwargs, future, loop))
        return future

    async def track(self, key: Bytes, value: Bytes, ttl: Duration, *, nx: bool = False,
                    xx: bool = False, snapshot: bool = False) -> None:
        await self._call("track", key, value, ttl, nx=nx, xx=xx, snapshot=snapshot)

    async def untrack(self, key: Bytes, *, delete: bool = False) -> None:
        await self._call("untrack", key, delete=delete)

    async def adopt(self, key: Bytes, *, snapshot: bool = False) -> _dt.datetime:
        result: _dt.datetime = await self._call("adopt", key, snapshot=snapshot)
        return result

    async def schedule(self, queue: str, id: Bytes, payload: Bytes = b"", *,
                       at: Optional[_dt.datetime] = None, delay: Optional[Duration] = None,
                       nx: bool = False) -> None:
        await self._call("schedule", queue, id, payload, at=at, delay=delay, nx=nx)

    async def cancel(self, queue: str, id: Bytes) -> None:
        await self._call("cancel", queue, id)

    async def reschedule(self, queue: str, id: Bytes, *, at: Optional[_dt.datetime] = None,
                         delay: Optional[Duration] = None) -> _dt.datetime:
        result: _dt.datetime = await self._call("reschedule", queue, id, at=at, delay=delay)
        return result

    async def inspect(self) -> Dict[str, Any]:
        result: Dict[str, Any] = await self._call("inspect")
        return result

    async def dead_letters(self, queue: str, limit: int = 100) -> List[Dict[str, Any]]:
        result: List[Dict[str, Any]] = await self._call("dead_letters", queue, limit)
        return result

    async def replay(self, queue: str, entry: Optional[str] = None, *, limit: int = 100) -> int:
        result: int = await self._call("replay", queue, entry, limit=limit)
        return result

    async def purge(self, queue: str, entry: Optional[str] = None) -> int:
        result: int = await self._call("purge", queue, entry)
        return result

    # ---- the worker thread ----
    def _work(self) -> None:
        while True:
            first = self._calls.get()
            batch: List[_Call] = [] if first is None else [first]
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

    def _run(self, batch: List[_Call]) -> None:
        outcomes: List[Tuple["asyncio.Future[Any]", bool, Any]] = []
        piped = [c for c in batch if c[0] in _PIPELINED]
        if len(piped) > 1:
            outcomes += self._run_pipeline(piped)
        for call in batch:
            if len(piped) > 1 and call[0] in _PIPELINED:
                continue
            op, args, kwargs, future, _ = call
            try:
                outcomes.append((future, True, getattr(self._sync, op)(*args, **kwargs)))
            except BaseException as e:
                outcomes.append((future, False, e))
        by_loop: Dict[asyncio.AbstractEventLoop, List[_Outcome]] = {}
        for call, outcome in zip(batch, self._order(batch, outcomes)):
            by_loop.setdefault(call[4], []).append(outcome)
        for loop, results in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, results)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass

    @staticmethod
    def _order(batch: List[_Call], outcomes: List[Tuple["asyncio.Future[Any]", bool, Any]]
               ) -> List[Tuple["asyncio.Future[Any]", bool, Any]]:
        by_future = {id(f): (f, ok, v) for f, ok, v in outcomes}
        return [by_future[id(call[3])] for call in batch]

    def _run_pipeline(self, calls: List[_Call]) -> List[Tuple["asyncio.Future[Any]", bool, Any]]:
        pipe = self._sync.pipeline()
        accepted: List[_Call] = []
        outcomes: List[Tuple["asyncio.Future[Any]", bool, Any]] = []
        for call in calls:
            op, args, kwargs, future, _ = call
            try:
                getattr(pipe, op)(*args, **kwargs)  # argument checks happen here
                accepted.append(call)
            except BaseException as e:
                outcomes.append((future, False, e))
        results: List[Optional[BaseException]]
        try:
            results = list(pipe.execute())
        except BaseException as e:
            # Calls that failed one by one are in pipe.results; a pipeline that could not
            # be sent at all (a lost connection) fails every call with its error.
            results = list(pipe.results) if pipe.results else [e] * len(accepted)
        for call, error in zip(accepted, results):
            outcomes.append((call[3], error is None, error))
        return outcomes


def _resolve(results: List[Tuple["asyncio.Future[Any]", bool, Any]]) -> None:
    for future, ok, value in results:
        if future.done():  # cancelled meanwhile
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
