"""keywatch.aio: coroutine handlers and `async for` on deferred completion, and the async
client."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

import keywatch


FAST = dict(sweep_interval="20ms", retry_base="20ms", retry_max="50ms")


async def until(predicate, timeout=20.0, what="condition"):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def client(redis):
    with keywatch.Client(redis.url) as c:
        yield c


def test_coroutine_handlers_ack_retry_and_reject(redis, client, caplog):
    from keywatch import aio

    caplog.set_level(logging.ERROR, logger="keywatch")
    seen = []

    async def main():
        engine = aio.Engine(redis.url, max_attempts=3, **FAST)

        @engine.on("expired", queue="keys")
        async def expired(event):
            await asyncio.sleep(0.01)
            seen.append(("key", event.key, event.value))

        @engine.task("jobs")
        async def job(event):
            seen.append(("job", event.key, event.attempt))
            if event.key == b"flaky" and event.attempt == 1:
                raise RuntimeError("first attempt fails")
            if event.key == b"bad":
                raise keywatch.Reject("bad job")

        async with engine:
            client.track(b"s:\x00", b"v", ttl=0.05, snapshot=True)
            client.schedule("jobs", b"flaky")
            client.schedule("jobs", b"bad")
            await until(lambda: len(seen) == 4 and client.dead_letters("jobs"),
                        what="the key, the retried job and the dead letter")
            await until(lambda: engine.stat("items.acked") == 2, what="two acks")
            # Counted when the script's reply reaches the engine, which may be after Redis
            # shows the dead letter.
            await until(lambda: engine.stat("items.dead") == 1, what="items.dead")

    asyncio.run(main())
    assert ("key", b"s:\x00", b"v") in seen
    assert ("job", b"flaky", 1) in seen and ("job", b"flaky", 2) in seen
    dead = client.dead_letters("jobs")
    assert [d["id"] for d in dead] == ["bad"] and dead[0]["error"] == "bad job"
    assert any("first attempt fails" in (r.exc_text or "") for r in caplog.records)


def test_async_for_pulls_events_and_acks_on_next(redis, client):
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        stream = engine.events("task", queue="pull")
        got = []
        async with engine:
            for i in range(5):
                client.schedule("pull", f"t{i}".encode())
            async for event in stream:
                got.append(event.key)
                if len(got) == 5:
                    break
            stream._settle(None)  # the last one: acked by moving on
            await until(lambda: engine.stat("items.acked") == 5, what="five acks")
        return got

    assert sorted(asyncio.run(main())) == [f"t{i}".encode() for i in range(5)]


def test_unfinished_coroutine_keeps_its_lease(redis, client):
    # The handler takes three leases' time; the item is renewed, not redelivered.
    from keywatch import aio

    calls = []

    async def main():
        engine = aio.Engine(redis.url, lease="1s", **FAST)

        @engine.task("slow")
        async def slow(event):
            calls.append(event.attempt)
            await asyncio.sleep(3)

        async with engine:
            client.schedule("slow", b"s")
            await until(lambda: engine.stat("items.acked") == 1, timeout=30, what="the ack")
            await until(lambda: engine.stat("items.lease_expired") == 0, what="no lease ended")

    asyncio.run(main())
    assert calls == [1]


def test_event_after_completion_raises_and_the_loop_is_not_blocked(redis, client):
    from keywatch import aio

    kept = []

    async def main():
        engine = aio.Engine(redis.url, **FAST)

        @engine.task("q")
        async def handler(event):
            kept.append(event)

        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        async with engine:  # start() connects in a thread: the loop keeps ticking
            client.schedule("q", b"t")
            await until(lambda: kept and engine.stat("items.acked") == 1, what="the ack")
        t.cancel()
        return ticks

    assert asyncio.run(main()) > 0
    with pytest.raises(keywatch.EventCompleted):
        kept[0].key


def test_async_client_pipelines_concurrent_calls(redis):
    import redis as redispy

    from keywatch import aio

    async def main():
        async with aio.Client(redis.url) as client:
            await asyncio.gather(*[client.track(f"a:{i}", b"v", ttl=60) for i in range(500)])
            with pytest.raises(keywatch.ConditionFailed):
                await client.track("a:1", b"v", ttl=60, nx=True)
            with pytest.raises(keywatch.NotFound):
                await client.cancel("q", b"none")
            figures = await client.inspect()
            await client.schedule("q", b"t", delay=60)
            due = await client.reschedule("q", b"t", delay=120)
            return figures, due

    figures, due = asyncio.run(main())
    keys = next(q for q in figures["queues"] if q["queue"] == "keys")
    assert keys["due"] == 500 and due.tzinfo is not None
    assert redispy.Redis(port=redis.port).exists(*[f"a:{i}" for i in range(500)]) == 500


AIO_RUN = """
import asyncio, logging, sys, keywatch
from keywatch import aio
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
engine = aio.Engine(sys.argv[1])

