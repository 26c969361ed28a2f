"""keywatch.Engine: run Python handlers for key expiry, keyspace events and delayed tasks.

Example::

    import keywatch

    engine = keywatch.Engine("redis://127.0.0.1:6379")

    @engine.on("expired", prefix="session:")
    def session_expired(event: keywatch.Event) -> None:
        user = event.key.split(b":", 1)[1]
        ...                        # returning acknowledges the event

    @engine.task("emails")
    def send_email(event: keywatch.Event) -> None:
        if not mail_server_up():
            raise keywatch.Retry("mail server down")   # delivered again later
        if event.value is None:
            raise keywatch.Reject("no payload")        # to the dead letters

    engine.run()                   # until Ctrl-C or SIGTERM

Handlers run on the engine's worker threads (``workers`` option), each call holding the GIL
only while Python runs. A handler that returns acknowledges its event; one that raises
:class:`Retry` or any other exception has it delivered again (tracked keys and tasks; the
traceback is logged), up to ``max_attempts``; :class:`Reject` sends it to the dead-letter
stream at once. Library messages go to the ``logging`` logger ``"keywatch"``.

Thread-safety: configure (handlers) before ``start()``; ``start``/``stop``/``stats`` may be
called from any thread. An engine left running at interpreter exit is stopped by an
``atexit`` hook; an engine made before ``os.fork()`` raises keywatch.ForkError in the child.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import signal
import threading
import weakref
from typing import (Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Tuple, TypeVar, Union)

from . import _keywatch
from ._convert import (AdoptRule, Bytes, Duration, Text, adopt_rules_text, option_name,
                       options_text, to_bytes, to_int, to_ms, to_text)
from ._errors import InvalidArgument, InvalidType, StateError
from .stats import Stats

logger = logging.getLogger("keywatch")

Event = _keywatch.Event

Handler = Callable[[Event], Any]
F = TypeVar("F", bound=Callable[..., Any])

_RESULT_ACK, _RESULT_RETRY, _RESULT_REJECT = 0, 1, 2
_LOG_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}


class Retry(Exception):
    """Raise in a handler to have the event delivered again later: after ``delay`` (a
    timedelta or seconds) when given, else after the engine's ``retry_base``/``retry_max``
    backoff. ``reason`` is the next attempt's ``event.last_error`` (and the dead letter's
    error once ``max_attempts`` is reached)."""

    def __init__(self, reason: str = "", delay: Optional[Duration] = None) -> None:
        super().__init__(reason)
        self.reason = reason or "the handler asked for a retry"
        #: The delay in ms, None for the engine's backoff.
        self.delay_ms = None if delay is None else to_ms(delay, "Retry delay")


class Reject(Exception):
    """Raise in a handler to fail the event for good: a tracked key or task goes to its
    queue's dead-letter stream with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_handler_thread = threading.local()  # .active: this thread is running a handler


Outcome = Union[int, Tuple[int, int, str]]
#: Runs an awaitable a plain handler returned and gives its result (keywatch.aio awaits
#: it on its loop); None: such a handler is an error.
AwaitableRunner = Callable[[Awaitable[Any]], Any]


def handler_name(fn: Callable[..., Any]) -> str:
    """How log lines name a handler: its qualified name, else its repr."""
    return getattr(fn, "__qualname__", None) or repr(fn)


def is_coroutine_handler(fn: Callable[..., Any]) -> bool:
    """True for a coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))


def check_handler(fn: object, sync_only: bool) -> None:
    """Refuses what cannot be a handler: not callable, or (sync_only) a coroutine
    function, which keywatch.Engine's worker threads cannot await."""
    if not callable(fn):
        raise InvalidType(f"handler: {fn!r} is not callable: give a function that takes the "
                          "event")
    if sync_only and is_coroutine_handler(fn):
        raise InvalidType(f"handler: {handler_name(fn)} is a coroutine function: "
                          "keywatch.Engine runs plain functions on its worker threads; use "
                          "keywatch.aio.Engine for coroutine handlers")


