"""keywatch.Client against a real redis-server: every method, its errors, binary keys."""

from __future__ import annotations

import datetime as dt
import os
import threading

import pytest
import redis as redispy

import keywatch

UTC = dt.timezone.utc


@pytest.fixture
def client(redis):
    with keywatch.Client(redis.url) as c:
        yield c


@pytest.fixture
def r(redis):
    conn = redispy.Redis(port=redis.port)
    yield conn
    conn.close()


def queue(client, name):
    return next(q for q in client.inspect()["queues"] if q["queue"] == name)


def test_versions_are_visible():
    assert keywatch.__version__ == keywatch.library_version()
    assert keywatch.__version__.count(".") == 2


def test_track_sets_the_key_with_its_ttl_and_returns_the_deadline(client, r):
    before = dt.datetime.now(UTC)
    deadline = client.track("session:alice", b"v1", ttl=dt.timedelta(seconds=30))
    assert r.get(b"session:alice") == b"v1"
    assert 29_000 < r.pttl(b"session:alice") <= 30_000
    assert deadline.tzinfo is not None
    assert before + dt.timedelta(seconds=29) < deadline < before + dt.timedelta(seconds=31)
    assert queue(client, "keys")["due"] == 1


def test_binary_keys_and_values_round_trip(client, r):
    key, value = b"bin:\x00\xca\xfe", b"\x00\xff\x01"
    client.track(key, value, ttl=10)
    assert r.get(key) == value
    client.untrack(key, delete=True)
    assert r.exists(key) == 0


def test_str_keys_are_utf8(client, r):
    client.track("clé:é", "valeur ü", ttl=10)
    assert r.get("clé:é".encode()) == "valeur ü".encode()


def test_track_nx_and_xx_refuse_with_condition_failed(client, r):
    r.set(b"exists", b"x")
    with pytest.raises(keywatch.ConditionFailed) as e:
        client.track(b"exists", b"y", ttl=10, nx=True)
    assert e.value.status == -12 and str(e.value)
    with pytest.raises(keywatch.ConditionFailed):
        client.track(b"missing", b"y", ttl=10, xx=True)
    assert r.get(b"exists") == b"x" and r.exists(b"missing") == 0
    client.track(b"exists", b"y", ttl=10, xx=True)
    assert r.get(b"exists") == b"y"