@engine.on("del")
async def handler(event):
    pass

asyncio.run(engine.run())
print("stopped", flush=True)
"""


def test_sigint_stops_async_engine_run(redis, python_child):
    import signal
    import time

    child = python_child(AIO_RUN, redis.url)
    assert child.stdout.readline() == "running until Ctrl-C, SIGTERM or cancellation\n"
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.wait(30)
    elapsed = time.monotonic() - sent
    assert child.returncode == 0, child.stderr.read()
    assert child.stdout.read() == "stopped\n"
    # Not a speed test: a stop that waits out a lease or the 30 s exit timeout fails here,
    # a loaded machine does not.
    assert elapsed < 10.0, f"run() took {elapsed:.2f} s to stop after SIGINT"


def test_interpreter_exit_with_a_held_event_does_not_wait_for_the_loop(redis, python_child):
    # The coroutine never finishes and the loop is gone at exit: the engine is stopped
    # without waiting for the hold (its item goes back to its queue).
    code = """
import asyncio, sys, keywatch
from keywatch import aio

async def main():
    engine = aio.Engine(sys.argv[1], stop_timeout="20s")
    held = asyncio.Event()

    @engine.task("q")
    async def forever(event):
        held.set()
        await asyncio.Event().wait()

    await engine.start()
    with keywatch.Client(sys.argv[1]) as c:
        c.schedule("q", b"t")
    await held.wait()
    print("held", flush=True)
    sys.exit(0)  # leaves with the engine running and the event held

