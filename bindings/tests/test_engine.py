"""keywatch.Engine against a real redis-server: handlers of each kind, retry -> dead
letter -> replay, reject, events after completion, stats, logging, filters."""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time

import pytest
import redis as redispy

import keywatch
from conftest import wait_for, wait_stat

FAST = dict(sweep_interval="20ms", retry_base="20ms", retry_max="50ms", lease="5s")


@pytest.fixture
def client(redis):
    with keywatch.Client(redis.url) as c:
        yield c


def started(redis, setup, **options):
    engine = keywatch.Engine(redis.url, **{**FAST, **options})
    setup(engine)
    engine.start()
    return engine


def test_tracked_key_expiry_reaches_a_decorated_handler_with_every_field(redis, client):
    seen = []
    engine = keywatch.Engine(redis.url, **FAST)

    @engine.on("expired", prefix="session:")
    def expired(event):
        seen.append(dict(name=event.name, key=event.key, value=event.value, db=event.db,
                         deadline=event.deadline, attempt=event.attempt,
                         max_attempts=event.max_attempts, last_error=event.last_error,
                         source=event.source, queue=event.queue, id=event.id, node=event.node))

    engine.start()
    try:
        deadline = client.track(b"session:\x00alice", b"\xffdata", ttl=0.2, snapshot=True)
        wait_for(lambda: seen, what="the expired event")
        wait_stat(engine, "items.acked", lambda n: n >= 1)
    finally:
        engine.stop()
    e = seen[0]
    assert e["name"] == "expired" and e["key"] == b"session:\x00alice"
    assert e["value"] == b"\xffdata" and e["db"] == 0
    assert e["deadline"] == deadline and e["deadline"].tzinfo is not None
    assert e["attempt"] == 1 and e["max_attempts"] == 5 and e["last_error"] is None
    assert e["source"] in ("sweep", "notification") and e["queue"] == "keys"
    assert e["id"].startswith("q:keys:") and e["node"] == f"127.0.0.1:{redis.port}"


def test_task_handler_and_add_handler(redis, client):
    got = []
    engine = keywatch.Engine(redis.url, **FAST)

    @engine.task("emails")
    def send(event):
        got.append((event.name, event.key, event.value, event.queue))

    engine.add_handler(
        lambda ev: got.append(("live", ev.name, ev.key, ev.max_attempts, ev.last_error)), "del")
    engine.start()
    try:
        client.schedule("emails", b"welcome:1", b'{"to":"a"}', delay=dt.timedelta(milliseconds=50))
        redispy.Redis(port=redis.port).set(b"x", b"1")
        redispy.Redis(port=redis.port).delete(b"x")
        wait_for(lambda: len(got) == 2, what="the task and the del event")
    finally:
        engine.stop()
    assert ("task", b"welcome:1", b'{"to":"a"}', "emails") in got
    assert ("live", "del", b"x", 1, None) in got  # live events are delivered once


def test_retry_then_dead_letter_then_replay(redis, client, caplog):
    attempts = []
    fail = threading.Event()
    fail.set()

    errors, maxima = [], []

    def setup(engine):
        @engine.task("jobs")
        def job(event):
            attempts.append(event.attempt)
            errors.append(event.last_error)
            maxima.append(event.max_attempts)
            if fail.is_set():
                if event.attempt == 1:
                    raise keywatch.Retry("not yet", delay=0.01)
                raise ValueError("boom")  # any exception retries too, traceback logged

    caplog.set_level(logging.ERROR, logger="keywatch")
    engine = started(redis, setup, max_attempts=2)
    try:
        client.schedule("jobs", b"j1", b"payload")
        wait_for(lambda: client.dead_letters("jobs"), what="the dead letter")
        dead = client.dead_letters("jobs")
        assert len(dead) == 1 and dead[0]["id"] == "j1" and dead[0]["payload"] == "payload"
        assert dead[0]["attempts"] == 2 and "ValueError: boom" in dead[0]["error"]
        assert attempts == [1, 2] and maxima == [2, 2]
        assert errors == [None, "not yet"]  # the Retry's reason, seen by attempt 2
        assert any("ValueError: boom" in r.exc_text for r in caplog.records if r.exc_text)
        fail.clear()
        assert client.replay("jobs", dead[0]["entry"]) == 1
        wait_for(lambda: len(attempts) == 3, what="the replayed task")
        assert attempts[2] == 1  # attempts reset by replay
        assert errors[2] is None  # a replayed dead letter starts afresh
        wait_stat(engine, "items.acked", 1)
        assert client.dead_letters("jobs") == []
    finally:
        engine.stop()


