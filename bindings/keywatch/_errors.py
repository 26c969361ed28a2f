"""keywatch's exceptions: one class per status of the C library's status table.

Every error raised by a call into the library is a :class:`keywatch.Error` whose message is
the library's own (naming what was wrong and what to do). Where a builtin exception means
the same thing, the class derives from it too, so ``except ValueError`` or
``except ConnectionError`` (the builtin) also catch keywatch's.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Type


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
    status, code = -1, "KW_ERR_INVALID_ARG"


class UnknownOption(Error, ValueError):
    status, code = -2, "KW_ERR_UNKNOWN_CONF"


class BadOptionValue(Error, ValueError):
    status, code = -3, "KW_ERR_BAD_VALUE"


class InvalidURL(Error, ValueError):
    status, code = -4, "KW_ERR_URL"


class ConnectionError(Error, builtins.ConnectionError):
    status, code = -5, "KW_ERR_CONNECT"


class AuthenticationError(Error):
    status, code = -6, "KW_ERR_AUTH"


class RedisError(Error):
    status, code = -7, "KW_ERR_REDIS"


class TimeoutError(Error, builtins.TimeoutError):
    status, code = -8, "KW_ERR_TIMEOUT"


class StateError(Error, RuntimeError):
    status, code = -9, "KW_ERR_STATE"


class OutOfMemory(Error, MemoryError):
    status, code = -10, "KW_ERR_NOMEM"


class InternalError(Error):
    status, code = -11, "KW_ERR_INTERNAL"


class ConditionFailed(Error):
    status, code = -12, "KW_ERR_CONDITION"


class NotFound(Error, LookupError):
    status, code = -13, "KW_ERR_NOT_FOUND"


class TooLarge(Error, ValueError):
    status, code = -14, "KW_ERR_TOO_LARGE"


class InFlight(Error):
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


for _cls in (Error, EventCompleted, ForkError, *_BY_STATUS.values()):
    _cls.__module__ = "keywatch"


def error_class(status: int) -> Type[Error]:
    """The exception class of a status code (:class:`Error` for one not in the table)."""
    return _BY_STATUS.get(status, Error)


def from_status(status: int, message: str) -> Error:
    """The exception for a failed call: its class by status, the library's message."""
    return error_class(status)(message, status)
