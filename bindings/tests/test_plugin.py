"""Engine.add_plugin against a real redis-server: the built-in session_index plugin, loaded
by path from the build tree (KW_HANDLERS_DIR, set by scripts/test.sh when the release
stage built the plugins), cleans its user's index; refused plugins raise with the
library's message and leave the engine usable."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis as redispy

import keywatch
from keywatch import aio
from conftest import wait_for, wait_stat

FAST = dict(sweep_interval="20ms", retry_base="20ms", retry_max="50ms", lease="5s")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
OPTIONS = {"index": "user:{user}:sessions", "pattern": "session:{session}",
           "member": "session"}


@pytest.fixture
def session_index() -> str:
    """The path of the built session_index plugin."""
    directory = os.environ.get("KW_HANDLERS_DIR")
    if not directory:
        pytest.skip("KW_HANDLERS_DIR is not set (scripts/test.sh sets it to build/handlers "
                    "once the release stage built the plugins)")
    path = os.path.join(directory, "session_index.so")
    assert os.path.exists(path), f"KW_HANDLERS_DIR={directory} has no session_index.so"
    return path


def test_session_index_plugin_by_path_removes_expired_sessions_from_the_index(
        redis, session_index):
    r = redispy.Redis.from_url(redis.url)
    engine = keywatch.Engine(redis.url, **FAST)
    engine.add_plugin(session_index, instance="sessions", events="expired",
                      prefix="session:", options=OPTIONS)
    with keywatch.Client(redis.url) as client:
        for user, session in [("alice", "s1"), ("alice", "s2"), ("bob", "s3")]:
            r.sadd(f"user:{user}:sessions", session, "kept-" + session)
            client.track(f"session:{session}", user, ttl=0.2, snapshot=True)
        client.track("other:s4", "alice", ttl=0.2, snapshot=True)  # not the filter's
        r.sadd("user:alice:sessions", "s4")
    with engine:  # starts it
        wait_stat(engine, "plugin.sessions.removed", 3)
        wait_stat(engine, "plugin.sessions.absent", 0)
    assert r.smembers("user:alice:sessions") == {b"kept-s1", b"kept-s2", b"s4"}
    assert r.smembers("user:bob:sessions") == {b"kept-s3"}


def test_a_bad_plugin_path_raises_with_the_library_message_and_the_engine_stays_usable(
        redis, tmp_path):
    missing = str(tmp_path / "nothing_here.so")
    engine = keywatch.Engine(redis.url, **FAST)
    with pytest.raises(keywatch.Error) as raised:
        engine.add_plugin(missing, options=OPTIONS)
    message = str(raised.value)
    assert f'plugin "{missing}" cannot be opened' in message and "check the path" in message
    assert raised.value.status is not None and raised.value.status < 0
    not_elf = tmp_path / "text.so"
    not_elf.write_text("not a shared object")
    with pytest.raises(keywatch.Error, match="not an ELF file"):
        engine.add_plugin(str(not_elf))
    with pytest.raises(keywatch.Error, match='plugin "no_such_plugin_x" not found'):
        engine.add_plugin("no_such_plugin_x")
    seen = []
    engine.add_handler(seen.append, "expired", prefix="k:")  # unchanged and usable
    with engine:  # starts it
        with keywatch.Client(redis.url) as client:
            client.track("k:1", "v", ttl=0.1)
        wait_for(lambda: seen, what="the handler added after the refusals")


def test_plugin_refusals_name_the_option_and_the_state(redis, session_index):
    engine = keywatch.Engine(redis.url, **FAST)
    with pytest.raises(keywatch.Error, match='unknown option "colour"'):
        engine.add_plugin(session_index, options={**OPTIONS, "colour": "red"})
    with pytest.raises(keywatch.InvalidArgument, match="option names and values are str"):
        engine.add_plugin(session_index, options={"index": 3})  # type: ignore[dict-item]
    engine.add_plugin(session_index, instance="a", options=OPTIONS)
    with pytest.raises(keywatch.Error, match='instance named "a" is already loaded'):
        engine.add_plugin(session_index, instance="a", options=OPTIONS)
    with engine:  # starts it
        with pytest.raises(keywatch.StateError):
            engine.add_plugin(session_index, instance="b", options=OPTIONS)


def test_aio_engine_loads_a_plugin_through_the_sync_one(redis, session_index):
    r = redispy.Redis.from_url(redis.url)

    async def main() -> None:
        engine = aio.Engine(redis.url, **FAST)
        engine.add_plugin(session_index, instance="sessions", prefix="session:",
                          options=OPTIONS)
        with pytest.raises(keywatch.Error, match="cannot be opened"):
            engine.add_plugin("/nonexistent/dir/x.so")
        r.sadd("user:carol:sessions", "s9")
        with keywatch.Client(redis.url) as client:
            client.track("session:s9", "carol", ttl=0.1, snapshot=True)
        async with engine:
            while r.scard("user:carol:sessions"):
                await asyncio.sleep(0.02)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_session_index_plugin_example_empties_every_index(redis, session_index):
    out = subprocess.run([sys.executable, str(EXAMPLES / "session_index_plugin.py"),
                          "--redis", redis.url, "--plugin", session_index],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "session_index: 3 removed, 0 already absent" in out.stdout
    assert "every session left its user's index" in out.stdout
