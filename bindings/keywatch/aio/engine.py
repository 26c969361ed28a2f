"""keywatch.aio.Engine: the engine for asyncio programs; handlers may be coroutines.

Example::

    import asyncio, keywatch
    from keywatch import aio

    async def main() -> None:
        engine = aio.Engine("redis://127.0.0.1:6379")

        @engine.on("expired", prefix="session:")
        async def expired(event: keywatch.Event) -> None:
            await remove_from_index(event.key, event.value)   # returning acks

        stream = engine.events("task", queue="emails")        # pull style
        async with engine:                                     # start ... stop
            async for event in stream:
                await send(event.value)    # acked when the loop asks for the next one

    asyncio.run(main())

How it works: an async handler's C handler holds its event (deferred completion) on an
engine worker thread, without the GIL, and queues the hold; the loop is woken through an
eventfd (``loop.add_reader``) once per batch and runs each event's coroutine as a task;
the task's end completes the hold (ack; ``Retry(delay=...)`` or any exception: retry with
that delay; ``Reject``: dead letter). While a coroutine runs, the engine renews the item's
lease (up to the ``hold_timeout`` option). At most ``max_pending`` events are held at once;
past that the workers wait and the rest stays in Redis. Plain functions may be handlers
too: they run on the worker threads as in keywatch.Engine; what such a function returns,
if awaitable, is awaited on the loop while the worker waits (lambdas that call a coroutine
function, ``functools.partial`` objects, objects with ``async def __call__``).

``await engine.stop()`` cannot be awaited inside one of the engine's own handlers (it waits
for them, that one included): it raises keywatch.StateError there, as keywatch.Engine.stop()
does in a handler; start the stop as its own task instead
(``asyncio.get_running_loop().create_task(engine.stop())``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
from collections import deque
from typing import (Any, Awaitable, Callable, Deque, Iterable, List, Mapping, Optional, Set,
                    Tuple, TypeVar, Union)

from .. import _keywatch
from .._convert import Bytes, Duration, Text, to_int, to_ms
from .._errors import StateError
from ..engine import Engine as _SyncEngine
from ..engine import (Event, Reject, Retry, check_handler, filter_args, is_coroutine_handler,
                      log_failure)
from ..stats import Stats

logger = logging.getLogger("keywatch")


_ACK, _RETRY, _REJECT = 0, 1, 2
AsyncHandler = Callable[[Event], Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Any])


class Engine:
    """An engine for asyncio: ``url`` and ``options`` as for keywatch.Engine, plus
    ``max_pending`` (events held for coroutines at once; default 1024).
    ``async with engine:`` starts it and stops it at the end of the block."""

    def __init__(self, url: Optional[str] = None, *, max_pending: int = 1024,
                 **options: Any) -> None:
        self._max_pending = to_int(max_pending, "max_pending", 1, 2**31 - 1)
        self._sync = _SyncEngine(url, **options)
        self._handlers: List[AsyncHandler] = []
        self._tasks: Set["asyncio.Task[Any]"] = set()  # running one event's coroutine each
        self._streams: List[EventStream] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def __repr__(self) -> str:
        return f"<keywatch.aio.Engine {self.options['redis.url']} {self.state}>"

    @property
    def state(self) -> str:
        """``"new"``, ``"running"``, ``"stopped"`` or ``"closed"`` (keywatch.Engine.state)."""
        return self._sync.state

    @property
    def running(self) -> bool:
        """True between a successful ``start()`` and ``stop()``."""
        return self._sync.running

    @property
    def options(self) -> Mapping[str, str]:
        """The library's options as this engine uses them (keywatch.Engine.options)."""
        return self._sync.options

    # ---- handlers ----
    def add_handler(self, fn: Callable[[Event], Any],
                    events: Union[Text, Iterable[Text]] = "expired", *,
                    prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                    db: Optional[int] = None, queue: Optional[Text] = None) -> None:
        """A coroutine function (or an object whose ``__call__`` is one) runs on the loop;
        a plain function on a worker thread, and an awaitable it returns is awaited on the
        loop. The filter as for keywatch.Engine.add_handler. Before ``start()`` only."""
        check_handler(fn, sync_only=False)
        if not is_coroutine_handler(fn):
            self._sync._add(fn, events, prefix, glob, db, queue, self._await_on_loop)
            return
        self._sync._e.add_async_handler(*filter_args(events, prefix, glob, db, queue),
                                        len(self._handlers), self._max_pending)
        # At interpreter exit no loop is left to complete holds: stop without waiting.
        self._sync._exit_timeout = 0
        self._handlers.append(fn)

    def on(self, events: Union[Text, Iterable[Text]] = "expired", *,
           prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
           db: Optional[int] = None, queue: Optional[Text] = None) -> Callable[[F], F]:
        """Decorator form of :meth:`add_handler`; returns the function as it was given
        (a coroutine function keeps its type)."""
        _keywatch.Engine.check_filter(*filter_args(events, prefix, glob, db, queue))

        def register(fn: F) -> F:
            self.add_handler(fn, events, prefix=prefix, glob=glob, db=db, queue=queue)
            return fn

        return register

    def task(self, queue: Text) -> Callable[[F], F]:
        """Decorator: the handler of the delayed tasks of ``queue``."""
        return self.on("task", queue=queue)

    def add_plugin(self, plugin: str, *, instance: Optional[str] = None,
                   events: Union[Text, Iterable[Text]] = "expired",
                   prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                   db: Optional[int] = None, queue: Optional[Text] = None,
                   options: Optional[Mapping[str, str]] = None) -> None:
        """A handler plugin, as keywatch.Engine.add_plugin (its handler runs on the
        engine's worker threads, not on the loop)."""
        self._sync.add_plugin(plugin, instance=instance, events=events, prefix=prefix,
                              glob=glob, db=db, queue=queue, options=options)

    def events(self, events: Union[Text, Iterable[Text]] = "expired", *,
               prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
               db: Optional[int] = None, queue: Optional[Text] = None,
               maxsize: int = 64) -> "EventStream":
        """An async iterator over the events the filter selects (register before start).
        Each event is acked when the ``async for`` asks for the next one; an event still
        current when the engine stops, or when the loop body raised, is retried. When the
        engine stops, the iteration ends (StopAsyncIteration, also for an ``async for``
        waiting for its next event) and events it had not handed out yet go back to their
        queues unhandled (not counted as attempts)."""
        stream = EventStream(to_int(maxsize, "maxsize", 1, 2**31 - 1))
        self.add_handler(stream._feed, events, prefix=prefix, glob=glob, db=db, queue=queue)
        self._streams.append(stream)
        return stream

    # ---- life ----
    async def start(self) -> None:
        """Connects and subscribes (in a thread: the loop keeps running)."""
        loop = asyncio.get_running_loop()
        self._loop = loop  # before the first event: plain handlers' awaitables need it
        try:
            await loop.run_in_executor(None, self._sync.start)
        except BaseException:
            self._loop = None
            raise
        if self._handlers:
            loop.add_reader(self._sync._e.held_fd(), self._drain)

    async def stop(self, timeout: Optional[Duration] = None) -> bool:
        """Stops receiving and waits (in a thread, the loop running the coroutines still
        in progress) for handlers and held events, up to ``timeout`` (seconds, a timedelta
        or the library's text). Not inside one of this engine's handlers (StateError: it
        would wait for itself)."""
        current = asyncio.current_task()
        if current is not None and current in self._tasks:
            raise StateError("aio.Engine.stop() cannot be awaited inside one of the engine's "
                             "handlers: it waits for the handlers to finish, this one "
                             "included. Stop it as a task of its own, e.g. "
                             "asyncio.get_running_loop().create_task(engine.stop())", -9)
        if timeout is not None:
            to_ms(timeout, "timeout")
        for stream in self._streams:
            stream._close()
        loop = asyncio.get_running_loop()
        finished = await loop.run_in_executor(None, self._sync.stop, timeout)
        if self._loop is not None and self._handlers:
            self._loop.remove_reader(self._sync._e.held_fd())
        self._loop = None
        self._drain()  # holds queued while stopping are freed: their items go back
        return bool(finished)

    async def close(self) -> None:
        """Stops the engine if running, then frees it. Idempotent."""
        if self._sync.state == "closed":
            return
        await self.stop()
        self._sync.close()

    async def run(self) -> None:
        """Starts, runs until SIGINT or SIGTERM (or the task is cancelled), then stops."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        await self.start()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            logger.info("running until Ctrl-C, SIGTERM or cancellation")
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await self.stop()

    async def __aenter__(self) -> "Engine":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def stats(self) -> Stats:
        """The engine's statistics (keywatch.Engine.stats); does not block."""
        return self._sync.stats()

    def stat(self, name: str) -> int:
        """One statistic by name (keywatch.Engine.stat); does not block."""
        return self._sync.stat(name)

    # ---- the loop side ----
    def _drain(self) -> None:
        for handler, hold in self._sync._e.take_holds():
            if self._loop is None:  # stopping: freeing the hold gives the item back
                continue
            self._track(self._loop.create_task(_complete(self._handlers[handler], hold)))

    def _track(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _awaited(self, awaitable: Awaitable[Any]) -> Any:
        task = asyncio.current_task()
        if task is not None:
            self._track(task)
        return await awaitable

    def _await_on_loop(self, awaitable: Awaitable[Any]) -> Any:
        """Worker thread: awaits what a plain handler returned on the engine's loop, while
        the worker waits (without the GIL); its result, or its exception raised."""
        loop = self._loop
        if loop is None or loop.is_closed():
            _discard(awaitable)
            raise StateError("the engine's event loop is gone: the handler's awaitable was "
                             "not awaited (the item is retried)")
        future = asyncio.run_coroutine_threadsafe(self._awaited(awaitable), loop)
        while True:
            try:
                return future.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if loop.is_closed():
                    future.cancel()
                    raise StateError("the engine's event loop closed before the handler's "
                                     "awaitable finished (the item is retried)") from None


def _discard(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


class _Release(Exception):
    """An event a stream never handed out: given back to its queue unhandled."""


async def _complete(fn: AsyncHandler, hold: Any) -> None:
    """Runs one event's coroutine and completes its hold with the outcome."""
    event = hold.event
    try:
        await fn(event)
    except Retry as r:
        hold.complete(_RETRY, r.reason, -1 if r.delay_ms is None else r.delay_ms)
    except Reject as r:
        hold.complete(_REJECT, r.reason, -1)
    except asyncio.CancelledError:
        del hold  # not completed: freeing the hold gives the item back to its queue
        raise
    except _Release:
        del hold  # the same, for an event a stream never handed out
    except Exception as e:
        log_failure(fn, event)
        hold.complete(_RETRY, f"{type(e).__name__}: {e}", -1)
    else:
        hold.complete(_ACK, None, -1)


class EventStream:
    """``async for event in stream``: see :meth:`Engine.events`."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._ready: Deque[Tuple[Event, "asyncio.Future[None]"]] = deque()
        self._room: Deque["asyncio.Future[None]"] = deque()  # feeders waiting for room
        self._waiter: Optional["asyncio.Future[None]"] = None  # the consumer waiting
        self._current: Optional["asyncio.Future[None]"] = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<keywatch.aio.EventStream {state}, {len(self._ready)} events ready>"

    async def _feed(self, event: Event) -> None:
        loop = asyncio.get_running_loop()
        while len(self._ready) >= self._maxsize and not self._closed:
            room: "asyncio.Future[None]" = loop.create_future()
            self._room.append(room)
            await room
        if self._closed:
            raise _Release()
        done: "asyncio.Future[None]" = loop.create_future()
        self._ready.append((event, done))
        _wake(self._waiter)
        await done  # the consumer's outcome: None acks, an exception retries

    def _settle(self, error: Optional[BaseException]) -> None:
        if self._current is not None and not self._current.done():
            if error is None:
                self._current.set_result(None)
            else:
                self._current.set_exception(error)
        self._current = None

    def _close(self) -> None:
        self._closed = True
        self._settle(Retry("the stream stopped before the consumer finished the event"))
        while self._ready:
            _, done = self._ready.popleft()
            if not done.done():
                done.set_exception(_Release())
        while self._room:
            _wake(self._room.popleft())
        _wake(self._waiter)

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        self._settle(None)  # the previous event is done: ack it
        while not self._ready:
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event, done = self._ready.popleft()
        while self._room and self._room[0].done():
            self._room.popleft()
        if self._room:
            _wake(self._room.popleft())
        self._current = done
        return event

    def retry(self, reason: str = "", delay: Optional[Duration] = None) -> None:
        """Retry the current event instead of acking it."""
        self._settle(Retry(reason, delay=delay))

    def reject(self, reason: str) -> None:
        """Dead-letter the current event instead of acking it."""
        self._settle(Reject(reason))


def _wake(future: "Optional[asyncio.Future[None]]") -> None:
    if future is not None and not future.done():
        future.set_result(None)
