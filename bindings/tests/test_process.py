"""The engine's life in a process: Ctrl-C and SIGTERM stop run(), interpreter exit with a
running engine, os.fork(), and `python -m keywatch watch`."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis as redispy

import keywatch
from conftest import stop_child, wait_stat

RUN_ENGINE = """
import logging, sys, keywatch
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
engine = keywatch.Engine(sys.argv[1])
engine.add_handler(lambda ev: None, "del")
engine.run()
print("stopped", engine.running, flush=True)
"""


def read_line(child, timeout=20.0):
    """The child's next stdout line (a reader thread per child: no buffered-select trap)."""
    lines = getattr(child, "kw_lines", None)
    if lines is None:
        lines = child.kw_lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in child.stdout], daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"no line from the child within {timeout} s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_engine_run_within_a_second(redis, python_child, sig):
    child = python_child(RUN_ENGINE, redis.url)
    assert read_line(child) == "running until Ctrl-C, SIGTERM or stop()\n"
    sent = time.monotonic()
    child.send_signal(sig)
    child.wait(30)
    elapsed = time.monotonic() - sent
    assert child.returncode == 0, child.stderr.read()
    lines = [read_line(child) for _ in range(2 if sig == signal.SIGINT else 1)]
    assert lines[-1] == "stopped False\n"  # run() returned with the engine stopped
    assert elapsed < 1.0, f"run() took {elapsed:.2f} s to stop after {sig.name}"


def test_interpreter_exit_with_a_running_engine_stops_it(redis, python_child, tmp_path):
    code = """
import sys, keywatch
engine = keywatch.Engine(sys.argv[1])
engine.add_handler(lambda ev: None, "del")
engine.start()
print("running", flush=True)
"""  # and falls off the end with the engine running
    child = python_child(code, redis.url)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert out == "running\n" and "Fatal" not in err and "Traceback" not in err


def test_interpreter_exit_while_a_handler_runs(redis, python_child):
    # A handler is still running (and wants the GIL) when the main thread ends.
    code = """
import sys, time, threading, keywatch, redis
engine = keywatch.Engine(sys.argv[1], stop_timeout="5s")
inside = threading.Event()
def slow(ev):
    inside.set()
    time.sleep(0.5)
engine.add_handler(slow, "del")
engine.start()
r = redis.Redis.from_url(sys.argv[1]); r.set("a", 1); r.delete("a")
inside.wait(20)
print("exiting", flush=True)
"""
    child = python_child(code, redis.url)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert out == "exiting\n" and "Fatal" not in err


def test_engine_used_after_fork_raises_fork_error(redis):
    engine = keywatch.Engine(redis.url)
    engine.add_handler(lambda ev: None, "del")
    engine.start()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                engine.stats()  # direct stat read: refused (after fork)
                os._exit(1)
            except keywatch.ForkError as e:
                os._exit(0 if "os.fork()" in str(e) else 2)
            except BaseException:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        wait_stat(engine, "conn.nodes", 1)  # the parent's engine still works
    finally:
        engine.close()


def watch(url, *args):
    return subprocess.Popen([sys.executable, "-m", "keywatch", "watch", "--redis", url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_python_watch_prints_json_lines_and_stops_on_sigint(redis):
    child = watch(redis.url, "--events", "set,del", "--observe")
    try:
        assert "watching" in child.stderr.readline()
        r = redispy.Redis(port=redis.port)
        r.set(b"bin:\xca\xfe", b"1")
        r.delete(b"bin:\xca\xfe")
        first, second = json.loads(read_line(child)), json.loads(read_line(child))
        assert first["event"] == "set" and second["event"] == "del"
        assert second["key_b64"] == "YmluOsr+" and second["source"] == "notification"
        assert list(second) == ["event", "key_b64", "db", "ts_ms", "attempt", "source", "id",
                                "node"]
        child.send_signal(signal.SIGINT)
        child.wait(30)
        assert child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_python_watch_prints_the_same_lines_as_the_cli(redis):
    cli = os.environ.get("KW_CLI")
    if not cli or not os.access(cli, os.X_OK):
        pytest.skip("KW_CLI (the keywatch CLI binary) not given")
    py = watch(redis.url, "--events", "del", "--observe")
    c = subprocess.Popen([cli, "watch", "--redis", redis.url, "--events", "del", "--observe"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "watching" in py.stderr.readline() and "watching" in c.stderr.readline()
        r = redispy.Redis(port=redis.port)
        for key in (b"plain", b"\xff\x00bin", "ünï".encode()):
            r.set(key, b"1")
            r.delete(key)
        for _ in range(3):
            a, b = json.loads(read_line(py)), json.loads(read_line(c))
            a.pop("ts_ms"), b.pop("ts_ms")
            assert a == b and list(a) == list(b)
    finally:
        for p in (py, c):
            stop_child(p, signal.SIGINT)


def test_python_watch_duration_is_written_as_the_cli_s(redis):
    for duration in ("1s", "800ms", "1"):
        out = subprocess.run([sys.executable, "-m", "keywatch", "watch", "--redis", redis.url,
                              "--observe", "--duration", duration],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (duration, out.stderr)
    out = subprocess.run([sys.executable, "-m", "keywatch", "watch", "--redis", redis.url,
                          "--duration", "1parsec"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--duration" in out.stderr and "1parsec" in out.stderr


def test_python_watch_refuses_bad_input():
    out = subprocess.run([sys.executable, "-m", "keywatch", "watch", "--redis", "http://x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown scheme" in out.stderr
    out = subprocess.run([sys.executable, "-m", "keywatch", "watch", "--redis",
                          "redis://127.0.0.1:1", "--conf", "redis.connect_timeout=100ms"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "cannot watch redis://127.0.0.1:1" in out.stderr
