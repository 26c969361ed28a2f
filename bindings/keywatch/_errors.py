"""keywatch's exceptions: one class per status of the C library's status table.

Every error raised by a call into the library is a :class:`keywatch.Error` whose message is
the library's own (naming what was wrong and what to do), with the C names it gives C
programmers (``kw_client_untrack``, ``KW_TRACK_NX``) replaced by the Python ones
(``untrack(key, delete=True)``, ``nx=True``). Where a builtin exception means the same
thing, the class derives from it too, so ``except ValueError`` or ``except
ConnectionError`` (the builtin) also catch keywatch's. Arguments the Python layer refuses
before calling the library raise :class:`InvalidArgument` too (:class:`InvalidType`, also
a ``TypeError``, for a value of the wrong type), so ``except keywatch.Error`` catches every
refusal keywatch makes.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Tuple, Type


class Error(Exception):
    """Base class of every keywatch error.

    ``status`` is the C library's status code (negative), ``None`` for errors of the Python
    layer itself; ``code`` its name (``"KW_ERR_CONDITION"``).
    """

    status: Optional[int] = None
    code: Optional[str] = None

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgument(Error, ValueError):
    """A bad argument: the message names it and the values it may take. Nothing was
    written."""

    status, code = -1, "KW_ERR_INVALID_ARG"


class InvalidType(InvalidArgument, TypeError):
    """An argument of the wrong type (an :class:`InvalidArgument` that is also a
    ``TypeError``)."""


class UnknownOption(Error, ValueError):
    """An option name the library does not know."""

    status, code = -2, "KW_ERR_UNKNOWN_CONF"


class BadOptionValue(Error, ValueError):
    """An option value the library refuses (the message says which values it takes)."""

    status, code = -3, "KW_ERR_BAD_VALUE"


class InvalidURL(Error, ValueError):
    """A Redis URL that does not parse (the message shows the accepted forms)."""

    status, code = -4, "KW_ERR_URL"


class ConnectionError(Error, builtins.ConnectionError):
    """Redis could not be reached or the connection was lost; also a database the server
    does not have (``SELECT`` refused)."""

    status, code = -5, "KW_ERR_CONNECT"


class AuthenticationError(ConnectionError):
    """Redis refused the password or the ACL user (a :class:`ConnectionError` too, as in
    redis-py)."""

    status, code = -6, "KW_ERR_AUTH"


class RedisError(Error):
    """Redis answered a command with an error."""

    status, code = -7, "KW_ERR_REDIS"


class TimeoutError(Error, builtins.TimeoutError):
    """Redis did not answer in time."""

    status, code = -8, "KW_ERR_TIMEOUT"


class StateError(Error, RuntimeError):
    """A call at the wrong time: a closed client, a handler added after ``start()``,
    ``stop()`` from inside a handler, ..."""

    status, code = -9, "KW_ERR_STATE"


class OutOfMemory(Error, MemoryError):
    """The library ran out of memory."""

    status, code = -10, "KW_ERR_NOMEM"


class InternalError(Error):
    """A failure inside the library (a bug: please report it with the message)."""

    status, code = -11, "KW_ERR_INTERNAL"


class ConditionFailed(Error):
    """``nx``/``xx`` not met: the key (or task) exists, or does not. Nothing was written."""

    status, code = -12, "KW_ERR_CONDITION"


class NotFound(Error, LookupError):
    """No such tracked key, task, queue or dead letter."""

    status, code = -13, "KW_ERR_NOT_FOUND"


class TooLarge(Error, ValueError):
    """A key or value past the ``limits.*`` options."""

    status, code = -14, "KW_ERR_TOO_LARGE"


class InFlight(Error):
    """The task is being handled right now (it cannot be cancelled or moved)."""

    status, code = -15, "KW_ERR_IN_FLIGHT"


class EventCompleted(Error, RuntimeError):
    """An :class:`keywatch.Event` was used after its handler returned."""


class ForkError(Error, RuntimeError):
    """A Client or Engine made before ``os.fork()`` was used in the child."""


_BY_STATUS: Dict[int, Type[Error]] = {
    cls.status: cls
    for cls in (
        InvalidArgument, UnknownOption, BadOptionValue, InvalidURL, ConnectionError,
        AuthenticationError, RedisError, TimeoutError, StateError, OutOfMemory, InternalError,
        ConditionFailed, NotFound, TooLarge, InFlight,
    )
    if cls.status is not None
}


for _cls in (Error, EventCompleted, ForkError, InvalidType, *_BY_STATUS.values()):
    _cls.__module__ = "keywatch"

# The library's words for C programmers, and a Python programmer's for the same thing.
_PYTHON_WORDS: Tuple[Tuple[str, str], ...] = (
    ("(use kw_client_untrack with delete to remove a key now)",
     "(to remove a key now: untrack(key, delete=True))"),
    ("KW_TRACK_NX and KW_TRACK_XX exclude each other", "nx=True and xx=True exclude each other"),
    ("add one with kw_engine_add_handler before kw_engine_start",
     "add one with engine.on(...), add_handler() or add_plugin() before start()"),
    ("use kw_client_track for keys", "use track() for keys"),
    ("or use kw_client_track", "or track it with track()"),
    ("without KW_TRACK_SNAPSHOT", "without snapshot=True"),
    ("before kw_engine_start", "before start()"),
    ("use 0, 1, ... or * for any", "use 0, 1, ... or None for any"),
)


def python_words(message: str) -> str:
    """The library's message with its C names replaced by the Python ones."""
    for c_words, py_words in _PYTHON_WORDS:
        message = message.replace(c_words, py_words)
    return message


def in_context(error: Error, context: str) -> Error:
    """The same error (class, status, code) with ``context`` before its message."""
    copy = type(error)(f"{context}{error}", error.status)
    copy.code = error.code
    return copy


def error_class(status: int) -> Type[Error]:
    """The exception class of a status code (:class:`Error` for one not in the table)."""
    return _BY_STATUS.get(status, Error)


def from_status(status: int, message: str) -> Error:
    """The exception for a failed call: its class by status, the library's message (in
    Python words). A database the server does not have (the library's "SELECT <db>
    failed", a Redis error) is a :class:`ConnectionError`: no connection as configured
    can be made."""
    cls = error_class(status)
    if cls is RedisError and message.startswith("SELECT "):
        cls = ConnectionError
    error = cls(python_words(message), status)
    if cls.status != status:
        error.code = error_class(status).code
    return error
