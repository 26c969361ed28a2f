"""`keywatch run` with [[adopt]] tables and [catchup]: keys another program writes with a
TTL (redis-cli here) are delivered like tracked keys, config errors name the table, and
/readyz says "adopting" while the catch-up scan runs without failing the check.
Fixtures and helpers: conftest.py."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import base_config, wait_for

PRINT = "[[handler]]\nplugin = \"print\"\n"


def redis_cli(redis, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-p", str(redis.port), *args], check=True,
                         capture_output=True, text=True)
    return out.stdout


@pytest.mark.parametrize("tables, expected", [
    ("[adopt]\nprefix = \"sess:\"\n",
     r"\.toml:1:1: \[adopt\] is a table; write \[\[adopt\]\] \(one per rule\)"),
    ("[[adopt]]\nprefx = \"sess:\"\n",
     r"\.toml:2:1: \[\[adopt\]\] #1 prefx: unknown key \(did you mean 'prefix'\?\)"),
    ("[[adopt]]\nqueue = \"sessions\"\n", r"\.toml:1:1: \[\[adopt\]\] #1: no prefix or glob"),
    ("[[adopt]]\nprefix = \"a:\"\n[[adopt]]\nprefix = \"kw:keys:\"\n",
     r"\.toml:4:10: \[\[adopt\]\] #2 prefix: .*names keys of keywatch's own namespace \"kw\""),
    ("[[adopt]]\nprefix = \"a:\"\nsnapshot = \"yes\"\n",
     r"\.toml:3:12: \[\[adopt\]\] #1 snapshot: expected a boolean"),
])
def test_adopt_config_errors_exit_2_naming_the_table_and_the_key(keywatch, redis, tables,
                                                                  expected):
    out = keywatch("run", config=base_config(redis.url, tables + PRINT))
    assert out.returncode == 2, out.stderr
    assert re.search(expected, out.stderr), out.stderr


def printed(d) -> list:
    return [json.loads(line) for line in d.stdout().splitlines() if line.startswith("{")]


def test_a_daemon_with_adopt_delivers_a_key_redis_cli_writes(daemon, redis):
    d = daemon(base_config(redis.url, PRINT + "[[adopt]]\nprefix = \"app:\"\n"))
    d.wait_running()
    redis_cli(redis, "SET", "app:1", "v", "EX", "2")
    redis_cli(redis, "SET", "other:1", "v", "EX", "2")  # no rule: its live event only
    wait_for(lambda: len(printed(d)) == 2, 30, "both expirations printed")
    by_key = {e["key"]: e for e in printed(d)}
    adopted = by_key["app:1"]
    assert adopted["event"] == "expired" and adopted["queue"] == "keys"
    assert adopted["attempt"] == 1 and adopted["source"] in ("sweep", "notification")
    assert "deadline_ms" in adopted
    assert "queue" not in by_key["other:1"]
    assert d.stop() == 0


def test_readyz_says_adopting_while_the_catch_up_scan_runs(daemon, redis):
    # 30000 keys at the slowest rate (1000 keys/s) keep the scan running for seconds.
    redis.client.mset({f"app:{i}": "v" for i in range(30000)})
    d = daemon(base_config(redis.url, PRINT + "[[adopt]]\nprefix = \"app:\"\n"
                                              "[catchup]\nrate = 1000\n"))
    d.wait_running()

    def adopting():
        status, body, _ = d.get("/readyz")
        doc = json.loads(body)
        return (status, doc) if doc.get("adopting") else None

    status, doc = wait_for(adopting, 30, "/readyz listing the catch-up scan")
    assert status == 200 and doc["ready"] is True
    (scan,) = doc["adopting"]
    assert scan["node"] == f"127.0.0.1:{redis.port}" and 0 <= scan["progress"] < 1
    assert d.stop() == 0
