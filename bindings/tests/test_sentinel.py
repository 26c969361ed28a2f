"""Client and Engine through a redis+sentinel:// URL on a real Sentinel deployment (the
project's starter: a master, 2 replicas, 3 sentinels)."""

from __future__ import annotations

import threading

import keywatch
from conftest import wait_for


def test_sentinel_url_passes_through_whole_and_finds_the_master(sentinels):
    assert sentinels.seed.startswith("redis+sentinel://") and sentinels.seed.count(",") == 2
    seen, lock = [], threading.Lock()
    engine = keywatch.Engine(sentinels.seed, sweep_interval="20ms")

    @engine.on("expired", queue="keys")
    def expired(event):
        with lock:
            seen.append((event.key, event.node))

    engine.start()
    try:
        with keywatch.Client(sentinels.seed) as client:
            client.track(b"via\x00sentinel", b"v", ttl=0.2)
            wait_for(lambda: len(seen) == 1, what="the tracked key")
            assert client.inspect()["mode"] == "standalone"
    finally:
        engine.stop()
    master = sentinels.nodes[0]
    assert seen == [(b"via\x00sentinel", f"{master['host']}:{master['port']}")]


def test_sentinel_url_mistake_is_named():
    try:
        keywatch.Client("redis+sentinel://127.0.0.1:1,127.0.0.1:2")
    except keywatch.InvalidURL as e:
        assert "master's name" in str(e) and "127.0.0.1:1,127.0.0.1:2" in str(e)
    else:
        raise AssertionError("a sentinel URL without the master's name was accepted")
