"""Shared fixtures of the daemon's end-to-end tests (test_run.py, test_metrics.py,
test_check.py): the real `keywatch` binary against real redis-servers.

Environment (set by ctest, cli/CMakeLists.txt):
  KW_CLI           the keywatch binary
  KW_TEST_CLUSTER  tests/support/kw_test_cluster: starts one private redis-server
                   (--single) or a 3-master 3-replica cluster, prints its nodes as one JSON
                   line, stops them when its stdin closes
  KW_HANDLERS_DIR  the built plugins (<build>/handlers): the daemon finds them there
                   by itself (it runs from the build tree), with no KEYWATCH_PLUGIN_PATH
  KW_BUILD_DIR     the build folder, and KW_CMAKE the cmake that built it (cmake --install)

Fixtures: ``redis`` (a private server, ``.url``, ``.port``, ``.client`` a redis-py client),
``cluster`` (module scope), ``daemon`` (a factory: ``daemon(config_text, *args)`` starts
``keywatch run --config FILE`` and stops it by pid at the end), ``keywatch`` (runs the
binary to completion). Helpers: ``wait_for``, ``http_get``, ``free_port``, ``toml_str``.
Waits poll with a deadline; nothing sleeps as an assertion.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest
import redis as redis_py

ROOT = Path(__file__).resolve().parents[3]


def _env_path(name: str) -> str:
    value = os.environ.get(name, "")
    if not value or not os.path.exists(value):
        pytest.skip(f"{name} is not set (run through ctest: ctest -L cli)")
    return value


def sanitized_build() -> bool:
    """True when KW_BUILD_DIR is a sanitizer build, where moving megabytes through the
    daemon's JSON takes 10-20x longer than in a release build."""
    cache = Path(os.environ.get("KW_BUILD_DIR", "")) / "CMakeCache.txt"
    try:
        text = cache.read_text()
    except OSError:
        return False
    return any(f"KW_SANITIZE_{s}:BOOL=ON" in text for s in ("THREAD", "ADDRESS"))


def wait_for(predicate: Callable[[], object], timeout: float = 20.0,
             what: str = "condition") -> object:
    """Polls predicate until it returns something true (returned); fails the test naming
    what after timeout seconds."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def url_host(host: str) -> str:
    """host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def toml_str(text: str) -> str:
    """A TOML basic string holding text (JSON's escapes are TOML's)."""
    return json.dumps(text)


def http_get(url: str, token: Optional[str] = None,
             timeout: float = 10.0) -> tuple[int, str, dict]:
    """GET url: (status, body, headers), also for 4xx/5xx answers."""
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