def test_bad_arguments_raise_invalid_argument_and_write_nothing(client, r):
    with pytest.raises(keywatch.InvalidArgument):
        client.track(b"k", b"v", ttl=0)
    with pytest.raises(keywatch.InvalidArgument):
        client.track(b"k", b"v", ttl=10, nx=True, xx=True)
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError too
        client.track(b"k", b"v", ttl=-1)
    with pytest.raises(TypeError, match="key must be bytes or str"):
        client.track(42, b"v", ttl=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ttl must be"):
        client.track(b"k", b"v", ttl=[10])  # type: ignore[arg-type]
    assert r.exists(b"k") == 0


def test_untrack_unknown_key_is_not_found(client):
    with pytest.raises(keywatch.NotFound) as e:
        client.untrack(b"never-tracked")
    assert isinstance(e.value, LookupError)


def test_adopt_tracks_a_key_at_its_ttl(client, r):
    r.set(b"foreign", b"f", px=20_000)
    deadline = client.adopt(b"foreign", snapshot=True)
    assert dt.timedelta(seconds=19) < deadline - dt.datetime.now(UTC) <= dt.timedelta(seconds=21)
    assert queue(client, "keys")["due"] == 1
    with pytest.raises(keywatch.NotFound):
        client.adopt(b"no-such-key")
    r.set(b"forever", b"x")
    with pytest.raises(keywatch.InvalidArgument):
        client.adopt(b"forever")


def test_schedule_cancel_reschedule(client):
    at = dt.datetime.now(UTC) + dt.timedelta(hours=1)
    due = client.schedule("emails", b"welcome:\x00alice", b'{"to":"alice"}', at=at)
    assert abs(due - at) < dt.timedelta(milliseconds=2)
    with pytest.raises(keywatch.ConditionFailed):
        client.schedule("emails", b"welcome:\x00alice", b"other", delay=5, nx=True)
    later = client.reschedule("emails", b"welcome:\x00alice", delay=dt.timedelta(hours=2))
    assert later > due
    assert queue(client, "emails")["due"] == 1
    client.cancel("emails", b"welcome:\x00alice")
    assert "emails" not in [q["queue"] for q in client.inspect()["queues"]]  # empty now
    with pytest.raises(keywatch.NotFound):
        client.cancel("emails", b"welcome:\x00alice")
    with pytest.raises(keywatch.NotFound):
        client.reschedule("emails", b"welcome:\x00alice", delay=1)


def test_times_must_be_aware_and_exclusive(client):
    with pytest.raises(ValueError, match="naive datetime"):
        client.schedule("q", b"t", at=dt.datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="not both"):
        client.schedule("q", b"t", at=dt.datetime.now(UTC), delay=1)
    with pytest.raises(keywatch.InvalidArgument):  # ends after KW_MAX_TIME_MS
        client.schedule("q", b"t", delay=dt.timedelta(days=3_000_000))
    assert "q" not in [q["queue"] for q in client.inspect()["queues"]]


def test_inspect_returns_dicts(client):
    client.track(b"a", b"1", ttl=60)
    figures = client.inspect()
    assert figures["mode"] == "standalone" and figures["complete"] is True
    assert isinstance(figures["now_ms"], int)
    keys = queue(client, "keys")
    assert keys == {"queue": "keys", "due": 1, "due_now": 0, "inflight": 0, "dead": 0,
                    "oldest_overdue_ms": -1}


def test_dead_letters_replay_purge_of_unknown_queue(client):
    assert client.dead_letters("nothing-here") == []
    with pytest.raises(keywatch.NotFound):
        client.replay("nothing-here")
    assert client.purge("nothing-here") == 0


def test_pipeline_sends_on_exit_and_reports_each_call(client, r):
    with client.pipeline() as p:
        for i in range(100):
            p.track(f"p:{i}", b"v", ttl=60)
        p.schedule("jobs", b"j1", b"x", delay=60)
        assert len(p) == 101 and r.exists(b"p:0") == 0  # nothing sent yet
    assert p.results == [None] * 101
    assert r.exists(*[f"p:{i}" for i in range(100)]) == 100
    with pytest.raises(keywatch.ConditionFailed, match="pipelined call 2 of 3"):
        with client.pipeline() as p:
            p.untrack(b"p:0")
            p.track(b"p:1", b"v", ttl=60, nx=True)
            p.cancel("jobs", b"j1")
    assert p.results[0] is None and isinstance(p.results[1], keywatch.ConditionFailed)
    assert p.results[2] is None


def test_pipeline_body_that_raises_sends_nothing(client, r):
    with pytest.raises(RuntimeError):
        with client.pipeline() as p:
            p.track(b"never", b"v", ttl=60)
            raise RuntimeError("changed my mind")
    assert r.exists(b"never") == 0


def test_connection_errors_carry_the_library_message():
    with pytest.raises(keywatch.ConnectionError) as e:
        keywatch.Client("redis://127.0.0.1:1")
    assert "127.0.0.1:1" in str(e.value) and e.value.code == "KW_ERR_CONNECT"
    assert isinstance(e.value, ConnectionError)  # the builtin too
    with pytest.raises(keywatch.InvalidURL, match="unknown scheme"):
        keywatch.Client("http://x")
    with pytest.raises(keywatch.UnknownOption, match="bogus"):
        keywatch.Client("redis://127.0.0.1:1", bogus=1)
    with pytest.raises(keywatch.BadOptionValue):
        keywatch.Client("redis://127.0.0.1:1", redis_command_timeout="soon")


def test_server_gone_mid_session_raises_connection_error(redis):
    client = keywatch.Client(redis.url, redis_command_timeout=dt.timedelta(seconds=2))
    client.track(b"k", b"v", ttl=60)
    redis.stop()
    with pytest.raises(keywatch.ConnectionError):
        client.track(b"k2", b"v", ttl=60)
    client.close()


def test_closed_client_raises_state_error(redis):
    client = keywatch.Client(redis.url)
    client.close()
    client.close()
    with pytest.raises(keywatch.StateError, match="closed"):
        client.track(b"k", b"v", ttl=1)


def test_client_is_thread_safe_when_shared(client, r):
    # Eight threads share one Client: every call lands, none fails or corrupts another.
    errors = []

    def work(t):
        try:
            for i in range(200):
                client.track(f"t{t}:{i}", f"{t}:{i}", ttl=60)
                if i % 10 == 0:
                    client.inspect()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert queue(client, "keys")["due"] == 1600
    assert r.get(b"t7:199") == b"7:199"


def test_blocking_calls_release_the_gil(redis, r):
    # A call blocked on Redis (the server is paused by CLIENT PAUSE) must let another
    # Python thread run meanwhile.
    client = keywatch.Client(redis.url)
    r.execute_command("CLIENT", "PAUSE", "500", "ALL")
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    client.track(b"paused", b"v", ttl=60)  # waits for the pause to end
    done.set()
    t.join()
    assert len(ticks) >= 5
    client.close()


def test_client_used_after_fork_raises_fork_error(client):
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        try:
            client.track(b"k", b"v", ttl=1)
            os._exit(1)
        except keywatch.ForkError as e:
            os._exit(0 if "os.fork()" in str(e) else 2)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    client.track(b"parent-still-works", b"v", ttl=60)


# ---- issue 21: durations, URLs, one error family in the library's words ----

def test_numbers_are_seconds_for_every_duration_argument(redis, client, r):
    # ttl= and delay= as an int, a float, a timedelta and the library's text all mean the
    # same duration; options too (redis_command_timeout=5 is five seconds).
    with keywatch.Client(redis.url, redis_command_timeout=5) as c:
        assert c.options["redis.command_timeout"] == "5000ms"
        for key, ttl in [(b"i", 30), (b"f", 30.0), (b"td", dt.timedelta(seconds=30)),
                         (b"s", "30s"), (b"ms", "30000ms")]:
            c.track(key, b"v", ttl=ttl)
            # The deadline is taken on the server's clock from the client's offset to it.
            assert 29_000 < r.pttl(key) <= 30_050, (key, r.pttl(key))
        # The server runs on this machine: its clock is ours, within a few ms.
        slack = dt.timedelta(milliseconds=50)
        c.schedule("q", b"t", delay=60)
        for delay, seconds in [(0.5, 0.5), ("1500ms", 1.5), (dt.timedelta(seconds=2), 2)]:
            before = dt.datetime.now(UTC)
            due = c.reschedule("q", b"t", delay=delay)
            after = dt.datetime.now(UTC)
            span = dt.timedelta(seconds=seconds)
            assert before + span - slack <= due <= after + span + slack, (delay, due - before)


def test_url_with_a_db_query_as_redis_py_writes_it(redis, r):
    with keywatch.Client(f"{redis.url}?db=4") as c:
        c.track(b"in-db-4", b"v", ttl=60)
        assert c.options["redis.url"] == f"{redis.url}?db=4"
    assert redispy.Redis(port=redis.port, db=4).get(b"in-db-4") == b"v"
    assert r.exists(b"in-db-4") == 0
    with keywatch.Client(f"{redis.url}/2?db=5") as c:  # the query wins, as in redis-py
        c.track(b"in-db-5", b"v", ttl=60)
    assert redispy.Redis(port=redis.port, db=5).get(b"in-db-5") == b"v"
    with pytest.raises(keywatch.InvalidURL, match=r"the only query accepted is \?db=N"):
        keywatch.Client(f"{redis.url}?socket_timeout=5")


BAD_ARGUMENTS = [
    (lambda c: c.track(b"k", b"v", ttl=10**20), "ttl=100000000000000000000 from now ends after"),
    (lambda c: c.track(b"k", b"v", ttl=float("inf")), "ttl=inf is not a finite duration"),
    (lambda c: c.track(b"k", b"v", ttl=float("nan")), "ttl=nan is not a finite duration"),
    (lambda c: c.track(b"k", b"v", ttl=-1), "ttl=-1 is negative"),
    (lambda c: c.track(b"k", b"v", ttl=0), "ttl 0ms is not positive"),
    (lambda c: c.track(b"k", b"v", ttl="soon"), "ttl='soon': 'soon' is not a duration"),
    (lambda c: c.dead_letters("q", limit=-1), "limit=-1 is out of range: give 1 to"),
    (lambda c: c.replay("q", limit=-1), "limit=-1 is out of range: give 1 to"),
    (lambda c: c.replay("q", limit=2**64), "limit=18446744073709551616 is out of range"),
    (lambda c: c.schedule("q", b"t", delay=-1), "delay=-1 is negative"),
    (lambda c: c.schedule("q", b"t", at=dt.datetime(2030, 1, 1)), "naive datetime"),
    (lambda c: c.schedule("q", b"t", at=dt.datetime.now(UTC), delay=1), "at= or delay=, not both"),
    (lambda c: c.schedule("q", b"t", at=dt.datetime(1900, 1, 1, tzinfo=UTC)),
     "at=1900-01-01T00:00:00+00:00 is out of range: give a time after 1970"),
    (lambda c: c.schedule("q\0x", b"t"), "contains a NUL character"),
    (lambda c: c.schedule("keys", b"t"), "'keys' is the key-tracking queue: use track() for keys"),
]


@pytest.mark.parametrize("call,message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_every_bad_argument_is_an_invalid_argument_and_writes_nothing(client, r, call, message):
    with pytest.raises(keywatch.InvalidArgument) as alone:
        call(client)
    assert message in str(alone.value) and isinstance(alone.value, ValueError)
    assert "kw_" not in str(alone.value) and "KW_" not in str(alone.value)
    assert "incompatible" not in str(alone.value)
    assert r.keys("*") == []  # nothing written


def test_pipelined_refusals_are_the_same_errors_in_the_library_words(client, r):
    for ttl in (-1, 0, float("inf"), 10**20):
        with pytest.raises(keywatch.InvalidArgument):
            with client.pipeline() as p:
                p.track(b"k", b"v", ttl=ttl)
    with pytest.raises(keywatch.InvalidArgument) as e:
        with client.pipeline() as p:
            p.track(b"ok", b"v", ttl=60)
            p.track(b"", b"v", ttl=60)
            p.schedule("a b", b"task-a", b"")
            p.track(b"k", b"v", ttl=60, nx=True, xx=True)
            p.schedule(b"bq", b"t", b"")
    assert str(e.value) == ("pipelined call 2 of 5 (track key b''): the key is empty: give a "
                            "key of 1 byte or more")
    assert p.results[0] is None and p.results[4] is None
    assert "(schedule queue 'a b' id b'task-a'): queue name 'a b' is not valid" in str(
        p.results[2])
    assert str(p.results[3]) == ("pipelined call 4 of 5 (track key b'k'): nx=True and xx=True "
                                 "exclude each other")
    assert r.exists(b"ok") == 1


def test_pipelined_failures_once_sent_keep_the_library_message(client, r):
    client.track(b"exists", b"v", ttl=60)
    with pytest.raises(keywatch.ConditionFailed) as e:
        with client.pipeline() as p:
            p.track(b"exists", b"v", ttl=60, nx=True)
            p.untrack(b"never")
            p.cancel("jobs", b"none")
    assert str(e.value).startswith("pipelined call 1 of 3 (track key b'exists'): track NX: "
                                   "the key exists")
    assert isinstance(p.results[1], keywatch.NotFound)
    assert str(p.results[1]) == "pipelined call 2 of 3 (untrack key b'never'): the key was not tracked"
    assert str(p.results[2]) == ("pipelined call 3 of 3 (cancel queue 'jobs' id b'none'): "
                                 "cancel: no such task")


def test_library_messages_name_python_calls_not_c_functions(client, r):
    with pytest.raises(keywatch.InvalidArgument) as e:
        client.track(b"k", b"v", ttl=0)
    assert "untrack(key, delete=True)" in str(e.value) and "kw_" not in str(e.value)
    with pytest.raises(keywatch.InvalidArgument, match="nx=True and xx=True exclude each other"):
        client.track(b"k", b"v", ttl=1, nx=True, xx=True)
    r.set(b"forever", b"x")
    with pytest.raises(keywatch.InvalidArgument, match=r"or track it with track\(\)"):
        client.adopt(b"forever")
    r.hset(b"hash", b"f", b"v")
    r.expire(b"hash", 60)
    with pytest.raises(keywatch.InvalidArgument, match="without snapshot=True"):
        client.adopt(b"hash", snapshot=True)


def test_engine_without_handlers_names_python_calls(redis):
    engine = keywatch.Engine(redis.url)
    with pytest.raises(keywatch.StateError) as e:
        engine.start()
    assert "engine.on(...)" in str(e.value) and "kw_" not in str(e.value)
    engine.close()


def test_every_refusal_is_a_keywatch_error(client):
    refusals = [
        lambda: client.track(42, b"v", ttl=1),
        lambda: client.track(b"k", b"v", ttl=[1]),
        lambda: client.schedule(3, b"t"),
        lambda: client.dead_letters("q", limit="10"),
        lambda: client.replay("q", entry=5),
        lambda: keywatch.Retry("r", delay=-1),
        lambda: keywatch.Client(5),
        lambda: keywatch.Client("redis://127.0.0.1:1", lease=object()),
    ]
    for refuse in refusals:
        with pytest.raises(keywatch.Error):
            refuse()
    with pytest.raises(keywatch.InvalidType) as e:  # a TypeError too
        client.track(42, b"v", ttl=1)
    assert isinstance(e.value, TypeError) and isinstance(e.value, keywatch.InvalidArgument)


def test_refused_password_is_also_a_connection_error_and_a_missing_db_names_it(redis):
    redis.command("CONFIG", "SET", "requirepass", "right")
    with pytest.raises(keywatch.AuthenticationError) as auth:
        keywatch.Client(redis.url.replace("redis://", "redis://:wrong@"))
    assert isinstance(auth.value, keywatch.ConnectionError)
    assert isinstance(auth.value, ConnectionError)
    with pytest.raises(keywatch.ConnectionError) as db:
        keywatch.Client(redis.url.replace("redis://", "redis://:right@") + "/99")
    assert "SELECT 99" in str(db.value) and "out of range" in str(db.value)
    assert not isinstance(db.value, keywatch.RedisError)