def test_retry_delay_is_honoured_and_reasons_reach_the_next_attempt(redis, client):
    # retry_base is 20 ms here: a second attempt a second later can only come from the
    # delay the Retry carried. The third attempt is the engine's backoff again, after an
    # exception whose text is the next attempt's last_error.
    seen = []

    def setup(engine):
        @engine.on("expired", queue="keys")
        def later(event):
            seen.append((event.attempt, event.max_attempts, event.last_error, time.monotonic()))
            if event.attempt == 1:
                raise keywatch.Retry("later please", delay=dt.timedelta(seconds=1))
            if event.attempt == 2:
                raise KeyError("gone")

    engine = started(redis, setup, max_attempts=4)
    try:
        client.track(b"r:\x00", b"v", ttl=0.05)
        wait_stat(engine, "items.acked", 1)
        wait_stat(engine, "items.retried", 2)
        wait_stat(engine, "handler.retries", 2)
        wait_stat(engine, "queue.retried.keys", 2)
        wait_stat(engine, "queue.acked.keys", 1)
    finally:
        engine.stop()
    assert [(a, m, e) for a, m, e, _ in seen] == [
        (1, 4, None), (2, 4, "later please"), (3, 4, "KeyError: 'gone'")]
    assert seen[1][3] - seen[0][3] >= 0.95


def test_retry_delay_beyond_the_latest_time_is_refused_before_the_handler_runs():
    with pytest.raises(keywatch.InvalidArgument):
        keywatch.Retry("never", delay=dt.timedelta(days=4_000_000))


def test_reject_dead_letters_at_once_and_purge(redis, client):
    def setup(engine):
        engine.add_handler(lambda ev: (_ for _ in ()).throw(keywatch.Reject("bad payload")),
                           "task", queue="jobs")

    engine = started(redis, setup)
    try:
        client.schedule("jobs", b"j2", b"\xff\x00")
        wait_for(lambda: client.dead_letters("jobs"), what="the dead letter")
        dead = client.dead_letters("jobs")
        assert dead[0]["attempts"] == 1 and dead[0]["error"] == "bad payload"
        assert dead[0]["payload_b64"] == "/wA="
        assert client.purge("jobs") == 1 and client.dead_letters("jobs") == []
        # Counted when the script's reply reaches the engine, which may be after Redis shows it.
        wait_stat(engine, "items.dead", 1)
    finally:
        engine.stop()


def test_event_used_after_completion_raises(redis, client):
    kept = []

    def setup(engine):
        engine.add_handler(kept.append, "task", queue="q")

    engine = started(redis, setup)
    try:
        client.schedule("q", b"t", b"p")
        wait_for(lambda: kept, what="the task")
    finally:
        engine.stop()
    event = kept[0]
    assert event.completed
    with pytest.raises(keywatch.EventCompleted, match="inside the handler"):
        event.key
    with pytest.raises(keywatch.EventCompleted):
        event.set_error("late")
    assert "completed" in repr(event)


def test_handler_exception_is_logged_and_retried(redis, client, caplog):
    calls = []

    def setup(engine):
        @engine.on("expired")
        def flaky(event):
            calls.append(event.attempt)
            if event.attempt == 1:
                raise RuntimeError("first time fails")

    caplog.set_level(logging.ERROR, logger="keywatch")
    engine = started(redis, setup)
    try:
        client.track(b"k", b"v", ttl=0.1)
        wait_for(lambda: calls == [1, 2], what="the retry")
        wait_stat(engine, "items.acked", 1)
        wait_stat(engine, "items.retried", 1)
    finally:
        engine.stop()
    assert any("first time fails" in (r.exc_text or "") for r in caplog.records)


def test_library_logs_go_to_the_keywatch_logger(redis, caplog):
    # With keyspace notifications off, the engine warns at start (it does not fix the
    # setting unless notify_enable): that warning arrives through `logging`.
    redis.command("CONFIG", "SET", "notify-keyspace-events", "")
    caplog.set_level(logging.DEBUG, logger="keywatch")
    engine = keywatch.Engine(redis.url)
    engine.add_handler(lambda ev: None)
    engine.start()
    engine.stop()
    warnings = [r for r in caplog.records if r.name == "keywatch" and r.levelno == logging.WARNING]
    assert any("notify-keyspace-events" in r.getMessage() for r in warnings)


