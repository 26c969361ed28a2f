"""Conversions at the edge between Python values and the C library's: bytes, text,
durations in milliseconds, times as milliseconds since the Unix epoch, option values as
text. Each refuses what it cannot convert with :class:`keywatch.InvalidArgument` (or
:class:`keywatch.InvalidType`) naming the argument and the values it takes.

Durations follow one rule everywhere (``ttl=``, ``delay=``, ``Retry(delay=)``,
``stop(timeout=)`` and every duration option): a number (int or float) is seconds, a
``datetime.timedelta`` is a duration, and a string is the library's text (``"250ms"``,
``"30s"``, ``"5m"``), read by the library's own parser."""

from __future__ import annotations

import datetime as _dt
import math
import time
from typing import (Dict, FrozenSet, Iterable, Mapping, Optional, Sequence, Tuple, Union,
                    cast)

from . import _keywatch
from ._errors import BadOptionValue, Error, InvalidArgument, InvalidType

Bytes = Union[bytes, bytearray, memoryview, str]
Text = Union[str, bytes]
Duration = Union[_dt.timedelta, int, float, str]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
#: KW_MAX_TIME_MS: the latest time keywatch accepts, 9999-12-31T23:59:59.999Z.
MAX_TIME_MS = 253402300799999
_MAX_TIME_ISO = "9999-12-31T23:59:59.999Z"
_TWO_CENTURIES_S = 200 * 365 * 86400
_DURATION_FORMS = ("seconds as a number, a datetime.timedelta, or the library's text "
                   "such as '250ms' or '30s'")


def to_bytes(value: Bytes, what: str) -> bytes:
    """bytes as they are; str encoded as UTF-8."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidType(f"{what} must be bytes or str, not {type(value).__name__}")


def to_text(value: object, what: str) -> str:
    """A name the library takes as text (a queue, event names): str, or UTF-8 bytes; no
    NUL character."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument(f"{what}={value!r} is not UTF-8: give a str") from None
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise InvalidArgument(f"{what}={value!r} contains a NUL character")
    return value


def to_int(value: object, what: str, lowest: int, highest: int) -> int:
    """A whole number from lowest to highest (bool refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{what} must be an int from {lowest} to {highest}, "
                          f"not {type(value).__name__}")
    if not lowest <= value <= highest:
        raise InvalidArgument(f"{what}={value!r} is out of range: give {lowest} to {highest}")
    return value


def to_ms(duration: Duration, what: str) -> int:
    """A duration (the rule above) as whole milliseconds (rounded), 0 or more and ending
    by 9999-12-31T23:59:59.999Z."""
    if isinstance(duration, str):
        try:
            return int(_keywatch.duration_ms(duration))
        except Error as e:
            raise InvalidArgument(f"{what}={duration!r}: {e}") from None
    if isinstance(duration, _dt.timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
        seconds = duration
    else:
        raise InvalidType(f"{what} must be {_DURATION_FORMS}, not {type(duration).__name__}")
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise InvalidArgument(f"{what}={duration!r} is not a finite duration: give "
                              f"{_DURATION_FORMS}")
    if seconds < 0:
        raise InvalidArgument(f"{what}={duration!r} is negative: give a duration of 0 or more "
                              f"({_DURATION_FORMS})")
    # Below 200 years no duration can end after the latest time: skip the clock then.
    if seconds > _TWO_CENTURIES_S and seconds * 1000 > MAX_TIME_MS - int(time.time() * 1000):
        raise InvalidArgument(f"{what}={duration!r} from now ends after {_MAX_TIME_ISO}, the "
                              "latest deadline keywatch accepts: give a shorter duration")
    if isinstance(seconds, int):
        return seconds * 1000
    return int(round(seconds * 1000))


def to_epoch_ms(when: _dt.datetime, what: str) -> int:
    """An aware datetime as ms since the Unix epoch, from 1970 on. Naive datetimes are
    refused: their time zone would be a guess."""
    if not isinstance(when, _dt.datetime):
        raise InvalidType(f"{what} must be a datetime.datetime, not {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidArgument(
            f"{what}={when.isoformat()} is a naive datetime: give it a time zone, "
            "e.g. datetime.now(timezone.utc)"
        )
    ms = (when - _EPOCH) // _dt.timedelta(milliseconds=1)
    if not 0 < ms <= MAX_TIME_MS:
        raise InvalidArgument(f"{what}={when.isoformat()} is out of range: give a time after "
                              f"1970-01-01T00:00:00Z and by {_MAX_TIME_ISO}")
    return ms


def from_epoch_ms(ms: int) -> Optional[_dt.datetime]:
    """ms since the epoch as an aware UTC datetime; None for 0 (unknown)."""
    if ms == 0:
        return None
    return _EPOCH + _dt.timedelta(milliseconds=ms)


def when_ms(at: Optional[_dt.datetime], delay: Optional[Duration]) -> Tuple[int, int]:
    """(at_ms, delay_ms) of the C API from at= or delay= (neither: now)."""
    if at is not None and delay is not None:
        raise InvalidArgument("give at= or delay=, not both")
    if at is not None:
        return to_epoch_ms(at, "at"), 0
    return 0, 0 if delay is None else to_ms(delay, "delay")


# ---- options ----

_defaults: Optional[Dict[str, str]] = None
_durations: FrozenSet[str] = frozenset()


def _option_table() -> Dict[str, str]:
    """Every option the library knows, with its default (kw_conf_dump); read once. A
    duration option reads back as "<n>ms" (the only kind that does)."""
    global _defaults, _durations
    if _defaults is None:
        table: Dict[str, str] = dict(_keywatch.option_defaults())
        _durations = frozenset(n for n, d in table.items()
                               if d.endswith("ms") and d[:-2].isdigit())
        _defaults = table
    return _defaults


def duration_options() -> FrozenSet[str]:
    """The names of the library's duration options."""
    _option_table()
    return _durations