asyncio.run(main())
"""
    import time

    start = time.monotonic()
    child = python_child(code, redis.url)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out == "held\n" and "Fatal" not in err
    assert time.monotonic() - start < 15  # not the 20 s stop_timeout
    with keywatch.Client(redis.url) as c:
        q = [x for x in c.inspect()["queues"] if x["queue"] == "q"]
        assert q and q[0]["due"] + q[0]["inflight"] == 1  # still in Redis


def test_retry_delay_of_an_async_handler_is_honoured(redis, client):
    # retry_base is 20 ms here: a second attempt a second later can only come from the
    # delay the Retry carried.
    from keywatch import aio

    times = []

    async def main():
        loop = asyncio.get_running_loop()
        engine = aio.Engine(redis.url, **FAST)

        @engine.task("later")
        async def later(event):
            times.append((event.attempt, event.max_attempts, event.last_error, loop.time()))
            if event.attempt == 1:
                raise keywatch.Retry("later please", delay=1.0)

        async with engine:
            client.schedule("later", b"t")
            await until(lambda: engine.stat("items.acked") == 1, what="the second attempt")

    asyncio.run(main())
    assert [t[:3] for t in times] == [(1, 5, None), (2, 5, "later please")]
    assert times[1][3] - times[0][3] >= 0.95


def test_event_of_a_failed_async_for_body_is_retried(redis, client):
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        stream = engine.events("task", queue="pull")
        async with engine:
            client.schedule("pull", b"t")
            with pytest.raises(ValueError):
                async for event in stream:
                    assert event.key == b"t"
                    raise ValueError("the consumer failed")
        # The stop retried the event the body left unfinished.
        retried = engine.stat("items.retried")  # direct stat read: after stop() returned
        return retried, engine.stat("items.acked")  # direct stat read: after stop() returned

    assert asyncio.run(main()) == (1, 0)
    due = next(q for q in client.inspect()["queues"] if q["queue"] == "pull")
    assert due["due"] == 1 and due["inflight"] == 0  # back in its queue for a retry


# ---- issue 21: coroutines returned, streams that end, stop inside a handler ----

def test_aio_engine_awaits_what_plain_handlers_return(redis, client):
    # A lambda that calls a coroutine function and an object with `async def __call__`:
    # both are awaited on the loop, and their events acked only once they ran.
    from keywatch import aio

    ran = []

    async def notify(event):
        await asyncio.sleep(0.01)
        ran.append(("lambda", event.key))

    class Notifier:
        async def __call__(self, event):
            ran.append(("object", event.key))

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        engine.on("task", queue="a")(lambda ev: notify(ev))
        engine.add_handler(Notifier(), "task", queue="b")
        async with engine:
            client.schedule("a", b"1")
            client.schedule("b", b"2")
            await until(lambda: engine.stat("items.acked") == 2, what="two acks")
            await until(lambda: engine.stat("items.retried") == 0, what="no retry")

    asyncio.run(main())
    assert sorted(ran) == [("lambda", b"1"), ("object", b"2")]


def test_stop_ends_an_async_for_waiting_for_its_next_event(redis, client):
    # The consumer waits for the next event when the engine stops: the iteration ends
    # (StopAsyncIteration), it does not wait for ever.
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        stream = engine.events("task", queue="pull")
        got = []

        async def consume():
            async for event in stream:
                got.append(event.key)

        async with engine:
            consumer = asyncio.create_task(consume())
            client.schedule("pull", b"t")
            # Acked once the consumer asked for the next event: it waits for it now.
            await until(lambda: got and engine.stat("items.acked") == 1,
                        what="the event, and the consumer waiting for the next")
            stopped = await engine.stop()
            await asyncio.wait_for(consumer, 5)  # ended, not blocked
        return stopped, got, engine

    stopped, got, engine = asyncio.run(main())
    assert stopped is True and got == [b"t"]


def test_stop_gives_back_events_the_stream_had_not_handed_out(redis, client):
    # The consumer holds one event and is not asking for more; a second waits in the
    # stream. Stopping retries the current one and releases the other (not an attempt).
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        stream = engine.events("task", queue="pull")
        release = asyncio.Event()

        async def consume():
            async for event in stream:
                await release.wait()

        async with engine:
            consumer = asyncio.create_task(consume())
            client.schedule("pull", b"t1")
            client.schedule("pull", b"t2")
            await until(lambda: len(stream._ready) == 1 and stream._current is not None,
                        what="one event taken and one waiting")
            await engine.stop()
            release.set()
            await asyncio.wait_for(consumer, 5)
        return engine

    engine = asyncio.run(main())
    # The stop retried the event taken and released the other.
    assert engine.stat("items.retried") == 1  # direct stat read: after stop() returned
    assert engine.stat("items.released") == 1  # direct stat read: after stop() returned
    assert engine.stat("items.acked") == 0  # direct stat read: after stop() returned
    due = next(q for q in client.inspect()["queues"] if q["queue"] == "pull")
    assert due["due"] == 2 and due["inflight"] == 0


def test_stop_awaited_inside_an_async_handler_is_refused_at_once(redis, client):
    # It would wait for itself until stop_timeout (10 s by default): refused, as
    # keywatch.Engine.stop() is inside a handler; a stop started as its own task works.
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url, **FAST)
        outcome = []
        stopper = []

        @engine.task("q")
        async def handler(event):
            try:
                await engine.stop()
            except keywatch.StateError as e:
                outcome.append(str(e))
            stopper.append(asyncio.get_running_loop().create_task(engine.stop()))

        loop = asyncio.get_running_loop()
        await engine.start()
        began = loop.time()
        client.schedule("q", b"t")
        await until(lambda: stopper, what="the handler")
        assert await asyncio.wait_for(stopper[0], 5) is True
        return outcome, loop.time() - began, engine

    outcome, took, engine = asyncio.run(main())
    assert "create_task(engine.stop())" in outcome[0]
    assert took < 5 and not engine.running
    assert engine.stat("items.acked") == 1  # direct stat read: after stop() returned


def test_aio_close_and_repr(redis):
    from keywatch import aio

    async def main():
        engine = aio.Engine(redis.url)
        engine.add_handler(lambda ev: None, "del")
        assert repr(engine) == f"<keywatch.aio.Engine redis://127.0.0.1:{redis.port} new>"
        await engine.start()
        assert repr(engine).endswith(" running>")
        await engine.close()
        await engine.close()
        assert repr(engine).endswith(" closed>")
        with pytest.raises(keywatch.StateError):
            engine.stats()  # direct stat read: refused (closed)
        async with aio.Client(redis.url) as client:
            assert repr(client) == f"<keywatch.aio.Client redis://127.0.0.1:{redis.port} open>"
        assert repr(client).endswith(" closed>")

    asyncio.run(main())


async def outcome_of(coro):
    try:
        await coro
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return type(e), str(e)
    return None


def test_async_client_gives_the_same_outcome_alone_and_gathered(redis):
    # Every call below fails; alone (one by one) or gathered (pipelined by the worker)
    # it must raise the same class with the same message.
    from keywatch import aio

    def calls(c):
        return [
            c.track("k", "v", ttl=-1),
            c.track("", "v", ttl=1),
            c.track("k", "v", ttl=1, nx=True, xx=True),
            c.schedule(b"b q", b"t"),
            c.schedule("keys", b"t"),
            c.cancel("q", b"none"),
            c.untrack("never"),
            c.track(42, "v", ttl=1),  # type: ignore[arg-type]
            c.schedule("q", "t", at=dt.datetime(2030, 1, 1)),
        ]

    async def main():
        async with aio.Client(redis.url) as c:
            alone = [await outcome_of(call) for call in calls(c)]
            gathered = await asyncio.gather(*[outcome_of(call) for call in calls(c)])
            return alone, gathered

    alone, gathered = asyncio.run(main())
    assert alone == list(gathered)
    assert all(o is not None and issubclass(o[0], keywatch.Error) for o in alone), alone
    assert "pipelined" not in str(alone)
    assert alone[1] == (keywatch.InvalidArgument, "the key is empty: give a key of 1 byte or more")
    assert alone[3][0] is keywatch.InvalidArgument and "queue name 'b q'" in alone[3][1]
    assert alone[5] == (keywatch.NotFound, "cancel: no such task")