def next_step(event: Any) -> str:
    """What becomes of an event whose handler failed, as the log line says it."""
    if event.queue is None:
        return "a live event is delivered once: it is not retried"
    if event.attempt >= event.max_attempts:
        return (f"attempt {event.attempt} of {event.max_attempts} (max_attempts): it is "
                f"dead-lettered to queue {event.queue!r}'s dead-letter stream")
    return f"attempt {event.attempt} of {event.max_attempts}: it will be retried"


def log_failure(fn: Callable[..., Any], event: Any) -> None:
    """Logs a handler's exception (being handled) with its traceback and what follows."""
    logger.exception("handler %s raised on %s %r (id %s); %s", handler_name(fn), event.name,
                     event.key, event.id, next_step(event))


def _returned_awaitable(fn: Callable[..., Any], result: Awaitable[Any]) -> TypeError:
    if inspect.iscoroutine(result):
        result.close()  # never awaited here: no "never awaited" warning either
    return TypeError(f"handler {handler_name(fn)} returned {type(result).__name__} "
                     "(an awaitable) that keywatch.Engine cannot await: the event was not "
                     "handled. Make the handler a plain function, or use keywatch.aio.Engine, "
                     "which awaits what its handlers return")


def _invoker(fn: Handler, run_awaitable: Optional[AwaitableRunner]) -> Callable[[Any], Outcome]:
    """The callable the C++ trampoline runs: the user's handler, its outcome as a result,
    or (RETRY, delay in ms, reason) for a Retry with a delay (the trampoline completes the
    event with that delay). An awaitable returned is awaited by run_awaitable; without
    one it fails the call (retried, logged naming the handler)."""

    def invoke(event: Any) -> Outcome:
        _handler_thread.active = True
        try:
            result = fn(event)
            if inspect.isawaitable(result):
                if run_awaitable is None:
                    raise _returned_awaitable(fn, result)
                run_awaitable(result)
        except Retry as r:
            if r.delay_ms is not None:
                return _RESULT_RETRY, r.delay_ms, r.reason
            event.set_error(r.reason)
            return _RESULT_RETRY
        except Reject as r:
            event.set_error(r.reason)
            return _RESULT_REJECT
        except BaseException as e:  # noqa: B902 - nothing may reach the engine
            log_failure(fn, event)
            event.set_error(f"{type(e).__name__}: {e}")
            return _RESULT_RETRY
        finally:
            _handler_thread.active = False
        return _RESULT_ACK

    return invoke


def filter_args(events: Union[Text, Iterable[Text]], prefix: Optional[Bytes],
                glob: Optional[Bytes], db: Optional[int], queue: Optional[Text]
                ) -> Tuple[str, Optional[bytes], Optional[bytes], Optional[int], Optional[str]]:
    """A handler's filter as the extension takes it; the library checks the values (its
    refusal names the argument and the rule)."""
    if isinstance(events, (str, bytes)):
        names = to_text(events, "events")
    elif isinstance(events, Iterable):
        names = ",".join(to_text(e, "events") for e in events)
    else:
        raise InvalidType(f"events must be an event name, '*' or a list of names, not "
                          f"{type(events).__name__}")
    return (names, None if prefix is None else to_bytes(prefix, "prefix"),
            None if glob is None else to_bytes(glob, "glob"),
            None if db is None else to_int(db, "db", -2**31, 2**31 - 1),
            None if queue is None else to_text(queue, "queue"))


_running: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _stop_running_engines() -> None:
    """Interpreter exit: stop engines still running, before Python can no longer run
    their handlers."""
    for engine in list(_running):
        try:
            engine.stop(engine._exit_timeout)
        except Exception:  # a forked child's engines: nothing to stop here
            pass