def option_name(name: str) -> str:
    """The library's name of an option: as given, or with '_' for its first '.'
    (``retry_base`` is ``retry.base``, ``dispatch_queue_size`` is ``dispatch.queue_size``).
    A name the library does not know is returned as given (the library refuses it)."""
    table = _option_table()
    if name in table or "_" not in name:
        return name
    dotted = name.replace("_", ".", 1)
    return dotted if dotted in table else name


def option_text(name: str, value: object) -> str:
    """An option value as the library's text: durations by the rule above, booleans as
    true/false, lists (queues) comma-separated, numbers and strings as they are."""
    if name in duration_options() and not isinstance(value, str):
        try:
            return f"{to_ms(cast(Duration, value), name)}ms"
        except InvalidType:
            raise
        except InvalidArgument as e:
            raise BadOptionValue(str(e)) from None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, Iterable):
        return ",".join(to_text(v, name) for v in value)
    raise InvalidType(f"option {name}: cannot use a {type(value).__name__} as its value")


def options_text(url: Optional[str], options: Mapping[str, object]) -> Dict[str, str]:
    """Keyword options (plus the URL as redis.url) as the library's name/value texts."""
    out = {}
    for given, value in options.items():
        name = option_name(given)
        out[name] = option_text(name, value)
    if url is not None:
        if not isinstance(url, str):
            raise InvalidType(f"url must be a str, not {type(url).__name__}")
        out["redis.url"] = url
    return out


# ---- adopt rules ----

#: One adopt rule: a pattern (str or bytes), or a mapping of the rule's fields.
AdoptRule = Union[str, bytes, Mapping[str, object]]
_KEY_FIELDS = ("prefix", "glob", "pattern")


def _rule_value(value: bytes) -> str:
    """Field bytes as adopt.rules text: printable ASCII as it is, every other byte and
    \\ ; = space as \\xNN (the library's rule grammar reads them back)."""
    return "".join(chr(b) if 0x21 <= b <= 0x7e and b not in b"\\;=" else f"\\x{b:02x}"
                   for b in value)


def _rule_field(name: object, value: object, where: str) -> str:
    """One field of a mapping rule as name=value text. The library checks the names and
    the rule as a whole (its message names the field and lists the valid ones)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidArgument(f"{where}: field {name!r} is not a field name: use prefix, glob, "
                              "pattern, db, queue or snapshot")
    if name in _KEY_FIELDS:
        text = _rule_value(to_bytes(cast(Bytes, value), f"{where} {name}"))
    elif name == "snapshot":
        if not isinstance(value, bool):
            raise InvalidType(f"{where} snapshot must be True or False, not "
                              f"{type(value).__name__}")
        text = "true" if value else "false"
    elif name == "db":
        text = str(to_int(value, f"{where} db", 0, 2**31 - 1))
    else:
        text = _rule_value(to_text(value, f"{where} {name}").encode("utf-8"))
    return f"{name}={text}"


def adopt_rules_text(rules: Sequence[AdoptRule]) -> str:
    """``Engine(adopt=[...])`` as the library's ``adopt.rules`` text: each item a pattern
    (str or bytes: a glob when it has ``*``, ``?`` or ``[``, else a prefix, as the library
    decides) or a mapping with one of prefix/glob/pattern and db, queue, snapshot."""
    if isinstance(rules, (str, bytes, bytearray, memoryview, Mapping)) or \
            not isinstance(rules, Iterable):
        raise InvalidType("adopt must be a list of rules (patterns, or mappings with prefix, "
                          f"glob or pattern), not {type(rules).__name__}")
    texts = []
    for n, rule in enumerate(rules, 1):
        where = f"adopt rule {n}"
        if isinstance(rule, Mapping):
            texts.append(" ".join(_rule_field(k, v, where) for k, v in rule.items()))
        elif isinstance(rule, (str, bytes, bytearray, memoryview)):
            texts.append("pattern=" + _rule_value(to_bytes(rule, where)))
        else:
            raise InvalidType(f"{where} must be a pattern (str or bytes) or a mapping of its "
                              f"fields, not {type(rule).__name__}")
    return ";".join(texts)
