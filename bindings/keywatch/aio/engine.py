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
too: they run on the worker threads as in keywatch.Engine.

"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import (Any, Awaitable, Callable, Iterable, List, Mapping, Optional, Set,
                    Tuple, Union)

from .._convert import Bytes, Duration, to_bytes
from ..engine import Engine as _SyncEngine
from ..engine import Reject, Retry
from ..stats import Stats

logger = logging.getLogger("keywatch")


_ACK, _RETRY, _REJECT = 0, 1, 2
AsyncHandler = Callable[[Any], Awaitable[Any]]


class Engine:
    """An engine for asyncio: ``url`` and ``options`` as for keywatch.Engine, plus
    ``max_pending`` (events held for coroutines at once; default 1024)."""

    def __init__(self, url: Optional[str] = None, *, max_pending: int = 1024,
                 **options: Any) -> None:
        self._sync = _SyncEngine(url, **options)
        self._max_pending = max_pending
        self._handlers: List[AsyncHandler] = []
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._streams: List[EventStream] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    # ---- handlers ----
    def add_handler(self, fn: Callable[[Any], Any], events: Union[str, Iterable[str]] = "expired",
                    *, prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                    db: Optional[int] = None, queue: Optional[str] = None) -> None:
        """A coroutine function runs on the loop; a plain function on a worker thread."""
        if not asyncio.iscoroutinefunction(fn):
            self._sync.add_handler(fn, events, prefix=prefix, glob=glob, db=db, queue=queue)
            return
        names = events if isinstance(events, str) else ",".join(events)
        # At interpreter exit no loop is left to complete holds: stop without waiting.
        self._sync._exit_timeout = 0
        self._sync._e.add_async_handler(
            names, None if prefix is None else to_bytes(prefix, "prefix"),
            None if glob is None else to_bytes(glob, "glob"), db, queue, len(self._handlers),
            self._max_pending)
        self._handlers.append(fn)

    def on(self, events: Union[str, Iterable[str]] = "expired", *,
           prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
           db: Optional[int] = None, queue: Optional[str] = None) -> Callable[[Any], Any]:
        """Decorator form of :meth:`add_handler`."""

        def register(fn: Any) -> Any:
            self.add_handler(fn, events, prefix=prefix, glob=glob, db=db, queue=queue)
            return fn

        return register

    def task(self, queue: str) -> Callable[[Any], Any]:
        """Decorator: the handler of the delayed tasks of ``queue``."""
        return self.on("task", queue=queue)

    def add_plugin(self, plugin: str, *, instance: Optional[str] = None,
                   events: Union[str, Iterable[str]] = "expired",
                   prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                   db: Optional[int] = None, queue: Optional[str] = None,
                   options: Optional[Mapping[str, str]] = None) -> None:
        """A handler plugin, as keywatch.Engine.add_plugin (its handler runs on the
        engine's worker threads, not on the loop)."""
        self._sync.add_plugin(plugin, instance=instance, events=events, prefix=prefix,
                              glob=glob, db=db, queue=queue, options=options)

    def events(self, events: Union[str, Iterable[str]] = "expired", *,
               prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
               db: Optional[int] = None, queue: Optional[str] = None,
               maxsize: int = 64) -> "EventStream":
        """An async iterator over the events the filter selects (register before start).
        Each event is acked when the ``async for`` asks for the next one; an event still
        current when the engine stops, or when the loop body raised, is retried."""
        stream = EventStream(maxsize)
        self.add_handler(stream._feed, events, prefix=prefix, glob=glob, db=db, queue=queue)
        self._streams.append(stream)
        return stream

    # ---- life ----
    async def start(self) -> None:
        """Connects and subscribes (in a thread: the loop keeps running)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._sync.start)
        self._loop = loop
        if self._handlers:
            loop.add_reader(self._sync._e.held_fd(), self._drain)

    async def stop(self, timeout: Optional[Duration] = None) -> bool:
        """Stops receiving and waits (in a thread, the loop running the coroutines still
        in progress) for handlers and held events, up to ``timeout``."""
        for stream in self._streams:
            stream._close()
        loop = asyncio.get_running_loop()
        finished = await loop.run_in_executor(None, self._sync.stop, timeout)
        if self._loop is not None and self._handlers:
            self._loop.remove_reader(self._sync._e.held_fd())
        self._loop = None
        self._drain()  # holds queued while stopping are freed: their items go back
        return bool(finished)

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
        return self._sync.stat(name)

    # ---- the loop side ----
    def _drain(self) -> None:
        for handler, hold in self._sync._e.take_holds():
            if self._loop is None:  # stopping: freeing the hold gives the item back
                continue
            task = self._loop.create_task(_complete(self._handlers[handler], hold))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)


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
        del hold  # not completed: freeing it gives the item back to its queue
        raise
    except Exception as e:
        logger.exception("async handler %s raised on %s %r (id %s, attempt %d); it will be "
                         "retried where possible", getattr(fn, "__qualname__", fn), event.name,
                         event.key, event.id, event.attempt)
        hold.complete(_RETRY, f"{type(e).__name__}: {e}", -1)
    else:
        hold.complete(_ACK, None, -1)


class EventStream:
    """``async for event in stream``: see :meth:`Engine.events`."""

    def __init__(self, maxsize: int) -> None:
        self._queue: "asyncio.Queue[Tuple[Any, asyncio.Future[None]]]" = asyncio.Queue(maxsize)
        self._current: Optional["asyncio.Future[None]"] = None
        self._closed = False

    async def _feed(self, event: Any) -> None:
        if self._closed:
            raise Retry("the stream is closed")
        done: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        await self._queue.put((event, done))
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
        while not self._queue.empty():
            _, done = self._queue.get_nowait()
            done.set_exception(Retry("the stream stopped before the consumer took the event"))

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Any:
        self._settle(None)  # the previous event is done: ack it
        if self._closed:
            raise StopAsyncIteration
        event, done = await self._queue.get()
        self._current = done
        return event

    def retry(self, reason: str = "", delay: Optional[Duration] = None) -> None:
        """Retry the current event instead of acking it."""
        self._settle(Retry(reason, delay=delay))

    def reject(self, reason: str) -> None:
        """Dead-letter the current event instead of acking it."""
        self._settle(Reject(reason))