def test_failed_start_raises_with_the_library_message():
    engine = keywatch.Engine("redis://127.0.0.1:1", redis_connect_timeout="200ms")
    engine.add_handler(lambda ev: None)
    with pytest.raises((keywatch.ConnectionError, keywatch.TimeoutError)) as e:
        engine.start()
    assert "127.0.0.1:1" in str(e.value)
    assert not engine.running
    engine.close()


def test_handlers_only_before_start_and_coroutines_refused(redis):
    engine = keywatch.Engine(redis.url)

    async def coro(event):
        pass

    with pytest.raises(keywatch.InvalidType, match="coroutine"):
        engine.add_handler(coro)
    engine.add_handler(lambda ev: None)
    engine.start()
    try:
        with pytest.raises(keywatch.StateError, match="before the engine starts"):
            engine.add_handler(lambda ev: None)
    finally:
        assert engine.stop() is True
    assert engine.stop() is True  # idempotent


def test_bad_filter_and_option_name_the_problem(redis):
    engine = keywatch.Engine(redis.url)
    with pytest.raises(keywatch.InvalidArgument, match="filter db '-5'"):
        engine.add_handler(lambda ev: None, "expired", db=-5)
    with pytest.raises(keywatch.UnknownOption, match="bogus"):
        keywatch.Engine(redis.url, bogus=True)


def test_stats_is_a_dict_of_counters(redis):
    engine = keywatch.Engine(redis.url)
    engine.add_handler(lambda ev: None)
    engine.start()
    try:
        wait_stat(engine, "conn.nodes", 1)
        stats = engine.stats()  # direct stat read: its type and names
        assert isinstance(stats, dict) and "conn.nodes" in stats and "events.received" in stats
        with pytest.raises(keywatch.InvalidArgument, match="no.such"):
            engine.stat("no.such")  # direct stat read: refused (no such statistic)
    finally:
        engine.close()
    with pytest.raises(keywatch.StateError):
        engine.stats()  # direct stat read: refused (closed)


def test_stats_after_real_events_have_labelled_samples_and_histograms(redis, client):
    def setup(engine):
        @engine.on("expired", queue="keys")  # handler 0
        def keys(event):
            pass

        @engine.task("emails")  # handler 1
        def emails(event):
            if event.attempt == 1:
                raise keywatch.Retry("again")

    engine = started(redis, setup)
    try:
        for i in range(3):
            client.track(f"s:{i}", b"", ttl=0.05)
        client.schedule("emails", b"e1")
        wait_stat(engine, "items.acked", 4)
        node = f"127.0.0.1:{redis.port}"
        wait_stat(engine, f"node.state.{node}", 2)  # READY
        running = engine.stats()  # direct stat read: the family's labels, its value waited
        assert running.family("node.state") == {node: 2}
    finally:
        engine.stop()
    stats = engine.stats()  # direct stat read: after stop() returned, so stat() must agree
    assert isinstance(stats, dict) and isinstance(stats, keywatch.Stats)
    assert stats["items.acked"] == 4 and stats["items.retried"] == 1
    assert stats["queue.acked.keys"] == 3
    assert stats.family("queue.acked") == {"keys": 3, "emails": 1}
    assert stats.family("queue.retried.<queue>") == {"keys": 0, "emails": 1}
    assert stats.family("handler.calls") == {"0": 3, "1": 2}
    assert stats.family("handler.errors") == {"0": 0, "1": 1}
    assert stats.family("no.such") == {}

    duration = stats.histograms["handler.duration.1"]
    assert isinstance(duration, keywatch.Histogram) and duration.count == 2
    assert stats["handler.duration.1"] == 2  # the dict's entry: its count
    bounds, counts = [b for b, _ in duration.buckets], [c for _, c in duration.buckets]
    assert bounds == sorted(bounds) and bounds[-1] == math.inf and len(bounds) > 2
    assert counts == sorted(counts) and counts[-1] == 2 and duration.sum >= 0
    lateness = stats.family("expiry.lateness")  # first deliveries only (counts)
    assert lateness == {"keys": 3, "emails": 1}
    assert stats.histograms["expiry.lateness.keys"].count == 3

    sample = next(s for s in stats.samples if s.name == "queue.acked.keys")
    assert (sample.row, sample.type, sample.unit, sample.label, sample.label_value) == (
        "queue.acked.<queue>", "counter", "items", "queue", "keys")
    assert sample.help and sample.value == 3
    assert {s.type for s in stats.samples} == {"counter", "gauge", "histogram"}
    assert len(stats) == len(stats.samples)  # sample names are unique
    for s in stats.samples:
        expected = s.value.count if isinstance(s.value, keywatch.Histogram) else s.value
        assert engine.stat(s.name) == expected, s.name  # direct stat read: after stop()


