"""`keywatch run` end to end: the real binary, real redis-servers, real plugins, real
signals. Fixtures and helpers: conftest.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis as redis_py

from conftest import (ROOT, _Starter, _daemon_env, _env_path, base_config, free_port, http_get,
                      toml_str, wait_for)


def track(keywatch, url: str, key: str, value: str, ttl: str = "100ms", *flags: str) -> None:
    out = keywatch("track", "--redis", url, key, value, "--ttl", ttl, *flags)
    assert out.returncode == 0, out.stderr


def queue_counts(client, ns: str = "kw", queue: str = "keys") -> tuple[int, int]:
    """(due, in flight) items of one queue, over every slot tag. In flight, as keywatch
    inspect counts it: the items of every claim batch (`c:<owner>:<seq>` keys; an alone
    batch has no `inflight` entries) and the `inflight` entries of an earlier version's
    claims (scores below 2^52)."""
    due = sum(client.zcard(k) for k in client.scan_iter(f"{ns}:{queue}:*:due"))
    inflight = sum(client.zcard(k) for k in client.scan_iter(f"{ns}:{queue}:*:c:*"))
    inflight += sum(client.zcount(k, "-inf", f"({2**52}")
                    for k in client.scan_iter(f"{ns}:{queue}:*:inflight"))
    return due, inflight


def dead_letters(client, ns: str = "kw", queue: str = "keys") -> int:
    return sum(client.xlen(k) for k in client.scan_iter(f"{ns}:{queue}:*dead*"))


def exec_handler(script: str, extra: str = "") -> str:
    """A [[handler]] of the exec plugin running `sh -c script` with the event on stdin."""
    return (f"[[handler]]\nplugin = \"exec\"\nname = \"slow\"\n{extra}\n"
            f"[handler.options]\nargv0 = \"/bin/sh\"\nargv1 = \"-c\"\n"
            f"argv2 = {toml_str(script)}\n")


# ---- bad input: exit 2, the message names what is wrong --------------------------------

@pytest.mark.parametrize("text, expected", [
    ("[redis]\nurl = \"redis://127.0.0.1:1\"\n[sweep]\nintervall = \"1s\"\n", r"intervall"),
    ("[redis]\nurl = \"redis://127.0.0.1:1\"\n[http\n", r"\.toml:3:\d+: "),
    ("workers = \"many\"\n[redis]\nurl = \"redis://127.0.0.1:1\"\n", r"workers.*'?many"),
    ("[[handler]]\nplugin = \"print\"\n", r"\[redis\] url is not set"),
    ("[redis]\nurl = \"redis://127.0.0.1:1\"\n", r"no \[\[handler\]\] table"),
])
def test_config_errors_exit_2_naming_the_file_and_the_key(keywatch, text, expected):
    out = keywatch("run", config=text)
    assert out.returncode == 2, out.stderr
    assert re.search(r"config-\d+\.toml", out.stderr), out.stderr
    assert re.search(expected, out.stderr), out.stderr
    assert out.stdout == ""


def test_missing_config_file_and_missing_option_exit_2(keywatch, tmp_path):
    out = keywatch("run", "--config", str(tmp_path / "absent.toml"))
    assert out.returncode == 2
    assert "absent.toml" in out.stderr
    out = keywatch("run")
    assert out.returncode == 2
    assert "--config FILE is required" in out.stderr


def test_embedded_with_a_configured_url_is_refused(keywatch):
    out = keywatch("run", "--embedded", config=base_config("redis://127.0.0.1:6379"))
    assert out.returncode == 2
    assert "--embedded" in out.stderr and "[redis] url" in out.stderr


# ---- --check --------------------------------------------------------------------------

def test_check_reports_what_it_would_do_and_hides_the_password(keywatch):
    server = _Starter("--single", "--notify", "KEA", "--password", "s3cret-pw")
    try:
        port = server.info["nodes"][0]["port"]
        config = base_config(f"redis://:s3cret-pw@127.0.0.1:{port}",
                             "[[handler]]\nplugin = \"stream\"\nname = \"audit\"\n"
                             "events = [\"expired\", \"evicted\"]\nprefix = \"sess:\"\n"
                             "[handler.options]\nstream = \"audit-log\"\n")
        out = keywatch("run", "--check", config=config)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    assert "s3cret-pw" not in out.stdout + out.stderr
    assert f"127.0.0.1:{port}" in out.stdout
    assert re.search(r'handler "audit": plugin stream, events expired,evicted, prefix .sess:.',
                     out.stdout), out.stdout
    assert "stream=audit-log" in out.stdout
    assert f"connected and subscribed to: 127.0.0.1:{port}" in out.stdout


def test_check_runs_no_handler_and_claims_nothing(keywatch, redis):
    # A tracked key past its deadline and live events while --check runs: a dry run must
    # neither print them (the print plugin) nor take the key from its queue.
    track(keywatch, redis.url, "due:1", "v", "100ms")
    wait_for(lambda: redis.client.exists("due:1") == 0, 10, "due:1 to expire")
    config = base_config(redis.url, "[[handler]]\nplugin = \"print\"\n"
                                    "events = [\"expired\", \"set\"]\n")
    writing = threading.Event()
    writing.set()

    def write() -> None:  # live `set` events all along the checks
        with redis_py.Redis(host="127.0.0.1", port=redis.port) as c:
            i = 0
            while writing.is_set():
                c.set(f"live:{i % 100}", "v")
                i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(3):
            out = keywatch("run", "--check", config=config)
            assert out.returncode == 0, out.stderr
            assert not [l for l in out.stdout.splitlines() if l.startswith("{")], out.stdout
            assert queue_counts(redis.client) == (1, 0)
    finally:
        writing.clear()
        writer.join()


def test_check_of_an_unreachable_server_exits_1(keywatch):
    config = (f"[redis]\nurl = \"redis://127.0.0.1:{free_port()}\"\nconnect_timeout = \"300ms\"\n"
              "[[handler]]\nplugin = \"print\"\n")
    out = keywatch("run", "--check", config=config)
    assert out.returncode == 1, out.stderr
    assert "cannot start on redis://127.0.0.1:" in out.stderr


def test_check_of_a_plugin_that_cannot_load_or_refuses_its_options_exits_1(keywatch, redis,
                                                                          tmp_path):
    missing = base_config(redis.url, "[[handler]]\nplugin = \"/nonexistent/dir/nothing.so\"\n")
    out = keywatch("run", "--check", config=missing)
    assert out.returncode == 1, out.stderr
    assert '[[handler]] "nothing"' in out.stderr and "nothing.so" in out.stderr
    refused = base_config(redis.url, "[[handler]]\nplugin = \"stream\"\n")  # no stream option
    out = keywatch("run", "--check", config=refused)
    assert out.returncode == 1, out.stderr
    assert '[[handler]] "stream"' in out.stderr and '"stream" is required' in out.stderr


def test_shipped_example_config_passes_check_against_a_real_server(keywatch, redis):
    example = (ROOT / "examples" / "keywatch.toml").read_text()
    # The example names a local server: point it at this test's.
    text, n = re.subn(r'(?m)^url\s*=\s*"redis://[^"]*"', f"url = {toml_str(redis.url)}", example)
    assert n == 1, "examples/keywatch.toml should set [redis] url once"
    text = re.sub(r'(?m)^listen\s*=\s*"[^"]*"', 'listen = "127.0.0.1:0"', text)
    out = keywatch("run", "--check", config=text)
    assert out.returncode == 0, out.stderr
    assert "every plugin loaded" in out.stdout


def test_readme_config_passes_check_against_a_real_server(keywatch, redis):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", readme, re.S)
    assert block, "README.md should show a config in a ```toml block"
    text = block.group(1).replace("redis://127.0.0.1:6379", redis.url)
    text = text.replace("127.0.0.1:9464", "127.0.0.1:0")
    out = keywatch("run", "--check", config=text)
    assert out.returncode == 0, out.stderr
    assert 'handler "audit": plugin stream' in out.stdout


def test_check_with_notify_enable_writes_nothing_and_says_what_start_would_set(keywatch,
                                                                               redis):
    redis.client.config_set("notify-keyspace-events", "")
    config = base_config(redis.url, "[notify]\nenable = true\n"
                                    "[[handler]]\nplugin = \"print\"\n")
    out = keywatch("run", "--check", config=config)
    assert out.returncode == 0, out.stderr
    assert redis.client.config_get("notify-keyspace-events")["notify-keyspace-events"] == ""
    note = re.search(rf"note: notify-keyspace-events on 127\.0\.0\.1:{redis.port} is '' and "
                     r"lacks '(\w+)': start would set it to '(\w+)' \(notify\.enable\)",
                     out.stdout)
    assert note, out.stdout
    assert set(note.group(2)) >= set("Ex"), note.group(0)


def test_a_refused_plugin_option_points_at_its_own_line(keywatch, redis):
    handler = ("[[handler]]\nplugin = \"exec\"\nname = \"run\"\n[handler.options]\n"
               "argv0 = \"/bin/true\"\n{}\n")
    for option, words in (("concurrency = 0", 'option "concurrency"'),
                          ("colour = \"red\"", 'unknown option "colour"')):
        out = keywatch("run", "--check", config=base_config(redis.url, handler.format(option)))
        assert out.returncode == 1, out.stderr
        # base_config puts the handler first: the option is on line 6, [[handler]] on line 1.
        assert re.search(r"config-\d+\.toml:6:1: \[\[handler\]\] \"run\": .*" + re.escape(words),
                         out.stderr), out.stderr


def test_a_plugin_file_named_with_a_dot_or_ending_in_so_loads(keywatch, redis, tmp_path):
    # Copies of the built stream plugin: "recorder-v1.2.so" (no name: one is made from the
    # file's), and "rec.so", a file beside the config (not "rec.so.so" on the search path).
    built = Path(os.environ["KW_HANDLERS_DIR"]) / "stream.so"
    (tmp_path / "recorder-v1.2.so").write_bytes(built.read_bytes())
    (tmp_path / "rec.so").write_bytes(built.read_bytes())
    config = base_config(redis.url,
                         f"[[handler]]\nplugin = {toml_str(str(tmp_path / 'recorder-v1.2.so'))}\n"
                         "[handler.options]\nstream = \"a\"\n"
                         "[[handler]]\nplugin = \"rec.so\"\n[handler.options]\nstream = \"b\"\n")
    out = keywatch("run", "--check", config=config)
    assert out.returncode == 0, out.stderr
    assert 'handler "recorder-v1_2": plugin ' in out.stdout, out.stdout
    assert f'handler "rec": plugin {tmp_path / "rec.so"}' in out.stdout, out.stdout


def test_a_failed_start_reports_one_error(keywatch):
    config = (f"[redis]\nurl = \"redis://127.0.0.1:{free_port()}\"\nconnect_timeout = \"1s\"\n"
              "[http]\nlisten = \"127.0.0.1:0\"\n[metrics]\nqueue_interval = \"100ms\"\n"
              "[[handler]]\nplugin = \"print\"\n")
    out = keywatch("run", config=config)
    assert out.returncode == 1, out.stderr
    assert "cannot start on redis://127.0.0.1:" in out.stderr
    assert "queue gauges" not in out.stderr  # no second complaint about the same server


def test_check_on_a_cluster_subscribes_to_every_master(keywatch, cluster):
    out = keywatch("run", "--check", config=base_config(cluster.seed,
                                                        "[[handler]]\nplugin = \"print\"\n"))
    assert out.returncode == 0, out.stderr
    masters = [f"{n['host']}:{n['port']}" for n in cluster.nodes if n["role"] == "master"]
    line = next(l for l in out.stdout.splitlines() if "connected and subscribed to:" in l)
    assert sorted(line.split(": ", 1)[1].split(", ")) == sorted(masters)


# ---- the built-in plugins, found with no KEYWATCH_PLUGIN_PATH ----------------------------

STREAM_HANDLER = "[[handler]]\nplugin = \"stream\"\n[handler.options]\nstream = \"out\"\n"


def loaded_from(stderr: str, plugin: str) -> str:
    """The file the log says `plugin` was loaded from."""
    found = re.search(rf"loaded {plugin} \S+ from (\S+\.so)", stderr)
    assert found, stderr
    return found.group(1)


def embedded_runs(daemon, **how) -> str:
    """`run --embedded` (its print plugin found by itself) until running, then stopped;
    the file print was loaded from."""
    d = daemon(None, "--embedded", **how)
    d.wait_running()
    assert d.stop() == 0
    return loaded_from(d.stderr(), "print")


def test_built_ins_are_found_from_the_build_tree(daemon, keywatch, redis):
    assert "KEYWATCH_PLUGIN_PATH" not in _daemon_env()
    out = keywatch("run", "--check", config=base_config(redis.url, STREAM_HANDLER))
    assert out.returncode == 0, out.stderr
    handlers = Path(os.environ["KW_HANDLERS_DIR"]).resolve()
    assert Path(loaded_from(out.stderr, "stream")).parent.resolve() == handlers
    assert Path(embedded_runs(daemon)).parent.resolve() == handlers


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[str, dict]:
    """`cmake --install` of the build to a fresh prefix: its keywatch binary and the
    environment to run it: no LD_LIBRARY_PATH (the binary finds the prefix's library by
    itself), no KEYWATCH_PLUGIN_PATH."""
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run([_env_path("KW_CMAKE"), "--install", _env_path("KW_BUILD_DIR"),
                    "--prefix", str(prefix)], check=True, capture_output=True, timeout=120)
    env = _daemon_env()
    env.pop("LD_LIBRARY_PATH", None)
    return str(prefix / "bin" / "keywatch"), env


def test_an_install_finds_its_built_ins(daemon, installed, redis, tmp_path):
    cli, env = installed
    config = tmp_path / "keywatch.toml"
    config.write_text(base_config(redis.url, STREAM_HANDLER))
    out = subprocess.run([cli, "run", "--check", "--config", str(config)], capture_output=True,
                         text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    prefix = Path(cli).parent.parent
    assert Path(loaded_from(out.stderr, "stream")).is_relative_to(prefix), out.stderr
    assert Path(embedded_runs(daemon, cli=cli, env=env)).is_relative_to(prefix)


# ---- running: plugins end to end ------------------------------------------------------

@pytest.fixture
def webhook_server(tmp_path):
    port_file, log_file = tmp_path / "port", tmp_path / "hooks.jsonl"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "webhook_server.py"),
                             str(port_file), str(log_file), "hook-secret"])
    try:
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(), 10,
                 "the webhook server's port")
        yield int(port_file.read_text()), log_file
    finally:
        proc.kill()
        proc.wait()


def test_webhook_and_session_index_plugins_handle_expiries_end_to_end(daemon, keywatch, redis,
                                                                      webhook_server):
    hook_port, hook_log = webhook_server
    config = base_config(redis.url, f"""