class Engine:
    """An engine: ``url`` is a redis:// or unix:// URL (a cluster: any node; Sentinel:
    ``redis+sentinel://host1:26379,host2:26379/MASTERNAME[/db]``); ``options``
    are the library's configuration options (``workers=8``, ``lease=30``,
    ``max_attempts=5``, ``retry_base=1``, ``queues=["emails"]``, ...; a '.' in a name may be
    written '_'; durations: a number is seconds, a timedelta a duration, a str the
    library's text such as "250ms").

    ``adopt`` makes keys other programs write reliable (docs/reliable-delivery.md,
    "Adopted keys"): each rule a pattern (str or bytes: a glob when it has ``*``, ``?`` or
    ``[``, else a prefix) or a mapping with ``prefix``, ``glob`` or ``pattern`` and
    optionally ``queue`` and ``snapshot``; a matching key with a TTL is tracked as if
    ``Client.track`` had written it: ``adopt=["session:", {"glob": "cache:*", "queue":
    "cache"}]``. ``engine.options["adopt.rules"]`` is the library's text of them.

    ``with Engine(...) as engine:`` starts it (register handlers first) and closes it at
    the end of the block."""

    def __init__(self, url: Optional[str] = None, *,
                 adopt: Optional[Sequence[AdoptRule]] = None, **options: Any) -> None:
        texts = options_text(url, options)
        if adopt is not None:
            if "adopt.rules" in map(option_name, options):
                raise InvalidArgument("give adopt= or adopt_rules=, not both")
            texts["adopt.rules"] = adopt_rules_text(adopt)
        self._e = _keywatch.Engine(texts)
        self._e.set_logger(self._log)
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._exit_timeout: Optional[Duration] = None  # stop's timeout at interpreter exit

    @staticmethod
    def _log(level: int, message: str) -> None:
        logger.log(_LOG_LEVELS.get(level, logging.ERROR), "%s", message)

    def __enter__(self) -> "Engine":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if not hasattr(self, "_e"):
            return "<keywatch.Engine not made>"
        return f"<keywatch.Engine {self.options['redis.url']} {self.state}>"

    @property
    def state(self) -> str:
        """``"new"`` (not started yet), ``"running"``, ``"stopped"`` or ``"closed"``."""
        if self._closed:
            return "closed"
        if self._started:
            return "running"
        return "stopped" if self._stop_requested.is_set() else "new"

    @property
    def options(self) -> Mapping[str, str]:
        """The library's options as this engine uses them, as text (passwords, also inside
        ``redis.url``, read ``***``)."""
        result: Mapping[str, str] = self._e.options()
        return result

    def add_handler(self, fn: Handler, events: Union[Text, Iterable[Text]] = "expired", *,
                    prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                    db: Optional[int] = None, queue: Optional[Text] = None) -> None:
        """Runs ``fn(event)`` for the events the filter selects: ``events`` (names, or "*"),
        keys starting with ``prefix`` or matching ``glob`` (bytes or str), ``db``, and
        ``queue`` ("keys" for tracked keys, or a task queue). Before ``start()`` only. A
        coroutine function is refused (keywatch.aio.Engine runs those); a handler that
        returns an awaitable fails that call (logged naming it; the item is retried)."""
        check_handler(fn, sync_only=True)
        self._add(fn, events, prefix, glob, db, queue, None)

    def _add(self, fn: Handler, events: Union[Text, Iterable[Text]], prefix: Optional[Bytes],
             glob: Optional[Bytes], db: Optional[int], queue: Optional[Text],
             run_awaitable: Optional[AwaitableRunner]) -> None:
        self._e.add_handler(*filter_args(events, prefix, glob, db, queue),
                            _invoker(fn, run_awaitable))

    def on(self, events: Union[Text, Iterable[Text]] = "expired", *,
           prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
           db: Optional[int] = None, queue: Optional[Text] = None) -> Callable[[F], F]:
        """Decorator form of :meth:`add_handler`: ``@engine.on("expired", prefix="s:")``.
        The filter is checked here, before any function is given."""
        _keywatch.Engine.check_filter(*filter_args(events, prefix, glob, db, queue))

        def register(fn: F) -> F:
            self.add_handler(fn, events, prefix=prefix, glob=glob, db=db, queue=queue)
            return fn

        return register

    def task(self, queue: Text) -> Callable[[F], F]:
        """Decorator: ``fn(event)`` handles the delayed tasks of ``queue``."""
        return self.on("task", queue=queue)

    def add_plugin(self, plugin: str, *, instance: Optional[str] = None,
                   events: Union[Text, Iterable[Text]] = "expired",
                   prefix: Optional[Bytes] = None, glob: Optional[Bytes] = None,
                   db: Optional[int] = None, queue: Optional[Text] = None,
                   options: Optional[Mapping[str, str]] = None) -> None:
        """Loads a handler plugin (docs/plugins.md) for the events the filter selects (the
        filter arguments of :meth:`add_handler`). ``plugin`` is a path (it contains a '/' or
        ends in '.so') or a name, looked up as ``<name>.so`` in ``$KEYWATCH_PLUGIN_PATH`` and
        then in the plugin directory configured when the package was built (where
        ``cmake --install`` puts the built-ins); ``instance`` names this instance (default: the plugin's
        name; its counters are the statistics ``plugin.<instance>.<counter>``); ``options``
        go to the plugin's init. A refused plugin (not found, not loadable, bad option, ...)
        raises with the library's message and leaves the engine unchanged. Before
        ``start()`` only. Example::

            engine.add_plugin("session_index", prefix="session:",
                              options={"index": "user:{user}:sessions"})
        """
        pairs: List[Tuple[str, str]] = []
        for name, value in (options or {}).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise InvalidType(f"add_plugin option {name!r}={value!r}: option names "
                                  "and values are str (write numbers as text)")
            pairs.append((name, value))
        self._e.add_plugin(to_text(plugin, "plugin"),
                           None if instance is None else to_text(instance, "instance"),
                           *filter_args(events, prefix, glob, db, queue), pairs)

    def start(self) -> None:
        """Connects, subscribes and starts the engine's threads; returns once subscribed.
        Raises keywatch.ConnectionError, AuthenticationError, TimeoutError, ... with the
        library's message. An engine starts once."""
        with self._lock:
            self._e.start()
            self._started = True
            self._stop_requested.clear()
            _running.add(self)

    def stop(self, timeout: Optional[Duration] = None) -> bool:
        """Stops receiving, lets running handlers finish for up to ``timeout`` (seconds, a
        timedelta or the library's text; default: the ``stop_timeout`` option), then stops
        every thread. False if handlers were still running at the deadline. Idempotent;
        releases the GIL while it waits. Not from a handler (it waits for the handlers):
        StateError there."""
        if getattr(_handler_thread, "active", False):
            raise StateError("Engine.stop() cannot run inside a handler: it waits for the "
                             "handlers to finish. Call it from another thread, e.g. "
                             "threading.Thread(target=engine.stop).start()", -9)
        timeout_ms = -1 if timeout is None else to_ms(timeout, "timeout")
        self._stop_requested.set()
        with self._lock:
            if not self._started:
                return True
            finished = bool(self._e.stop(timeout_ms))
            self._started = False
            _running.discard(self)
            return finished

    def close(self) -> None:
        """Stops the engine if running, then frees it. Idempotent."""
        self.stop()
        self._closed = True
        self._e.close()

    @property
    def running(self) -> bool:
        """True between a successful ``start()`` and ``stop()``."""
        return self._started

    def run(self) -> None:
        """Starts the engine (unless started) and blocks until Ctrl-C (SIGINT), SIGTERM or
        ``stop()`` from another thread, then stops it. Logs "running" (INFO) once it waits."""
        # On the main thread the signals only set a flag, polled below: a KeyboardInterrupt
        # raised inside threading.Event.wait() can leave the event's lock held, and the
        # stop() that follows would then wait on it for ever.
        signalled: List[int] = []
        previous: Dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda signum, _: signalled.append(signum))
        try:
            if not self._started:
                self.start()
            logger.info("running until Ctrl-C, SIGTERM or stop()")
            while not signalled and not self._stop_requested.wait(0.2):
                pass
            if signal.SIGINT in signalled:
                logger.info("Ctrl-C: stopping")
        except KeyboardInterrupt:
            logger.info("Ctrl-C: stopping")
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stop()

    def stats(self) -> Stats:
        """Every statistic of the engine (the table in keywatch.h) from one snapshot: a
        dict of ints by sample name (a histogram's entry is its count; the histogram itself
        is in ``histograms``), with ``samples`` (type, unit, help, label of each) and
        ``family("queue.acked")`` (a labelled family by label value). See
        :mod:`keywatch.stats`. Any thread."""
        return Stats(self._e.stats())

    def stat(self, name: str) -> int:
        """One statistic by name, e.g. ``"items.acked"`` (a histogram: its count)."""
        return int(self._e.stat(to_text(name, "name")))