class _Starter:
    """kw_test_cluster as a child: its JSON line, and a stop that closes its stdin."""

    def __init__(self, *args: str) -> None:
        starter = _env_path("KW_TEST_CLUSTER")
        self._proc = subprocess.Popen([starter, *args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait(30)
            pytest.fail(f"{starter} printed no nodes (exit status {self._proc.returncode})")
        self.info = json.loads(line)

    def stop(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(60)


class RedisServer:
    """One private redis-server (notify-keyspace-events KEA) on host (127.0.0.1 or ::1)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._starter = _Starter("--single", "--notify", "KEA", "--host", host)
        node = self._starter.info["nodes"][0]
        self.port = int(node["port"])
        self.pid = int(node["pid"])
        self.url = node["url"]
        self.client = redis_py.Redis(host=host, port=self.port)

    def stop(self) -> None:
        self.client.close()
        self._starter.stop()


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


class Cluster:
    """A real 3-master, 3-replica Redis Cluster; ``seed`` a node's URL, ``nodes`` what the
    starter printed (host, port, url, pid, role)."""

    def __init__(self) -> None:
        self._starter = _Starter("--notify", "KEA")
        self.seed: str = self._starter.info["seed"]
        self.nodes: list = self._starter.info["nodes"]

    def stop(self) -> None:
        self._starter.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def _daemon_env() -> dict:
    """The environment of the binaries under test: without KEYWATCH_PLUGIN_PATH, so that
    they find the built-in plugins as a user's do."""
    env = dict(os.environ)
    env.pop("KEYWATCH_PLUGIN_PATH", None)
    return env


class Daemon:
    """`keywatch run` as a child process, its stdout and stderr in files under tmp_path.
    With the default JSON log on stderr, ``logs()`` parses its lines; ``http`` is the
    address the HTTP server bound (from the "running" line), for ``get``."""

    def __init__(self, tmp_path: Path, config: Optional[str], args: tuple,
                 stdout: Optional[int] = None, cli: Optional[str] = None,
                 env: Optional[dict] = None) -> None:
        self.dir = tmp_path / f"daemon-{time.monotonic_ns()}"
        self.dir.mkdir()
        cmd = [cli or _env_path("KW_CLI"), "run"]
        if config is not None:
            self.config = self.dir / "keywatch.toml"
            self.config.write_text(config)
            cmd += ["--config", str(self.config)]
        cmd += list(args)
        self.stdout_path = self.dir / "stdout"
        self.stderr_path = self.dir / "stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out if stdout is None else stdout,
                                         stderr=err, stdin=subprocess.DEVNULL,
                                         env=env or _daemon_env())
        self.http: Optional[str] = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def logs(self, path: Optional[Path] = None) -> list:
        """The JSON log lines written so far (stderr, or the file at path)."""
        path = path or self.stderr_path
        if not path.exists():
            return []
        text = path.read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def wait_log(self, msg: str, timeout: float = 30.0, path: Optional[Path] = None) -> dict:
        """The first JSON log line whose msg matches the regex msg."""
        def found() -> Optional[dict]:
            exited = self.proc.poll() is not None
            line = next((l for l in self.logs(path) if re.search(msg, l.get("msg", ""))), None)
            if not line and exited:
                self._check_alive(msg)
            return line
        return wait_for(found, timeout, f"a log line matching {msg!r}")

    def wait_running(self, timeout: float = 30.0) -> dict:
        line = self.wait_log("^running$", timeout)
        self.http = line.get("http")
        return line

    def _check_alive(self, waiting_for: str) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"keywatch run exited {self.proc.returncode} while waiting for "
                        f"{waiting_for!r}; stderr:\n{self.stderr()}")

    def get(self, path: str, token: Optional[str] = None) -> tuple[int, str, dict]:
        assert self.http, "wait_running() first (or the HTTP server is off)"
        return http_get(f"http://{self.http}{path}", token)

    def send(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Sends sig and waits for the exit status."""
        self.send(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """daemon(config_text, *args, stdout=FD, cli=PATH, env=DICT): a running `keywatch run`;
    config_text None: no --config (with --embedded); stdout: a file descriptor instead of the
    file Daemon.stdout() reads; cli and env: another binary (an installed one) and its
    environment. Every daemon is stopped at the end (SIGKILL if SIGTERM is not enough)."""
    started: list = []

    def start(config: Optional[str], *args: str, stdout: Optional[int] = None,
              cli: Optional[str] = None, env: Optional[dict] = None) -> Daemon:
        d = Daemon(tmp_path, config, args, stdout, cli, env)
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            if d.proc.poll() is None:
                d.send(signal.SIGTERM)
                try:
                    d.proc.wait(30)
                except subprocess.TimeoutExpired:
                    d.kill()


@pytest.fixture
def keywatch(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:
    """keywatch(*args, config=None): runs the binary to its end; config text is written to
    a file passed as --config."""
    def run(*args: str, config: Optional[str] = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess:
        cmd = [_env_path("KW_CLI"), *args]
        if config is not None:
            path = tmp_path / f"config-{time.monotonic_ns()}.toml"
            path.write_text(config)
            cmd += ["--config", str(path)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=_daemon_env(), stdin=subprocess.DEVNULL)
    return run


def base_config(url: str, extra: str = "") -> str:
    """A minimal daemon config: extra (top-level engine options and tables such as
    [[handler]]), then the Redis and HTTP on any free loopback port. extra comes first so
    that its top-level keys stay top-level."""
    return f"{extra}\n\n[redis]\nurl = {toml_str(url)}\n\n[http]\nlisten = \"127.0.0.1:0\"\n"


# --- test_check.py: a redis-server started with the options a case needs ------------------

class ConfiguredServer:
    """A private redis-server (from PATH, a free loopback port, a directory under tmp_path,
    no persistence unless the options say so) started with extra command-line options: the
    misconfiguration a `keywatch check` case inspects. ``admin`` is a client of the default
    user, to set the scene. ``restart()`` kills it and starts it again on its data (SAVE
    first to keep any). Stopped by pid."""

    def __init__(self, root: Path, options: list, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_port(host)
        self.dir = root / f"redis-{self.port}"
        self.dir.mkdir()
        self._options = options
        self._log = open(self.dir / "log", "wb")
        self._spawn()
        self.url = f"redis://{url_host(host)}:{self.port}"
        self.admin = redis_py.Redis(host=host, port=self.port)
        wait_for(self._answers, 20, f"redis-server on port {self.port}")

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", self.host, "--dir",
             str(self.dir), "--save", "", "--appendonly", "no", *self._options],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def restart(self) -> None:
        """kill -9, then the same server on the same port and directory (it loads the
        dump.rdb a SAVE wrote there); returns once it accepts connections, which may be
        while it is still loading (``loading()``)."""
        self.proc.kill()
        self.proc.wait(30)
        self._spawn()
        wait_for(self._accepts, 20, f"redis-server on port {self.port} after a restart")

    def _accepts(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"redis-server exited: {(self.dir / 'log').read_text()}")
        try:
            self.admin.info("persistence")  # answered while loading too
            return True
        except redis_py.ConnectionError:
            return False

    def loading(self) -> bool:
        """INFO persistence says loading:1 (the server is loading its data set)."""
        return int(self.admin.info("persistence").get("loading", 0)) == 1

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"redis-server exited: {(self.dir / 'log').read_text()}")
        try:
            return bool(self.admin.ping())
        except redis_py.AuthenticationError:
            return True  # --requirepass: it answers (admin is of no use then)
        except redis_py.ConnectionError:
            return False

    def stop(self) -> None:
        self.admin.close()
        self.proc.kill()
        self.proc.wait(30)
        self._log.close()


@pytest.fixture
def configured_redis(tmp_path: Path) -> Iterator[Callable[..., ConfiguredServer]]:
    """configured_redis(*options, host="127.0.0.1"): a running redis-server with those
    options, bound to host."""
    started: list = []

    def start(*options: str, host: str = "127.0.0.1") -> ConfiguredServer:
        s = ConfiguredServer(tmp_path, list(options), host)
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            s.stop()
