"""Conversions at the edge between Python values and the C library's: bytes, durations in
milliseconds, times as milliseconds since the Unix epoch, option values as text."""

from __future__ import annotations

import datetime as _dt
from typing import Dict, Iterable, Mapping, Optional, Union

Bytes = Union[bytes, bytearray, memoryview, str]
Duration = Union[_dt.timedelta, int, float]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_bytes(value: Bytes, what: str) -> bytes:
    """bytes as they are; str encoded as UTF-8."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def to_ms(duration: Duration, what: str) -> int:
    """A timedelta or a number of seconds, as whole milliseconds (rounded)."""
    if isinstance(duration, _dt.timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
        seconds = float(duration)
    else:
        raise TypeError(
            f"{what} must be a datetime.timedelta or a number of seconds, "
            f"not {type(duration).__name__}"
        )
    return int(round(seconds * 1000))


def to_epoch_ms(when: _dt.datetime, what: str) -> int:
    """An aware datetime as ms since the Unix epoch. Naive datetimes are refused: their
    time zone would be a guess."""
    if not isinstance(when, _dt.datetime):
        raise TypeError(f"{what} must be a datetime.datetime, not {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(
            f"{what} is a naive datetime ({when.isoformat()}): give it a time zone, "
            "e.g. datetime.now(timezone.utc)"
        )
    return (when - _EPOCH) // _dt.timedelta(milliseconds=1)


def from_epoch_ms(ms: int) -> Optional[_dt.datetime]:
    """ms since the epoch as an aware UTC datetime; None for 0 (unknown)."""
    if ms == 0:
        return None
    return _EPOCH + _dt.timedelta(milliseconds=ms)


def option_text(name: str, value: object) -> str:
    """An option value as the library's text: durations as "Nms", booleans as true/false,
    lists (queues) comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.timedelta):
        return f"{to_ms(value, name)}ms"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in value)
    raise TypeError(f"option {name}: cannot use a {type(value).__name__} as its value")


def options_text(url: Optional[str], options: Mapping[str, object]) -> Dict[str, str]:
    """Keyword options (plus the URL as redis.url) as the library's name/value texts."""
    out = {name: option_text(name, value) for name, value in options.items()}
    if url is not None:
        out["redis.url"] = url
    return out
