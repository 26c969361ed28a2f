"""Options and durations: one rule for every duration the package takes (a number is
seconds, a timedelta a duration, a str the library's text), checked option by option
against what the library reads back, and by behaviour where a wrong unit would show."""

from __future__ import annotations

import datetime as dt
import time

import pytest

import keywatch
from keywatch._convert import duration_options
from conftest import wait_for

# Each duration option of the library, read from its own option table (so a new one is
# covered at once).
DURATIONS = sorted(duration_options())
# Options an engine checks against each other: the other one set so that any value tried
# here is allowed.
COMPANIONS = {"retry.max": {"retry.base": "1ms"}, "hold.timeout": {"lease": "100ms"},
              "health.timeout": {"health.interval": "10ms"}}


def test_the_library_has_the_duration_options_this_test_expects():
    assert {"lease", "retry.base", "retry.max", "redis.command_timeout", "stop.timeout",
            "sweep.interval", "hold.timeout", "dedupe.ttl"} <= set(DURATIONS)
    assert "workers" not in DURATIONS and "max_attempts" not in DURATIONS


@pytest.mark.parametrize("name", DURATIONS)
def test_every_duration_option_takes_seconds_timedelta_and_text(name):
    # An engine does not connect before start(): what the library made of each form is
    # read back through its options.
    python_name = name.replace(".", "_", 1)
    others = COMPANIONS.get(name, {})
    for value, expected in [(2, "2000ms"), (2.5, "2500ms"), (dt.timedelta(seconds=3), "3000ms"),
                            ("250ms", "250ms"), ("4s", "4000ms")]:
        engine = keywatch.Engine("redis://127.0.0.1:1", **others, **{python_name: value})
        assert engine.options[name] == expected, (name, value)
        engine.close()
    with pytest.raises(keywatch.BadOptionValue, match=f"{name}=-1 is negative"):
        keywatch.Engine("redis://127.0.0.1:1", **{name: -1})
    with pytest.raises(keywatch.BadOptionValue, match="is not a finite duration"):
        keywatch.Engine("redis://127.0.0.1:1", **{name: float("nan")})
    with pytest.raises(keywatch.InvalidType, match=f"{name} must be seconds as a number"):
        keywatch.Engine("redis://127.0.0.1:1", **{name: [1]})


def test_a_duration_below_the_option_minimum_names_the_option_and_the_minimum():
    with pytest.raises(keywatch.BadOptionValue,
                       match="redis.command_timeout: '5ms' is too short; the minimum is 10ms"):
        keywatch.Engine("redis://127.0.0.1:1", redis_command_timeout=0.005)


def test_numbers_are_never_milliseconds(redis):
    # The defects: redis_command_timeout=5 was 5 ms (refused), lease=0.5 not a duration.
    with keywatch.Client(redis.url, redis_command_timeout=5) as c:
        assert c.options["redis.command_timeout"] == "5000ms"
    engine = keywatch.Engine(redis.url, lease=0.5, hold_timeout=60, workers=2, max_attempts=3)
    assert engine.options["lease"] == "500ms" and engine.options["hold.timeout"] == "60000ms"
    assert engine.options["workers"] == "2" and engine.options["max_attempts"] == "3"
    engine.close()


def test_retry_base_in_seconds_delays_the_retry_by_that_much(redis):
    # retry_base=1 is one second: the backoff of the first retry is in [0.5 s, 1 s]
    # (jitter), never the 0.1 s that 1 taken as milliseconds (with its floor) gave.
    times = []
    engine = keywatch.Engine(redis.url, retry_base=1, sweep_interval=0.02)

    @engine.task("q")
    def handler(event):
        times.append(time.monotonic())
        if event.attempt == 1:
            raise keywatch.Retry("again")

    with engine, keywatch.Client(redis.url) as c:
        c.schedule("q", b"t")
        wait_for(lambda: len(times) == 2, what="the retry")
    assert times[1] - times[0] >= 0.45, times[1] - times[0]


def test_stop_timeout_and_retry_delay_follow_the_same_rule(redis):
    assert keywatch.Retry("x", delay=1).delay_ms == 1000
    assert keywatch.Retry("x", delay="250ms").delay_ms == 250
    assert keywatch.Retry("x", delay=dt.timedelta(milliseconds=1.5)).delay_ms == 2
    with pytest.raises(keywatch.InvalidArgument, match="Retry delay=-1 is negative"):
        keywatch.Retry("x", delay=-1)
    engine = keywatch.Engine(redis.url)
    engine.add_handler(lambda ev: None, "del")
    with engine:
        with pytest.raises(keywatch.InvalidArgument, match="timeout='soon'"):
            engine.stop("soon")
        assert engine.running
        assert engine.stop(0.5) is True


def test_option_values_of_other_kinds_are_the_library_text(redis):
    engine = keywatch.Engine(redis.url, queues=["a", "b"], notify_enable=True, namespace="app")
    assert engine.options["queues"] == "a,b"
    assert engine.options["notify.enable"] == "true" and engine.options["namespace"] == "app"
    engine.close()
    with pytest.raises(keywatch.BadOptionValue, match="max_attempts: '2.5' is not a whole number"):
        keywatch.Engine(redis.url, max_attempts=2.5)
    with pytest.raises(keywatch.UnknownOption, match="leese"):
        keywatch.Engine(redis.url, leese=1)


def test_options_the_engine_checks_together_keep_the_library_message(redis):
    with pytest.raises(keywatch.BadOptionValue, match=r"hold.timeout \(300000ms\) is shorter than "
                                                      r"lease \(600000ms\)"):
        keywatch.Engine(redis.url, lease=600)