def test_run_returns_when_stopped_from_another_thread(redis):
    engine = keywatch.Engine(redis.url)
    engine.add_handler(lambda ev: None)
    threading.Timer(0.3, engine.stop).start()
    engine.run()
    assert not engine.running


def test_stop_waits_for_a_running_handler_without_deadlocking_on_the_gil(redis, client):
    # The handler needs the GIL to finish while stop() joins the workers: stop must have
    # released it.
    entered, finished = threading.Event(), []

    def setup(engine):
        @engine.task("slow")
        def slow(event):
            entered.set()
            import time
            time.sleep(0.3)
            finished.append(event.key)

    engine = started(redis, setup)
    client.schedule("slow", b"s", b"")
    assert entered.wait(20)
    assert engine.stop() is True
    assert finished == [b"s"]


def test_slow_handler_leaves_tracked_keys_in_redis(redis, client):
    # Backpressure: with the one worker stuck, the engine's memory holds no more events
    # than its dispatch queue; the due keys stay in Redis (waiting, or claimed under a
    # lease), none is lost, and all are handled once the handler moves again.
    # Keyspace notifications are off here: this is the sweeper's bound. (Live `expired`
    # notifications of tracked keys are claimed past the queue's bound in this release:
    # see the report of issue 14; that path belongs to the engine's hot path.)
    redis.command("CONFIG", "SET", "notify-keyspace-events", "")
    release, handled = threading.Event(), set()

    def setup(engine):
        @engine.on("expired", queue="keys")
        def slow(event):
            release.wait(60)
            handled.add(event.key)

    engine = started(redis, setup, workers=1, dispatch_queue_size=16)
    try:
        with client.pipeline() as p:
            for i in range(500):
                p.track(f"bp:{i}", b"", ttl=0.05)
        wait_stat(engine, "items.claimed", lambda n: n >= 1)
        for _ in range(10):
            assert engine.stat("dispatch.queued") <= 16  # direct stat read: a bound, sampled
            keys = next(q for q in client.inspect()["queues"] if q["queue"] == "keys")
            assert keys["due"] + keys["inflight"] == 500
            time.sleep(0.05)
        release.set()
        wait_for(lambda: len(handled) == 500, timeout=60, what="every key once released")
    finally:
        release.set()
        engine.stop()


def test_a_worker_keeps_its_python_thread_state_between_handler_calls(redis, client):
    # Each worker thread has one Python thread state for its life (not one per call):
    # a threading.local set by one call is still there in the next call on that thread.
    local, seen = threading.local(), []

    def setup(engine):
        @engine.task("q")
        def count(event):
            local.calls = getattr(local, "calls", 0) + 1
            seen.append((threading.get_ident(), local.calls))

    engine = started(redis, setup, workers=1)
    try:
        with client.pipeline() as p:
            for i in range(20):
                p.schedule("q", f"t{i}")
        wait_for(lambda: len(seen) == 20, what="20 tasks")
    finally:
        engine.stop()
    assert len({ident for ident, _ in seen}) == 1
    assert [calls for _, calls in seen] == list(range(1, 21))


def test_stop_inside_a_handler_is_refused_with_what_to_do(redis, client):
    errors = []

    def setup(engine):
        @engine.task("q")
        def handler(event):
            try:
                engine.stop()
            except keywatch.StateError as e:
                errors.append(str(e))

    engine = started(redis, setup)
    try:
        client.schedule("q", b"t")
        wait_for(lambda: errors, what="the refused stop")
    finally:
        engine.stop()
    assert "another thread" in errors[0]


# ---- issue 21: what a sync Engine does with coroutines, registration, logs ----