[[handler]]
plugin = "webhook"
name = "hooks"
[handler.options]
url = "http://127.0.0.1:{hook_port}/ok"
secret = "hook-secret"

[[handler]]
plugin = "session_index"
prefix = "sess:"
[handler.options]
index = "user:{{user}}:sessions"
""")
    d = daemon(config)
    d.wait_running()
    redis.client.sadd("user:alice:sessions", "sess:1", "sess:2")
    track(keywatch, redis.url, "sess:1", "alice", "100ms", "--snapshot")

    def posted():
        if not hook_log.exists():
            return None
        return [json.loads(l) for l in hook_log.read_text().splitlines()]
    hooks = wait_for(posted, 30, "the webhook's POST")
    body = json.loads(hooks[0]["body"])
    assert hooks[0]["sig_ok"] and body["key"] == "sess:1" and body["event"] == "expired"
    wait_for(lambda: redis.client.smembers("user:alice:sessions") == {b"sess:2"}, 30,
             "sess:1 removed from alice's index")
    wait_for(lambda: queue_counts(redis.client) == (0, 0), 30, "the item acked")
    assert d.stop() == 0


def test_sigterm_lets_handlers_in_flight_finish_and_acks_them(daemon, keywatch, redis, tmp_path):
    started, done = tmp_path / "started", tmp_path / "done"
    script = f"cat >/dev/null; touch {started}; sleep 1; touch {done}"
    d = daemon(base_config(redis.url, exec_handler(script)))
    d.wait_running()
    track(keywatch, redis.url, "job:1", "x", "50ms")
    wait_for(started.exists, 30, "the handler to start")
    assert queue_counts(redis.client)[1] == 1  # held by this daemon
    assert d.stop(signal.SIGTERM) == 0
    assert done.exists(), "the handler was cut short"
    assert queue_counts(redis.client) == (0, 0), "the item was not acked"
    assert d.wait_log("^stopped$")


def running(pid: int) -> bool:
    """True while pid is a process that has not ended (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"


def group_running(pgid: int) -> list:
    """The processes of process group pgid that have not ended."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in "ZXx":
            members.append(int(entry.name))
    return members


def kill_pids(path: Path) -> None:
    """SIGKILL the handler processes whose pids were appended to path (orphans of a daemon
    that did not wait for them)."""
    if path.exists():
        for pid in path.read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_second_signal_exits_at_once_and_leaves_no_program_behind(daemon, keywatch, redis,
                                                                     tmp_path):
    # The program's group: sh (then sleep, same pid) and a sleep it started in the background.
    pids = tmp_path / "pids"
    script = f"cat >/dev/null; sleep 30 & echo $! >> {pids}; echo $$ >> {pids}; exec sleep 30"
    d = daemon(base_config(redis.url, exec_handler(script)))
    try:
        d.wait_running()
        track(keywatch, redis.url, "job:2", "x", "50ms")
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 30,
                 "the handler to start")
        leader = int(pids.read_text().split()[1])
        assert len(group_running(leader)) == 2
        d.send(signal.SIGTERM)
        d.wait_log("^stopping")
        assert d.stop(signal.SIGINT) == 128 + signal.SIGINT
        assert "second signal" in d.stderr()
        # Ended before the daemon exited (SIGTERM to the group; SIGKILL after the grace).
        assert group_running(leader) == []
        assert not [p for p in map(int, pids.read_text().split()) if running(p)]
        assert sum(queue_counts(redis.client)) == 1  # retried, or in flight until its lease
        assert dead_letters(redis.client) == 0
    finally:
        kill_pids(pids)


def test_stop_timeout_bounds_a_stop_with_a_program_still_running(daemon, keywatch, redis,
                                                                tmp_path):
    pids = tmp_path / "pids"
    script = f"cat >/dev/null; echo $$ >> {pids}; exec sleep 60"
    d = daemon(base_config(redis.url, "[stop]\ntimeout = \"1s\"\n" +
                           exec_handler(script) + "timeout_ms = 120000\n"))
    try:
        d.wait_running()
        track(keywatch, redis.url, "job:3", "x", "50ms")
        wait_for(lambda: pids.exists() and pids.read_text().strip(), 30, "the handler to start")
        leader = int(pids.read_text().split()[0])
        began = time.monotonic()
        assert d.stop(signal.SIGTERM) == 0
        # stop.timeout, the program's grace and the acks' wait, far from its 60 s.
        assert time.monotonic() - began < 20, d.stderr()
        assert group_running(leader) == []
        assert d.wait_log("ended the 1 program")
        # The program was stopped, not failed: its item is retried (or, had the retry not
        # been written in time, still in flight until its lease ends), never a dead letter.
        assert sum(queue_counts(redis.client)) == 1
        assert dead_letters(redis.client) == 0
    finally:
        kill_pids(pids)


def test_a_daemon_killed_while_holding_claims_is_replaced_after_the_lease(daemon, keywatch,
                                                                          redis, tmp_path):
    pids, delivered = tmp_path / "pids", tmp_path / "delivered"
    hang = f"cat >/dev/null; echo $$ >> {pids}; exec sleep 60"
    first = daemon(base_config(redis.url, "lease = \"2s\"\n" + exec_handler(hang)))
    try:
        first.wait_running()
        track(keywatch, redis.url, "order:7", "x", "50ms")
        wait_for(lambda: pids.exists() and pids.read_text().strip(), 30, "the claim")
        first.kill()  # kill -9 while the item is claimed and in its handler
        assert queue_counts(redis.client) == (0, 1)
        second = daemon(base_config(redis.url,
                                    "lease = \"2s\"\n" + exec_handler(f"cat >> {delivered}")))
        second.wait_running()
        line = wait_for(lambda: delivered.exists() and delivered.read_text().strip(), 30,
                        "the redelivery")
        event = json.loads(line.splitlines()[0])
        assert event["key"] == "order:7"
        assert event["source"] == "lease_expired" and event["attempt"] == 2
        wait_for(lambda: queue_counts(redis.client) == (0, 0), 30, "the item acked")
        assert second.stop() == 0
    finally:
        kill_pids(pids)  # the first daemon's orphaned handler


# ---- a server that is still loading its data set -----------------------------------------

# Keys in the restarted server's dump.rdb, and Redis's own delay per key loaded (hidden
# option key-load-delay, microseconds): the load lasts at least 20000 x 200 us = 4 s on any
# machine (5 to 8 s on a busy 2-core one), long enough for all three commands to start and
# meet it.
LOADING_KEYS, LOADING_KEY_DELAY_US = 20000, 200


def test_watch_track_and_run_started_while_redis_loads_wait_and_succeed(configured_redis,
                                                                       daemon, tmp_path):
    """Issue 20 item 12: a server restarted with data to load answers LOADING for seconds;
    `watch`, `track` and `run` (redis.mode=auto) started then wait for the load, within
    redis.connect_timeout, instead of failing at once on the topology probe's LOADING."""
    server = configured_redis("--enable-debug-command", "local", "--key-load-delay",
                              str(LOADING_KEY_DELAY_US),
                              # Clients are served every KB loaded, not every 2 MB.
                              "--loading-process-events-interval-bytes", "1024")
    server.admin.execute_command("DEBUG", "POPULATE", LOADING_KEYS)
    server.admin.save()
    server.restart()
    cli = _env_path("KW_CLI")

    def start(name: str, *args: str) -> subprocess.Popen:
        assert server.loading(), f"the server had loaded before {name} started: grow the data"
        with open(tmp_path / f"{name}.out", "wb") as out, \
                open(tmp_path / f"{name}.err", "wb") as err:
            return subprocess.Popen([cli, *args], stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL)

    def stderr(name: str) -> str:
        return (tmp_path / f"{name}.err").read_text(errors="replace")

    watch = start("watch", "watch", "-v", "--redis", server.url, "--connect-timeout", "60s")
    track = start("track", "track", "--redis", server.url, "--conf",
                  "redis.connect_timeout=60s", "loaded:key", "v", "--ttl", "1h")
    assert server.loading(), "the server had loaded before run started: grow the data"
    run = daemon(f"[[handler]]\nplugin = \"print\"\n\n[redis]\nurl = {toml_str(server.url)}\n"
                 f"connect_timeout = \"60s\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n")
    try:
        # The engine's commands say they wait (proof that they met the load), then start.
        waiting = "is loading its data set into memory: waiting until it has loaded"
        wait_for(lambda: waiting in stderr("watch") or watch.poll() is not None, 60,
                 "watch to wait for the load")
        assert watch.poll() is None, stderr("watch")
        run.wait_log(waiting, 60)
        wait_for(lambda: "keywatch: watching" in stderr("watch") or watch.poll() is not None,
                 60, "watch to start")
        assert watch.poll() is None, stderr("watch")
        run.wait_running(60)
        assert track.wait(60) == 0, stderr("track")
        assert not server.loading()
        assert server.admin.ttl("loaded:key") > 0
    finally:
        for p in (watch, track):
            if p.poll() is None:
                p.kill()
            p.wait(30)


# ---- --embedded, logs, HTTP -------------------------------------------------------------

def test_embedded_prints_events_and_stops_its_server(daemon):
    d = daemon(None, "--embedded")
    started = d.wait_log("^started a private redis-server")
    port = int(re.search(r"redis://127\.0\.0\.1:(\d+)", started["msg"]).group(1))
    server_pid = int(re.search(r"\(pid (\d+)", started["msg"]).group(1))
    d.wait_running()
    client = redis_py.Redis(host="127.0.0.1", port=port)
    client.set("greeting", "hello", px=50)
    line = wait_for(lambda: d.stdout().strip(), 30, "the printed event")
    event = json.loads(line.splitlines()[0])
    assert event["event"] == "expired" and event["key"] == "greeting"
    client.close()
    assert d.stop() == 0
    wait_for(lambda: not os.path.exists(f"/proc/{server_pid}"), 30, "the private server gone")


def test_json_log_lines_parse_and_carry_fields(daemon, redis):
    d = daemon(base_config(redis.url, "[[handler]]\nplugin = \"print\"\n"))
    d.wait_running()
    connected = d.wait_log("^connected and subscribed$")
    assert connected["node"] == f"127.0.0.1:{redis.port}"
    assert d.stop() == 0
    lines = d.stderr().splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        assert list(record)[:3] == ["ts", "level", "msg"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"])
        assert record["level"] in ("debug", "info", "warn", "error")


def test_plugin_log_lines_carry_the_handler_and_the_event_id(daemon, keywatch, redis):
    # print's stdout is a pipe nobody reads: its first failed write is logged by the plugin,
    # through the host, while it handles the event.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        d = daemon(base_config(redis.url, "[[handler]]\nplugin = \"print\"\nname = \"out\"\n"),
                   stdout=write_end)
    finally:
        os.close(write_end)
    loaded = d.wait_log("^plugin out: loaded print")
    assert loaded["handler"] == "out"
    d.wait_running()
    track(keywatch, redis.url, "lost:1", "x", "50ms")
    warning = d.wait_log("cannot write events to stdout")
    assert warning["level"] == "warn" and warning["handler"] == "out"
    assert warning["event_id"].startswith("q:keys:")
    # Not acked: handed back for a retry.
    wait_for(lambda: queue_counts(redis.client)[0] == 1, 30, "the item back in its queue")
    assert d.stop() == 0


def test_text_log_format_and_level(daemon, redis):
    # Listening beyond loopback without a token is a warning: one line to look at.
    config = base_config(redis.url, "[log]\nformat = \"text\"\nlevel = \"warn\"\n"
                                    "[[handler]]\nplugin = \"print\"\n")
    d = daemon(config.replace("127.0.0.1:0", "0.0.0.0:0"))
    wait_for(lambda: "without a token" in d.stderr(), 30, "the warning")
    assert d.stop() == 0
    lines = d.stderr().splitlines()
    assert lines
    for line in lines:
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (warn|error) ", line), line
    assert re.search(r" address=0\.0\.0\.0:\d+", d.stderr())


def test_sighup_reopens_the_log_file(daemon, redis, tmp_path):
    log = tmp_path / "kw.log"
    d = daemon(base_config(redis.url, f"[log]\nfile = {toml_str(str(log))}\n"
                                      "[[handler]]\nplugin = \"print\"\n"))
    d.wait_log("^running$", path=log)
    log.rename(tmp_path / "kw.log.1")
    d.send(signal.SIGHUP)
    d.wait_log("^log file reopened$", path=log)
    assert any(l["msg"] == "running" for l in d.logs(tmp_path / "kw.log.1"))
    assert d.proc.poll() is None, "SIGHUP must not stop the daemon"
    assert d.stop() == 0
    assert d.wait_log("^stopped$", path=log)


def test_http_endpoints_and_token(daemon, redis):
    config = base_config(redis.url, "[[handler]]\nplugin = \"print\"\n").replace(
        "listen = \"127.0.0.1:0\"", "listen = \"0.0.0.0:0\"\ntoken = \"t0ken\"")
    d = daemon(config)
    d.wait_running()
    d.http = d.http.replace("0.0.0.0", "127.0.0.1")
    assert d.get("/healthz")[0] == 200
    assert d.get("/metrics")[0] == 401
    status, body, headers = d.get("/metrics", token="t0ken")
    assert status == 200 and "keywatch_build_info" in body
    wait_for(lambda: d.get("/readyz", token="t0ken")[0] == 200, 30, "/readyz 200")
    assert not [l for l in d.logs() if "without a token" in l["msg"]]
    assert d.stop() == 0


def test_listening_beyond_loopback_without_a_token_warns(daemon, redis):
    config = base_config(redis.url, "[[handler]]\nplugin = \"print\"\n").replace(
        "127.0.0.1:0", "0.0.0.0:0")
    d = daemon(config)
    warning = d.wait_log("without a token")
    assert warning["level"] == "warn"
    d.wait_running()
    assert d.stop() == 0


def test_http_address_in_use_exits_1(daemon, redis):
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = base_config(redis.url, "[[handler]]\nplugin = \"print\"\n").replace(
            "127.0.0.1:0", f"127.0.0.1:{port}")
        d = daemon(config)
        assert d.proc.wait(30) == 1
    assert "[http] listen" in d.stderr()
