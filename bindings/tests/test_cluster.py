"""Client and Engine on a real 3-master Redis Cluster (the project's starter)."""

from __future__ import annotations

import threading

import keywatch
from conftest import wait_for, wait_stat


def test_tracked_keys_and_tasks_on_every_master_are_delivered_once(cluster):
    keys = {f"user:{i}:session".encode() for i in range(300)}  # spread over the slots
    seen, lock = [], threading.Lock()
    engine = keywatch.Engine(cluster.seed, sweep_interval="20ms")

    @engine.on("expired", queue="keys")
    def expired(event):
        with lock:
            seen.append(event.key)

    @engine.task("cluster-jobs")
    def job(event):
        with lock:
            seen.append(b"task:" + event.key)

    engine.start()
    try:
        wait_stat(engine, "conn.nodes", 3)
        with keywatch.Client(cluster.seed) as client:
            with client.pipeline() as p:
                for key in sorted(keys):
                    p.track(key, b"", ttl=0.3)
            client.schedule("cluster-jobs", b"j\x00b", b"x", delay=0.1)
            wait_for(lambda: len(seen) == len(keys) + 1, timeout=60, what="every key and task")
            figures = client.inspect()
        assert figures["mode"] == "cluster" and len(figures["nodes"]) == 3
    finally:
        engine.stop()
    assert sorted(seen) == sorted(keys | {b"task:j\x00b"})
