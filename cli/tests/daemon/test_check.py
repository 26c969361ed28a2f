"""`keywatch check --redis URL [--json]` against real redis-servers with real
misconfigurations: notifications off, CONFIG renamed, an ACL user lacking psubscribe,
maxmemory-policy allkeys-lru, a healthy server, a cluster (and one with slots unassigned).

Environment (set by ctest): KW_CLI, KW_TEST_CLUSTER. Fixtures from conftest.py:
``configured_redis`` (a redis-server started with the options a case needs) and
``cluster``. Waits poll with a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Callable

import pytest
import redis as redis_py

from conftest import (ROOT, Cluster, ConfiguredServer, _env_path, _Starter, free_port,
                      wait_for)

# What keywatch needs by default: keyevents expired, evicted (the handlers), del and
# rename_from (tracked keys), so notify-keyspace-events must hold E, x, e and g.
NOTIFY = "Exeg"

Server = ConfiguredServer


def healthy(configured_redis: Callable[..., Server], *extra: str,
            host: str = "127.0.0.1") -> Server:
    """A server with everything keywatch wants: the flags and AOF."""
    return configured_redis("--notify-keyspace-events", NOTIFY, "--appendonly", "yes", *extra,
                            host=host)


def check(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([_env_path("KW_CLI"), "check", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def check_json(*args: str) -> tuple[int, dict]:
    """The exit status and the parsed document of check --json."""
    r = check(*args, "--json")
    assert r.stdout.count("\n") == 1, r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


def lines(doc: dict, name: str) -> list:
    found = [c for c in doc["checks"] if c["check"] == name]
    assert found, f"no '{name}' line in {json.dumps(doc, indent=1)}"
    return found


def verdict(doc: dict, name: str) -> str:
    (line,) = lines(doc, name)
    return line["verdict"]


def acl_user(server: Server, name: str, rule: str, *changes: str) -> str:
    """Creates ACL user name (password pw) from the rule keywatch check suggests, with
    changes applied after it; returns its URL."""
    words = rule.replace(">PASSWORD", ">pw").split()
    server.admin.execute_command("ACL", "SETUSER", name, "reset", *words, *changes)
    return f"redis://{name}:pw@127.0.0.1:{server.port}"


def test_healthy_server_passes_every_check(configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    status, doc = check_json("--redis", s.url)
    assert status == 0, doc
    assert doc["passed"] is True and doc["mode"] == "standalone"
    assert doc["summary"]["fail"] == 0 and doc["summary"]["warn"] == 0, doc
    for name in ("connection", "version", "role", "config", "notifications", "persistence",
                 "memory policy", "acl: channels", "acl: queue scripts",
                 "acl: script commands", "acl: tracked keys", "acl: queue discovery",
                 "acl: alone claims", "acl: cluster discovery", "clock"):
        assert verdict(doc, name) == "ok", name
    assert all("fix" not in c for c in doc["checks"])


def test_check_writes_nothing_and_publishes_nothing(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    events = s.admin.pubsub()
    events.psubscribe("*")  # every channel: keyevents, the heartbeat channel
    wait_for(lambda: events.get_message(timeout=0.1), 10, "the psubscribe confirmation")
    assert check("--redis", s.url).returncode == 0
    persistence = s.admin.info("persistence")
    assert persistence["rdb_changes_since_last_save"] == 0
    assert s.admin.dbsize() == 0
    assert s.admin.script_exists(hashlib.sha1(b"return 0").hexdigest()) == [False]
    stats = s.admin.info("commandstats")
    for written in ("cmdstat_zadd", "cmdstat_hset", "cmdstat_xadd", "cmdstat_publish",
                    "cmdstat_eval", "cmdstat_script|load", "cmdstat_del"):
        assert stats.get(written, {}).get("calls", 0) == 0, (written, stats[written])
    # A PING round trip orders this client's reads after anything the server sent it.
    events.ping()
    seen = []
    while (m := events.get_message(timeout=0.2)) is not None:
        seen.append(m)
    assert [m for m in seen if m["type"] == "pmessage"] == []
    events.close()


def test_notifications_off_fail_with_the_config_set_that_fixes_them(
        configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--appendonly", "yes")  # notify-keyspace-events "" (Redis's default)
    r = check("--redis", s.url)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"lacks '{NOTIFY}'" in r.stdout
    assert f"fix: CONFIG SET notify-keyspace-events {NOTIFY}" in r.stdout
    assert r.stdout.rstrip().endswith("until the failed checks are fixed")
    status, doc = check_json("--redis", s.url)
    assert status == 1 and doc["passed"] is False
    (line,) = lines(doc, "notifications")
    assert line["verdict"] == "fail" and line["node"] == f"127.0.0.1:{s.port}"
    # Applying the fix it names makes the line pass.
    s.admin.execute_command(*line["fix"].split(" (")[0].split())
    assert check_json("--redis", s.url)[0] == 0


def test_why_missing_flags_fail_a_deleted_tracked_key_is_reported_expired(
        configured_redis: Callable[..., Server]) -> None:
    """What docs/production.md says of a server without notifications: a tracked key
    deleted outside keywatch is not untracked, and at its deadline it is reported as
    `expired` - the reason the notifications line fails rather than warns."""
    s = configured_redis("--appendonly", "yes")  # notify-keyspace-events ""
    assert verdict(check_json("--redis", s.url)[1], "notifications") == "fail"
    cli = _env_path("KW_CLI")
    track = subprocess.run([cli, "track", "--redis", s.url, "order:9", "v", "--ttl", "300ms"],
                           capture_output=True, text=True, timeout=30)
    assert track.returncode == 0, track.stderr
    assert s.admin.delete("order:9") == 1  # deleted long before its deadline
    watch = subprocess.run([cli, "watch", "--redis", s.url, "--events", "expired",
                            "--duration", "2s"], capture_output=True, text=True, timeout=60)
    events = [json.loads(l) for l in watch.stdout.splitlines()]
    assert [(e["event"], e["key"], e["source"]) for e in events] == [
        ("expired", "order:9", "sweep")], watch.stdout + watch.stderr


def test_partial_flags_name_what_is_missing(configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--appendonly", "yes", "--notify-keyspace-events", "Ex")
    status, doc = check_json("--redis", s.url, "--events", "expired")
    (line,) = lines(doc, "notifications")
    assert status == 1 and line["verdict"] == "fail"
    assert "lacks 'g'" in line["detail"]  # del and rename_from, for tracked keys
    status, doc = check_json("--redis", s.url, "--events", "expired",
                             "--conf", "track.enable=false")
    assert status == 0 and verdict(doc, "notifications") == "ok"


def test_task_queues_alone_need_no_notifications(configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--appendonly", "yes")  # notify-keyspace-events ""
    status, doc = check_json("--redis", s.url, "--events", "task", "--conf", "track.enable=false",
                             "--conf", "queues=mail,sms")
    (line,) = lines(doc, "notifications")
    assert status == 0 and line["verdict"] == "ok", doc
    assert "no keyspace event" in line["detail"]
    assert "&__keyevent" not in doc["acl_rule"]
    assert verdict(doc, "acl: queue scripts") == "ok"


def test_config_renamed_is_a_warning_that_says_what_keywatch_cannot_do(
        configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--rename-command", "CONFIG", "", "--notify-keyspace-events", NOTIFY,
               "--appendonly", "yes")
    status, doc = check_json("--redis", s.url)
    assert status == 0, doc  # a managed Redis without CONFIG can run keywatch
    (config,) = lines(doc, "config")
    assert config["verdict"] == "warn"
    assert "CONFIG is renamed or disabled" in config["detail"]
    assert "notify.enable=true cannot set it" in config["detail"]
    assert "redis.conf" in config["fix"]
    (notify,) = lines(doc, "notifications")
    assert notify["verdict"] == "warn" and NOTIFY in notify["fix"]
    # INFO still tells the rest.
    assert verdict(doc, "persistence") == "ok"
    assert verdict(doc, "memory policy") == "ok"


def test_acl_user_without_psubscribe_fails_with_the_grant(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "nopsub", rule, "-psubscribe")
    r = check("--redis", url)
    assert r.returncode == 1, r.stdout
    assert "fail  acl: channels" in r.stdout
    assert "fix: ACL SETUSER nopsub +psubscribe" in r.stdout
    assert "pw" not in r.stdout.replace("PASSWORD", "")  # the password is never printed
    status, doc = check_json("--redis", url)
    (line,) = lines(doc, "acl: channels")
    assert "PSUBSCRIBE __keyevent@*__:expired" in line["detail"]
    assert "NOPERM" in line["detail"]
    for other in ("acl: queue scripts", "acl: script commands", "acl: tracked keys"):
        assert verdict(doc, other) == "ok", other
    # The user and password may come from the library's options instead of the URL.
    status, same = check_json("--redis", s.url, "-c", "redis.user=nopsub", "-c",
                              "redis.password=pw")
    assert status == 1 and lines(same, "acl: channels") == [line]


def test_acl_refusals_name_the_command_key_or_channel_to_grant(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "narrow", rule, "-zadd", "resetkeys", "~kw:keys:*", "%R~*",
                   "resetchannels", "&__keyevent@*__:expired", "&__keywatch:heartbeat:*")
    status, doc = check_json("--redis", url, "--conf", "queues=mail")
    assert status == 1
    (scripts,) = lines(doc, "acl: queue scripts")
    assert scripts["verdict"] == "fail"
    assert "kw:mail:{0}:due" in scripts["detail"] and scripts["fix"] == "ACL SETUSER narrow ~kw:*"
    (inner,) = lines(doc, "acl: script commands")
    assert "+zadd" in inner["fix"].split() and "~kw:*" in inner["fix"].split()
    (channels,) = lines(doc, "acl: channels")
    assert channels["fix"] == ("ACL SETUSER narrow &__keyevent@*__:evicted "
                               "&__keyevent@0__:del &__keyevent@0__:rename_from")


def test_the_rule_in_the_production_docs_is_the_one_check_suggests(
        configured_redis: Callable[..., Server]) -> None:
    doc_lines = (ROOT / "docs" / "production.md").read_text().splitlines()
    (documented,) = [l for l in doc_lines if l.startswith("ACL SETUSER keywatch on ")]
    s = healthy(configured_redis)
    status, doc = check_json("--redis", s.url)
    assert documented == "ACL SETUSER keywatch " + doc["acl_rule"]


def test_the_suggested_acl_rule_passes_and_runs_the_engine(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "kw", rule)
    status, doc = check_json("--redis", url)
    assert status == 0 and doc["summary"]["fail"] == 0 and doc["summary"]["warn"] == 0, doc
    status, doc = check_json("--redis", url, "-c", "dedupe.enable=true")
    assert status == 0 and verdict(doc, "acl: dedupe") == "ok"
    url_noset = acl_user(s, "noset", rule, "-set")
    status, doc = check_json("--redis", url_noset, "-c", "dedupe.enable=true")
    (dedupe,) = lines(doc, "acl: dedupe")
    assert status == 1 and dedupe["verdict"] == "fail" and dedupe["fix"] == "ACL SETUSER noset +set"
    assert "SET kw:dedupe:{0}:" in dedupe["detail"]
    # The rule is enough for the engine itself: a key tracked by the default user is
    # delivered to a watcher running as the restricted user.
    cli = _env_path("KW_CLI")
    track = subprocess.run([cli, "track", "--redis", s.url, "session:1", "v", "--ttl", "200ms"],
                           capture_output=True, text=True, timeout=30)
    assert track.returncode == 0, track.stderr
    watch = subprocess.run([cli, "watch", "--redis", url, "--events", "expired,evicted",
                            "--duration", "3s"], capture_output=True, text=True, timeout=60)
    assert watch.returncode == 0, watch.stderr
    events = [json.loads(l) for l in watch.stdout.splitlines()]
    assert [(e["key"], e["queue"]) for e in events] == [("session:1", "keys")], watch.stdout


def test_read_access_to_tracked_keys_is_checked_on_the_key_given(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"].replace("%R~*", "%R~session:*")
    url = acl_user(s, "sessions", rule)
    # Without --key the probe key is arbitrary: a refusal is only a warning.
    status, doc = check_json("--redis", url)
    (line,) = lines(doc, "acl: tracked keys")
    assert status == 0 and line["verdict"] == "warn" and "--key" in line["fix"]
    status, doc = check_json("--redis", url, "--key", "session:42")
    assert status == 0 and verdict(doc, "acl: tracked keys") == "ok"
    status, doc = check_json("--redis", url, "--key", "cart:42")
    (line,) = lines(doc, "acl: tracked keys")
    assert status == 1 and line["verdict"] == "fail"
    assert "EXISTS cart:42" in line["detail"]
    assert line["fix"] == "ACL SETUSER sessions %R~<your tracked keys>"


def test_without_scan_the_queue_gauges_cannot_find_the_queues(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "noscan", rule, "-scan")
    status, doc = check_json("--redis", url)
    (line,) = lines(doc, "acl: queue discovery")
    assert status == 1 and line["fix"] == "ACL SETUSER noscan +scan"
    # What it stands for: keywatch inspect (the daemon's queue gauges read the same) cannot
    # find the queues without it.
    inspect = subprocess.run([_env_path("KW_CLI"), "inspect", "--redis", url],
                             capture_output=True, text=True, timeout=30)
    assert inspect.returncode == 1 and "no permissions to run the 'scan'" in inspect.stdout


def test_without_pubsub_claims_are_shared_and_check_warns_with_the_grant(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    assert "+pubsub|numsub" in rule.split() and "+pubsub|channels" in rule.split(), rule
    url = acl_user(s, "nopubsub", rule, "-pubsub|numsub", "-pubsub|channels")
    status, doc = check_json("--redis", url)
    assert status == 0, doc
    (line,) = lines(doc, "acl: alone claims")
    assert line["verdict"] == "warn" and "in-flight entries" in line["detail"], line
    assert "PUBSUB NUMSUB __keywatch:heartbeat:engines:kw" in line["detail"], line
    assert line["fix"] == "ACL SETUSER nopubsub +pubsub|numsub +pubsub|channels", line
    # With queue.done_mode=always the engine does not look for other engines' channels.
    status, doc = check_json("--redis", s.url, "-c", "queue.done_mode=always")
    assert "+pubsub|channels" not in doc["acl_rule"].split(), doc["acl_rule"]


def test_a_user_without_multi_gets_warnings_not_guesses(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "nomulti", rule, "-multi")
    status, doc = check_json("--redis", url)
    assert status == 0, doc
    (inner,) = lines(doc, "acl: script commands")
    assert inner["verdict"] == "warn" and "not probed" in inner["detail"]
    assert "zadd" in inner["detail"] and "+multi +discard" in inner["fix"]
    assert verdict(doc, "acl: tracked keys") == "ok"  # reads are still probed


def test_without_cluster_commands_the_fix_offers_standalone_mode(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    rule = check_json("--redis", s.url)[1]["acl_rule"]
    url = acl_user(s, "nocluster", rule, "-cluster|shards", "-cluster|slots")
    status, doc = check_json("--redis", url)
    assert status == 1
    (line,) = lines(doc, "acl: cluster discovery")
    assert "redis.mode=standalone" in line["fix"]
    assert verdict(doc, "version") == "ok"  # the rest is still checked
    status, doc = check_json("--redis", url, "--conf", "redis.mode=standalone")
    assert status == 0 and "+cluster|shards" not in doc["acl_rule"]


def test_check_over_ipv6(configured_redis: Callable[..., Server]) -> None:
    # A master and its replica on ::1: every line names its node as the URL does,
    # "[::1]:PORT" (INFO replication lists the replica as ip=::1).
    master = healthy(configured_redis, host="::1")
    replica = healthy(configured_redis, "--replicaof", "::1", str(master.port), host="::1")
    wait_for(lambda: master.admin.info("replication")["connected_slaves"] == 1, 20,
              "the replica to connect")
    assert master.url == f"redis://[::1]:{master.port}"
    status, doc = check_json("--redis", master.url)
    assert status == 0 and doc["passed"] is True, doc
    nodes = {c["node"] for c in doc["checks"] if c.get("node")}
    assert nodes == {f"[::1]:{master.port}", f"[::1]:{replica.port}"}, doc
    (line,) = lines(doc, "replica notifications")
    assert line["node"] == f"[::1]:{replica.port}" and line["verdict"] == "ok", line
    # The replica is no target: the role line names the master it follows the same way.
    status, doc = check_json("--redis", replica.url)
    (role,) = lines(doc, "role")
    assert role["verdict"] == "fail", role
    assert role["detail"].startswith(f"a replica of [::1]:{master.port}:"), role


def test_a_replica_is_no_target_and_its_flags_are_checked_for_failover(
        configured_redis: Callable[..., Server]) -> None:
    master = healthy(configured_redis)
    replica = configured_redis("--appendonly", "yes", "--replicaof", "127.0.0.1", str(master.port))
    wait_for(lambda: master.admin.info("replication")["connected_slaves"] == 1, 20,
              "the replica to connect")
    status, doc = check_json("--redis", master.url)
    (line,) = lines(doc, "replica notifications")
    assert status == 0 and line["verdict"] == "warn", doc  # nothing wrong until a failover
    assert line["node"] == f"127.0.0.1:{replica.port}"
    assert f"lacks '{NOTIFY}'" in line["detail"] and "not replicated" in line["fix"]
    replica.admin.config_set("notify-keyspace-events", NOTIFY)
    status, doc = check_json("--redis", master.url)
    assert status == 0 and verdict(doc, "replica notifications") == "ok"
    # The replica itself is no URL for keywatch.
    status, doc = check_json("--redis", replica.url)
    (role,) = lines(doc, "role")
    assert status == 1 and role["verdict"] == "fail"
    assert f"a replica of 127.0.0.1:{master.port}" in role["detail"]
    assert role["fix"] == "give keywatch the master's URL"


def test_a_unix_socket_with_a_db_needs_select_and_no_cluster_commands(
        configured_redis: Callable[..., Server], tmp_path: Path) -> None:
    sock = tmp_path / "redis.sock"
    healthy(configured_redis, "--unixsocket", str(sock))
    status, doc = check_json("--redis", f"unix://{sock}?db=2")
    assert status == 0 and doc["summary"]["warn"] == 0, doc
    assert not [c for c in doc["checks"] if c["check"] == "acl: cluster discovery"]
    assert "+cluster|shards" not in doc["acl_rule"] and "+select" in doc["acl_rule"]


def test_allkeys_eviction_with_maxmemory_fails(configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
    status, doc = check_json("--redis", s.url)
    assert status == 1
    (line,) = lines(doc, "memory policy")
    assert line["verdict"] == "fail" and "allkeys-lru" in line["detail"]
    assert "keywatch's own queue keys" in line["detail"]
    assert line["fix"].startswith("CONFIG SET maxmemory-policy volatile-lru")
    s.admin.config_set("maxmemory-policy", "volatile-lru")
    status, doc = check_json("--redis", s.url)
    (line,) = lines(doc, "memory policy")
    assert status == 0 and line["verdict"] == "ok" and "'evicted'" in line["detail"]


def test_an_evicted_tracked_key_is_reported_as_evicted(
        configured_redis: Callable[..., Server]) -> None:
    """What docs/production.md says of a volatile-* policy: the tracked key's eviction is
    delivered as `evicted` (with its snapshot), and keywatch's queues are not evicted."""
    s = configured_redis("--notify-keyspace-events", NOTIFY, "--appendonly", "yes",
                         "--maxmemory-policy", "volatile-ttl")
    cli = _env_path("KW_CLI")
    track = subprocess.run([cli, "track", "--redis", s.url, "session:7", "alice", "--ttl", "60s",
                            "--snapshot"], capture_output=True, text=True, timeout=30)
    assert track.returncode == 0, track.stderr
    watch = subprocess.Popen([cli, "watch", "--redis", s.url, "--events", "expired,evicted",
                              "--duration", "30s"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        # One PSUBSCRIBE carries every pattern: any pattern counted means all are there.
        wait_for(lambda: s.admin.execute_command("PUBSUB", "NUMPAT") > 0, 20,
                 "the watcher's subscription")
        s.admin.config_set("maxmemory", "1")  # evicts every key with a TTL, in TTL order
        with pytest.raises(redis_py.ResponseError, match="OOM"):
            s.admin.set("filler", "x")
        s.admin.config_set("maxmemory", "0")
        assert watch.stdout is not None
        event = json.loads(watch.stdout.readline())
    finally:
        watch.terminate()
        watch.wait(30)
    assert (event["event"], event["key"], event["value"], event["queue"], event["source"]) == (
        "evicted", "session:7", "alice", "keys", "notification")
    assert s.admin.exists("kw:keys:{0}:data") == 1  # the queue was not evicted
    assert s.admin.zscore("kw:keys:{0}:due", "session:7") is None  # claimed at the eviction


def test_missing_persistence_is_a_warning(configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--notify-keyspace-events", NOTIFY)
    status, doc = check_json("--redis", s.url)
    (line,) = lines(doc, "persistence")
    assert status == 0 and line["verdict"] == "warn"
    assert "appendonly yes" in line["fix"]


def test_every_seed_is_named_with_its_password_hidden() -> None:
    seeds = f"redis://u:sec1@127.0.0.1:{free_port()},redis://u:sec2@127.0.0.1:{free_port()}"
    status, doc = check_json("--redis", seeds, "--conf", "redis.connect_timeout=300ms")
    assert status == 1 and "sec" not in json.dumps(doc)
    assert doc["target"] == seeds.replace(":sec1@", ":***@").replace(":sec2@", ":***@")


def test_events_star_means_what_watch_means(configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    status, doc = check_json("--redis", s.url, "--events", "*")
    (line,) = lines(doc, "notifications")
    assert status == 1 and "lacks '$'" in line["detail"]  # set needs $, Exeg has none
    assert "&__keyevent@*__:rename_to" in doc["acl_rule"]


def test_check_accepts_every_published_name(configured_redis: Callable[..., Server]) -> None:
    """The names Redis publishes, with the flags it publishes them under: zremrangebyscore
    on z, sortstore on l (SORT ... STORE, sort.c)."""
    s = configured_redis("--appendonly", "yes")  # notify-keyspace-events ""
    status, doc = check_json("--redis", s.url, "--events", "zremrangebyscore,sortstore",
                             "--conf", "track.enable=false")
    (line,) = lines(doc, "notifications")
    assert status == 1 and line["verdict"] == "fail", doc
    lacks = re.search(r"lacks '([^']*)'", line["detail"])
    assert lacks and sorted(lacks.group(1)) == sorted("Elz"), line
    assert "&__keyevent@*__:zremrangebyscore" in doc["acl_rule"]


def test_unreachable_server_exits_1() -> None:
    r = check("--redis", f"redis://127.0.0.1:{free_port()}", "--conf",
              "redis.connect_timeout=300ms")
    assert r.returncode == 1
    assert "fail  connection" in r.stdout
    status, doc = check_json("--redis", f"redis://127.0.0.1:{free_port()}", "--conf",
                             "redis.connect_timeout=300ms")
    assert status == 1 and doc["passed"] is False and doc["mode"] == ""
    assert [c["check"] for c in doc["checks"]] == ["connection"]


def test_a_paused_server_fails_within_the_connect_timeout(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis)
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        status, doc = check_json("--redis", s.url, "--conf", "redis.connect_timeout=500ms")
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    (line,) = lines(doc, "connection")
    assert status == 1 and line["verdict"] == "fail"
    assert "500ms" in line["detail"] and "redis.connect_timeout" in line["fix"], line


def test_a_wrong_password_fails_without_printing_it(
        configured_redis: Callable[..., Server]) -> None:
    s = healthy(configured_redis, "--requirepass", "right-secret")
    r = check("--redis", f"redis://:wrong-secret@127.0.0.1:{s.port}")
    assert r.returncode == 1 and "fail  connection" in r.stdout
    assert "secret" not in r.stdout + r.stderr
    assert f"redis://:***@127.0.0.1:{s.port}" in r.stdout
    assert "-c redis.password=" in r.stdout  # the fix


@pytest.mark.parametrize("args, words", [
    (["--redis", "http://x"], "--redis: "),
    (["--events", "expird"], "unknown event 'expird' in --events: did you mean 'expired'?"),
    (["--events", "zrembyscore"], "unknown event 'zrembyscore' in --events: did you mean "
                                  "'zremrangebyscore'?"),
    (["--conf", "lease"], "--conf 'lease': write NAME=VALUE"),
    (["--conf", "redis.mode=sideways"], "--conf redis.mode: "),
])
def test_bad_input_exits_2_naming_the_option(args: list, words: str) -> None:
    r = check(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert words in r.stderr


def test_cluster_is_checked_on_every_master(cluster: Cluster) -> None:
    status, doc = check_json("--redis", cluster.seed)
    assert doc["mode"] == "cluster"
    masters = sorted(f"{n['host']}:{n['port']}" for n in cluster.nodes
                     if n["role"] == "master")
    assert verdict(doc, "cluster state") == "ok"
    (coverage,) = lines(doc, "cluster coverage")
    assert coverage["verdict"] == "ok" and "16384 slots served by 3 masters" in coverage["detail"]
    for name in ("version", "notifications", "acl: script commands", "acl: cluster discovery"):
        assert sorted(l["node"] for l in lines(doc, name)) == masters, name
        assert {l["verdict"] for l in lines(doc, name)} == {"ok"}, lines(doc, name)
    replicas = sorted(f"{n['host']}:{n['port']}" for n in cluster.nodes
                      if n["role"] != "master")
    assert sorted(l["node"] for l in lines(doc, "replica notifications")) == replicas
    assert {l["verdict"] for l in lines(doc, "replica notifications")} == {"ok"}
    (clock,) = lines(doc, "clock")
    assert clock["verdict"] == "ok" and "skew between masters" in clock["detail"]
    assert "&__keyspace@0__:kw:*:{*}:due" in doc["acl_rule"] and "+scan" in doc["acl_rule"]
    # kw_test_cluster runs without persistence: a warning, nothing that blocks.
    assert status == 0 and doc["summary"]["fail"] == 0


def test_cluster_with_unassigned_slots_fails_coverage(cluster: Cluster) -> None:
    master = next(n for n in cluster.nodes if n["role"] == "master")
    admin = redis_py.Redis(host=master["host"], port=int(master["port"]))
    # The first range this master serves (CLUSTER SLOTS: start, end, master, replicas...);
    # put back at the end.
    first = next(r[0] for r in admin.execute_command("CLUSTER", "SLOTS")
                 if int(r[2][1]) == int(master["port"]))
    admin.execute_command("CLUSTER", "DELSLOTSRANGE", first, first + 9)
    try:
        # The node that dropped the slots knows at once; the others learn it by gossip.
        status, doc = check_json("--redis", master["url"])
        (coverage,) = lines(doc, "cluster coverage")
        assert status == 1 and coverage["verdict"] == "fail"
        assert coverage["detail"].startswith("10 of 16384 slots have no master")
        assert "redis-cli --cluster fix" in coverage["fix"]
    finally:
        admin.execute_command("CLUSTER", "ADDSLOTSRANGE", first, first + 9)
        wait_for(lambda: b"cluster_state:ok" in admin.execute_command("CLUSTER", "INFO"), 30,
                  "cluster_state:ok again")
        admin.close()


def test_a_cluster_with_a_master_killed_fails_naming_it() -> None:
    # No replicas: nothing can take over, so the outcome does not depend on timing. Just
    # after the kill the others still list the master (its connection line fails); once
    # they mark it failed, its slots have no master (the coverage line fails).
    starter = _Starter("--replicas", "0", "--notify", "KEA")
    try:
        masters = [n for n in starter.info["nodes"] if n["role"] == "master"]
        dead, alive = masters[0], masters[1]
        os.kill(int(dead["pid"]), signal.SIGKILL)
        status, doc = check_json("--redis", alive["url"], "--conf",
                                 "redis.connect_timeout=1s")
        endpoint = f"{dead['host']}:{dead['port']}"
        failed = [c for c in doc["checks"] if c["verdict"] == "fail"]
        assert status == 1 and doc["mode"] == "cluster"
        assert any((c["check"] == "connection" and c["node"] == endpoint) or
                   (c["check"] == "cluster coverage" and endpoint in c["detail"])
                   for c in failed), failed
    finally:
        starter.stop()


# ---- adopt rules (-c adopt.rules=...) ------------------------------------------------------

def test_adopt_rules_are_listed_with_each_masters_catch_up_scan(
        configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--notify-keyspace-events", "KEA", "--appendonly", "yes")
    s.admin.mset({f"sess:{i}": "v" for i in range(1000)})
    status, doc = check_json("--redis", s.url, "-c",
                             "adopt.rules=prefix=sess: queue=sessions; glob=cache:*:v2")
    assert status == 0, doc
    (first,) = lines(doc, "adopt rule 1")
    assert first["verdict"] == "ok" and first["detail"] == 'prefix "sess:" -> queue sessions'
    (events,) = lines(doc, "adopt: events")
    assert "set, expire, persist" in events["detail"], events
    (second,) = lines(doc, "adopt rule 2")
    assert 'glob "cache:*:v2" -> queue keys' in second["detail"]
    (scan,) = lines(doc, "adopt: catch-up")
    assert scan["verdict"] == "ok" and scan["node"] == f"127.0.0.1:{s.port}"
    assert "reads the 1000 keys of db 0 in 2 passes, one MATCH per rule" in scan["detail"], scan
    assert verdict(doc, "acl: script commands") == "ok"


def test_a_rule_that_matches_every_key_is_warned_with_what_its_scan_reads(
        configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--notify-keyspace-events", "KEA", "--appendonly", "yes")
    s.admin.mset({f"any:{i}": "v" for i in range(2500)})
    status, doc = check_json("--redis", s.url, "-c", "adopt.rules=prefix=")
    assert status == 0, doc  # a warning does not block keywatch
    (scan,) = lines(doc, "adopt: catch-up")
    assert scan["verdict"] == "warn"
    assert scan["node"] == f"127.0.0.1:{s.port}"
    assert scan["detail"].startswith(
        f'adopt rule 1 (prefix "") matches every key of db 0: the catch-up scan of '
        f"127.0.0.1:{s.port} reads all 2500 keys"), scan
    assert "give the rule a prefix" in scan["fix"]


def test_adoption_needs_the_set_and_generic_notifications(
        configured_redis: Callable[..., Server]) -> None:
    s = configured_redis("--notify-keyspace-events", "Ex", "--appendonly", "yes")
    status, doc = check_json("--redis", s.url, "-c", "adopt.rules=prefix=sess:")
    assert status == 1, doc
    (line,) = lines(doc, "notifications")
    assert line["verdict"] == "fail" and "$" in line["detail"] and "g" in line["detail"], line


def test_a_rule_naming_keywatchs_own_keys_is_bad_input() -> None:
    r = check("--redis", "redis://127.0.0.1:1", "-c", "adopt.rules=prefix=kw:keys:")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "names keys of keywatch's own namespace" in r.stderr, r.stderr
