"""The examples in examples/python run against a real server and do what they say; the
package and the examples pass `mypy --strict`, and the stubs match the module (stubtest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import keywatch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def run_example(name, redis):
    return subprocess.run([sys.executable, str(EXAMPLES / name), "--redis", redis.url],
                          capture_output=True, text=True, timeout=120)


def test_session_cleanup_example_empties_every_index(redis):
    out = run_example("session_cleanup.py", redis)
    assert out.returncode == 0, out.stderr
    assert "every session left its user's index" in out.stdout
    assert out.stderr.count("expired: removed from the index") == 3


def test_delayed_tasks_example_handles_and_dead_letters(redis):
    out = run_example("delayed_tasks.py", redis)
    assert out.returncode == 0, out.stderr
    assert "reminder for alice: standup (attempt 1)" in out.stdout
    assert "reminder for bob: review (attempt 1)" in out.stdout
    assert "task r3: payload is not JSON" in out.stdout


def test_session_cleanup_asyncio_example_empties_every_index(redis):
    out = run_example("session_cleanup_async.py", redis)
    assert out.returncode == 0, out.stderr
    assert "every session left its user's index" in out.stdout
    assert out.stderr.count("expired: removed from the index") == 3


def mypy(*args):
    if shutil.which("mypy") is None and not os.path.exists("/usr/bin/mypy"):
        pytest.skip("mypy is not installed (scripts/install-deps.sh installs it)")
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args],
                          capture_output=True, text=True, timeout=600)


def test_package_and_examples_pass_mypy_strict():
    out = mypy("--strict", "-p", "keywatch")
    assert out.returncode == 0, out.stdout + out.stderr
    out = mypy("--strict", *map(str, sorted(EXAMPLES.glob("*.py"))))
    assert out.returncode == 0, out.stdout + out.stderr


def test_stubs_match_the_extension_module():
    if shutil.which("stubtest") is None:
        pytest.skip("stubtest (mypy) is not installed")
    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "keywatch._keywatch",
                          "--allowlist", str(allowlist), "--ignore-unused-allowlist"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
