"""The examples in examples/python run against a real server and do what they say; the
package and the examples pass `mypy --strict`, and the stubs match the module (stubtest)."""

from __future__ import annotations

import inspect
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
    # typing_checks.py: what users' code relies on (stats entries are ints, decorators keep
    # the function's type).
    out = mypy("--strict", "-p", "keywatch")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = Path(__file__).with_name("typing_checks.py")
    out = mypy("--strict", *map(str, sorted(EXAMPLES.glob("*.py"))), str(checks))
    assert out.returncode == 0, out.stdout + out.stderr


def public_members():
    """(name, object) of every public class, method, property and function of the package
    (own members of its classes, not those inherited from builtins)."""
    from keywatch import aio

    for module in (keywatch, aio):
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            yield f"{module.__name__}.{name}", obj
            if not inspect.isclass(obj):
                continue
            for member, value in vars(obj).items():
                if member.startswith("_") or member in getattr(obj, "_fields", ()):
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if callable(value) or isinstance(value, property) or hasattr(value, "fget"):
                    yield f"{module.__name__}.{name}.{member}", value


def own_doc(name, obj):
    """A member's docstring without the signature line pybind11 puts first."""
    doc = obj.__doc__ or ""
    short = name.rsplit(".", 1)[-1]
    if doc.startswith(f"{short}(self") or doc.startswith(f"{short}("):
        doc = doc.split("\n", 1)[1] if "\n" in doc else ""
    return doc.strip()


def test_every_public_member_has_a_docstring():
    missing = [name for name, obj in public_members() if not own_doc(name, obj)]
    assert missing == []
    names = {name for name, _ in public_members()}
    assert {"keywatch.aio.Client.track", "keywatch.Pipeline.track", "keywatch.Engine.running",
            "keywatch.Event.db", "keywatch.Event.completed", "keywatch.Event.set_error",
            "keywatch.aio.Engine.stat", "keywatch.aio.Engine.close"} <= names


def test_stubs_match_the_extension_module():
    if shutil.which("stubtest") is None:
        pytest.skip("stubtest (mypy) is not installed")
    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "keywatch._keywatch",
                          "--allowlist", str(allowlist), "--ignore-unused-allowlist"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
