"""Fixtures: a real private redis-server per test.

When the project's starter is available (KW_TEST_CLUSTER: the path of
tests/support/kw_test_cluster, which prints its nodes as one JSON line and stops them when
its stdin closes), it is used; otherwise redis-server is started here on a free loopback
port with a private directory, and stopped by its pid."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Polls predicate until it is true; fails the test (naming what) after timeout."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def stop_child(child: subprocess.Popen, sig: int, timeout: float = 30.0) -> int:
    """Sends sig and waits for the child's exit status. A child still running after timeout
    is killed and the test fails with every thread's stack (gdb, where installed), so a hang
    at stop says where it hung."""
    child.send_signal(sig)
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        stacks = "(gdb not installed: no stacks)"
        if shutil.which("gdb"):
            stacks = subprocess.run(["gdb", "-p", str(child.pid), "-batch", "-ex",
                                     "thread apply all bt"], capture_output=True, text=True,
                                    timeout=120, stdin=subprocess.DEVNULL).stdout
        child.kill()
        child.wait()
        pytest.fail(f"{child.args} still ran {timeout} s after signal {sig}; its threads:\n"
                    f"{stacks}")


def wait_stat(engine, name: str, want: "int | Callable[[int], bool]", timeout: float = 20.0) -> int:
    """The one way a test reads an engine statistic while the engine runs (docs/testing.md,
    "Waiting, not timing"): a counter moves when a reply reaches the engine's thread, which
    can be after the test saw the effect in Redis or in a handler. Waits until
    engine.stat(name) equals want (or want(value) is true); fails naming the last value
    after timeout. Returns the value."""
    holds = want if callable(want) else (lambda v: v == want)
    end = time.monotonic() + timeout
    while True:
        value = engine.stat(name)
        if holds(value):
            return value
        if time.monotonic() > end:
            pytest.fail(f"{name} is {value} after {timeout} s; wanted {want}")
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One private redis-server; ``url`` to connect, ``command(*args)`` to talk to it."""

    def __init__(self) -> None:
        starter = os.environ.get("KW_TEST_CLUSTER")
        self._starter = None
        self._proc = None
        if starter and os.access(starter, os.X_OK):
            self._starter = subprocess.Popen([starter, "--single", "--notify", "KEA"],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert self._starter.stdout is not None
            info = json.loads(self._starter.stdout.readline())
            self.port = int(info["nodes"][0]["port"])
            return
        server = shutil.which("redis-server")
        if not server:
            pytest.skip("redis-server is not installed (scripts/install-deps.sh installs it)")
        self.dir = tempfile.mkdtemp(prefix="keywatch-py-redis-")
        for _ in range(5):
            self.port = _free_port()
            self._proc = subprocess.Popen(
                [server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                 "--save", "", "--appendonly", "no", "--notify-keyspace-events", "KEA",
                 "--logfile", os.path.join(self.dir, "redis.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while time.monotonic() < end and self._proc.poll() is None:
                if _ping(self.port):
                    return
                time.sleep(0.02)
            self._stop_proc()
        pytest.fail("could not start redis-server on a free loopback port")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def command(self, *args: object) -> bytes:
        """One command through redis-cli (raw output)."""
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--no-raw",
                              *[str(a) for a in args]], capture_output=True, check=True)
        return out.stdout.strip()

    def _stop_proc(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def stop(self) -> None:
        if self._starter:
            assert self._starter.stdin is not None
            self._starter.stdin.close()
            self._starter.wait(30)
            return
        self._stop_proc()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


class Cluster:
    """A real 3-master, 3-replica Redis Cluster started by the project's starter
    (KW_TEST_CLUSTER); ``seed`` is a node's URL, ``nodes`` what the starter printed. With
    "--sentinel", a Sentinel deployment (``seed``: its redis+sentinel:// URL)."""

    def __init__(self, starter: str, *args: str) -> None:
        self._proc = subprocess.Popen([starter, "--notify", "KEA", *args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait(30)
            pytest.fail(f"{starter} printed no nodes (exit status {self._proc.returncode})")
        info = json.loads(line)
        self.seed: str = info["seed"]
        self.nodes = info["nodes"]
        self.sentinels = info.get("sentinels", [])  # --sentinel: the sentinels

    def stop(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(60)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    starter = os.environ.get("KW_TEST_CLUSTER")
    if not starter or not os.access(starter, os.X_OK):
        pytest.skip("KW_TEST_CLUSTER (tests/support/kw_test_cluster, the project's cluster "
                    "starter) not given")
    c = Cluster(starter)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def sentinels() -> Iterator[Cluster]:
    """A master, 2 replicas and 3 sentinels (kw_test_cluster --sentinel); seed is the
    redis+sentinel:// URL."""
    starter = os.environ.get("KW_TEST_CLUSTER")
    if not starter or not os.access(starter, os.X_OK):
        pytest.skip("KW_TEST_CLUSTER (tests/support/kw_test_cluster, the project's cluster "
                    "starter) not given")
    c = Cluster(starter, "--sentinel")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def python_child() -> Callable[..., "subprocess.Popen[str]"]:
    """Starts `python -c code` (this interpreter, same environment) with pipes."""
    children = []

    def start(code: str, *args: str) -> "subprocess.Popen[str]":
        child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()
