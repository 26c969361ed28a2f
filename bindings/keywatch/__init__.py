"""keywatch: reliable Redis key expiry and delayed tasks, on keywatch's C engine.

- :class:`Client` tracks keys (``track``), schedules delayed tasks (``schedule``) and
  administers the queues (``inspect``, ``dead_letters``, ``replay``, ``purge``).
- :class:`Engine` runs your handlers for expired keys, keyspace events and tasks.
- Errors are :class:`Error` subclasses, one per status of the library (``ConnectionError``,
  ``ConditionFailed``, ``NotFound``, ...), each with the library's message.

Keys and values are ``bytes`` (``str`` is accepted and encoded as UTF-8); durations are
seconds (int or float), a ``datetime.timedelta``, or the library's text (``"250ms"``);
times are aware ``datetime`` objects.
"""

from . import _keywatch
from ._errors import (AuthenticationError, BadOptionValue, ConditionFailed, ConnectionError,
                      Error, EventCompleted, ForkError, InFlight, InternalError, InvalidArgument,
                      InvalidType, InvalidURL, NotFound, OutOfMemory, RedisError, StateError,
                      TimeoutError, TooLarge, UnknownOption)
from .client import Client, Pipeline
from .engine import Engine, Event, Reject, Retry
from .stats import Histogram, Sample, Stats

#: The version of keywatch this package was built from (include/keywatch_types.h).
__version__: str = _keywatch.__version__


def library_version() -> str:
    """The version of the libkeywatch actually loaded."""
    return _keywatch.library_version()


__all__ = [
    "AuthenticationError", "BadOptionValue", "Client", "ConditionFailed", "ConnectionError",
    "Engine", "Error", "Event", "EventCompleted", "ForkError", "Histogram", "InFlight",
    "InternalError", "InvalidArgument", "InvalidType", "InvalidURL", "NotFound", "OutOfMemory",
    "Pipeline", "RedisError", "Reject", "Retry", "Sample", "StateError", "Stats",
    "TimeoutError", "TooLarge", "UnknownOption",
    "__version__", "library_version",
]