def test_a_handler_returning_a_coroutine_is_never_acked_unrun(redis, client, caplog):
    # A lambda calling a coroutine function passes as a plain function; what it returns
    # cannot be awaited on a worker thread, so the call fails (logged naming the handler)
    # and the task is retried, then dead-lettered: never acked with the coroutine unrun.
    ran = []

    async def notify(event):
        ran.append(event.key)

    class AsyncCallable:
        async def __call__(self, event):
            ran.append(event.key)

    engine = keywatch.Engine(redis.url, max_attempts=2, **FAST)
    with pytest.raises(keywatch.InvalidArgument, match="coroutine function") as refused:
        engine.add_handler(AsyncCallable(), "task", queue="q")
    assert isinstance(refused.value, TypeError)
    engine.on("task", queue="q")(lambda ev: notify(ev))
    caplog.set_level(logging.ERROR, logger="keywatch")
    with engine:
        client.schedule("q", b"t")
        wait_for(lambda: client.dead_letters("q"), what="the dead letter")
        wait_stat(engine, "items.dead", 1)
        wait_stat(engine, "items.acked", 0)
    assert ran == []
    dead = client.dead_letters("q")
    assert "returned coroutine" in dead[0]["error"] and "keywatch.aio.Engine" in dead[0]["error"]
    assert any("<lambda>" in r.getMessage() for r in caplog.records)


def test_registration_refuses_bad_handlers_and_filters_naming_the_argument(redis):
    engine = keywatch.Engine(redis.url)
    with pytest.raises(keywatch.InvalidType, match="not callable"):
        engine.add_handler("not a function")  # type: ignore[arg-type]
    with pytest.raises(keywatch.InvalidType, match="events must be"):
        engine.on(5)  # type: ignore[arg-type]
    with pytest.raises(keywatch.InvalidArgument, match="queue name 'a b' is not valid"):
        engine.on("task", queue="a b")
    with pytest.raises(keywatch.InvalidArgument, match="filter db '-5'.*or None for any"):
        engine.on(db=-5)
    with pytest.raises(keywatch.InvalidType, match="db must be an int"):
        engine.on(db="1")  # type: ignore[arg-type]
    with pytest.raises(keywatch.InvalidArgument, match="'exp ired' is not an event name"):
        engine.on(["del", "exp ired"])
    with pytest.raises(keywatch.InvalidType, match="prefix must be bytes or str"):
        engine.on(prefix=3)  # type: ignore[arg-type]


def test_with_engine_starts_and_closes_it_and_repr_names_server_and_state(redis, client):
    seen = []
    engine = keywatch.Engine(redis.url.replace("redis://", "redis://:s3cret@"), **FAST)
    redis.command("CONFIG", "SET", "requirepass", "s3cret")
    engine.add_handler(seen.append, "task", queue="q")
    assert repr(engine) == f"<keywatch.Engine redis://:***@127.0.0.1:{redis.port} new>"
    with keywatch.Client(redis.url, redis_password="s3cret") as c:
        assert repr(c) == f"<keywatch.Client redis://127.0.0.1:{redis.port} open>"
        assert "s3cret" not in repr(c) and c.options["redis.password"] == "***"
        with engine as started:
            assert started is engine and engine.running
            assert repr(engine).endswith(" running>") and "s3cret" not in repr(engine)
            c.schedule("q", b"t")
            wait_for(lambda: seen, what="the task")
    assert repr(c).endswith(" closed>")
    assert repr(engine).endswith(" closed>") and not engine.running


def test_failure_log_says_retried_then_dead_lettered(redis, client, caplog):
    def setup(engine):
        @engine.task("jobs")
        def job(event):
            raise ValueError("boom")

    caplog.set_level(logging.ERROR, logger="keywatch")
    engine = started(redis, setup, max_attempts=2)
    try:
        client.schedule("jobs", b"j")
        wait_for(lambda: client.dead_letters("jobs"), what="the dead letter")
    finally:
        engine.stop()
    lines = [r.getMessage() for r in caplog.records if "raised on task" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].endswith("attempt 1 of 2: it will be retried")
    assert "it will be retried" not in lines[1] and lines[1].endswith(
        "attempt 2 of 2 (max_attempts): it is dead-lettered to queue 'jobs''s dead-letter stream")


def test_items_no_filter_takes_are_counted_and_said_once_per_queue(redis, client, caplog):
    seen = []

    def setup(engine):
        engine.add_handler(seen.append, "expired", prefix="session:")

    caplog.set_level(logging.WARNING, logger="keywatch")
    engine = started(redis, setup)
    try:
        for key in (b"cart:1", b"cart:2", b"session:1"):
            client.track(key, b"v", ttl=0.05)
        wait_for(lambda: engine.stat("items.unhandled") == 2 and seen,
                 what="two unhandled items and the session")
        wait_for(lambda: engine.stat("items.acked") == 3, what="three acks")
    finally:
        engine.stop()
    said = [r.getMessage() for r in caplog.records if "items.unhandled" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("queue 'keys': item q:keys:")
    assert "matched no handler's filter" in said[0] and "own namespace" in said[0]
