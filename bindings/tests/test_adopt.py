"""Engine(adopt=[...]): keys another program writes with a TTL (redis-cli here) are
adopted and delivered like tracked keys. The rules become the library's adopt.rules text;
the library decides prefix or glob and refuses what it refuses (keywatch.Error)."""

from __future__ import annotations

import subprocess

import pytest
import redis as redispy

import keywatch
from keywatch._convert import adopt_rules_text
from conftest import wait_for, wait_stat

FAST = dict(sweep_interval="20ms", lease="5s")
NOWHERE = "redis://127.0.0.1:1"  # an engine does not connect before start()


def test_patterns_and_mappings_become_the_library_rule_text():
    # Bytes outside printable ASCII, spaces, ';', '=' and '\' reach the library escaped.
    text = adopt_rules_text(["sess:", b"a b;c=\\\x00\xff",
                             {"glob": "cache:*:v2", "queue": "cache", "snapshot": True}])
    assert text == ("pattern=sess:;pattern=a\\x20b\\x3bc\\x3d\\x5c\\x00\\xff;"
                    "glob=cache:*:v2 queue=cache snapshot=true")
    assert adopt_rules_text([]) == ""


def test_the_library_decides_prefix_or_glob_and_reads_back_its_canonical_text():
    engine = keywatch.Engine(NOWHERE, adopt=["sess:", "cache:*", b"bin:\x00"])
    try:
        assert engine.options["adopt.rules"] == (
            "prefix=sess:; glob=cache:*; prefix=bin:\\x00")
    finally:
        engine.close()


def test_a_rule_naming_keywatchs_namespace_is_refused_with_the_library_text():
    with pytest.raises(keywatch.Error, match="names keys of keywatch's own namespace \"kw\""):
        keywatch.Engine(NOWHERE, adopt=["kw:keys:"])
    with pytest.raises(keywatch.BadOptionValue, match='unknown field "prefx"'):
        keywatch.Engine(NOWHERE, adopt=[{"prefx": "sess:"}])
    with pytest.raises(keywatch.BadOptionValue, match="exactly one of prefix, glob or pattern"):
        keywatch.Engine(NOWHERE, adopt=[{"queue": "sessions"}])


def test_values_of_the_wrong_type_are_refused_before_the_library():
    with pytest.raises(keywatch.InvalidType, match="adopt must be a list of rules"):
        keywatch.Engine(NOWHERE, adopt="sess:")
    with pytest.raises(keywatch.InvalidType, match="adopt rule 2 must be a pattern"):
        keywatch.Engine(NOWHERE, adopt=["sess:", 3])
    with pytest.raises(keywatch.InvalidType, match="adopt rule 1 snapshot must be True or False"):
        keywatch.Engine(NOWHERE, adopt=[{"prefix": "s:", "snapshot": "yes"}])
    with pytest.raises(keywatch.InvalidArgument, match="adopt= or adopt_rules=, not both"):
        keywatch.Engine(NOWHERE, adopt=["s:"], adopt_rules="prefix=t:")


def test_catchup_options_map_like_every_other_option():
    engine = keywatch.Engine(NOWHERE, adopt=["s:"], catchup_rate=20000, catchup_enable=False)
    try:
        assert engine.options["catchup.rate"] == "20000"
        assert engine.options["catchup.enable"] == "false"
    finally:
        engine.close()


def redis_cli(redis, *args: str) -> None:
    subprocess.run(["redis-cli", "-p", str(redis.port), *args], check=True,
                   capture_output=True)


def due_score(redis, key: bytes):
    """The key's deadline in the keys queue (None: not tracked)."""
    return redispy.Redis(port=redis.port).zscore("kw:keys:{0}:due", key)


def test_a_key_redis_cli_writes_with_set_ex_is_delivered_once_at_its_deadline(redis):
    seen = []
    engine = keywatch.Engine(redis.url, adopt=[b"app:", {"glob": "cache:*:v2"}], **FAST)
    engine.add_handler(lambda e: seen.append((e.key, e.attempt, e.source, e.queue,
                                              e.deadline_ms)), "expired")
    engine.start()
    try:
        redis_cli(redis, "SET", "app:1", "v", "EX", "2")
        redis_cli(redis, "SET", "cache:7:v2", "v", "PX", "2500")
        redis_cli(redis, "SET", "other:1", "v", "EX", "2")  # no rule: a live event only
        wait_for(lambda: due_score(redis, b"app:1") and due_score(redis, b"cache:7:v2"),
                 what="both keys adopted")
        # Tracked at the key's own expiry time (PEXPIRETIME).
        adopted_at = {k: due_score(redis, k) for k in (b"app:1", b"cache:7:v2")}
        assert due_score(redis, b"other:1") is None
        wait_for(lambda: len(seen) == 3, timeout=30, what="the three expirations")
        wait_stat(engine, "items.acked", 2)
    finally:
        engine.stop()
        engine.close()
    by_key = {key: rest for key, *rest in seen}
    for key in (b"app:1", b"cache:7:v2"):
        attempt, source, queue, deadline = by_key[key]
        assert attempt == 1 and source in ("sweep", "notification") and queue == "keys", key
        assert deadline == adopted_at[key], key
    assert by_key[b"other:1"][2] is None  # untracked: a live notification


def test_a_persisted_key_is_never_delivered(redis):
    seen = []
    engine = keywatch.Engine(redis.url, adopt=["app:"], **FAST)
    engine.add_handler(lambda e: seen.append(e.key), "expired")
    engine.start()
    try:
        redis_cli(redis, "SET", "app:kept", "v", "EX", "2")
        wait_for(lambda: due_score(redis, b"app:kept"), what="app:kept adopted")
        redis_cli(redis, "PERSIST", "app:kept")
        wait_for(lambda: due_score(redis, b"app:kept") is None, what="app:kept untracked")
        redis_cli(redis, "SET", "app:marker", "v", "PX", "2500")
        wait_for(lambda: b"app:marker" in seen, timeout=30, what="the marker's expiry")
    finally:
        engine.stop()
        engine.close()
    assert seen == [b"app:marker"]
