"""Checked by mypy --strict in test_examples_and_typing.py, never run: the types a user's
code relies on."""

from __future__ import annotations

from typing import Any, Coroutine, assert_type

import keywatch
from keywatch import aio


def stats_are_ints(engine: keywatch.Engine) -> int:
    stats = engine.stats()  # direct stat read: never run (types only)
    lateness = stats.histograms["expiry.lateness.keys"]
    assert_type(lateness, keywatch.Histogram)
    return stats["items.acked"] + 1 + stats.family("queue.acked")["keys"] + lateness.count


def decorators_keep_the_function_type(engine: aio.Engine, sync: keywatch.Engine,
                                      event: keywatch.Event) -> None:
    @engine.on("expired", prefix="session:")
    async def expired(event: keywatch.Event) -> None:
        pass

    @engine.task("emails")
    async def send(event: keywatch.Event) -> int:
        return 1

    @sync.on("expired")
    def plain(event: keywatch.Event) -> str:
        return "done"

    expiring = expired(event)
    sending = send(event)
    assert assert_type(expiring, Coroutine[Any, Any, None]) is not None
    assert assert_type(sending, Coroutine[Any, Any, int]) is not None
    assert_type(plain(event), str)


def adopt_rules_are_patterns_or_mappings() -> keywatch.Engine:
    return keywatch.Engine("redis://127.0.0.1:6379",
                           adopt=["session:", b"cache:*", {"prefix": "cart:", "snapshot": True}],
                           catchup_rate=100_000)
