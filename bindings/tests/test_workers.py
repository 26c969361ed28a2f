"""Several Python worker processes on one queue: a worker killed with -9 while holding a
claim has it redelivered to another after the lease; three workers share 10k tracked keys
and each key is handled exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import keywatch
from conftest import wait_for

# A worker: handles tracked keys and tasks of queue "jobs"; writes each handled key (hex)
# as one line to the file argv[2]. With argv[3] == "hold", the first task blocks forever.
WORKER = """
import os, sys, threading, keywatch
url, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
lines, lock = [], threading.Lock()
engine = keywatch.Engine(url, lease="1s", sweep_interval="20ms", workers=2)

def handle(event):
    if mode == "hold":
        print("holding", event.key.decode(), event.source, flush=True)
        threading.Event().wait()
    with lock:
        lines.append(event.key.hex() + " " + event.source)

engine.add_handler(handle, "expired", queue="keys")
engine.add_handler(handle, "task", queue="jobs")
engine.start()
print("ready", flush=True)
engine.run()
with open(out, "w") as f:
    f.write("\\n".join(lines))
"""


def start_worker(redis, tmp_path, name, mode="plain"):
    out = tmp_path / f"{name}.txt"
    child = subprocess.Popen([sys.executable, "-c", WORKER, redis.url, str(out), mode],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    return child, out


def stop_worker(child, out):
    child.send_signal(signal.SIGTERM)
    assert child.wait(60) == 0
    text = out.read_text()
    return [line.split(" ") for line in text.splitlines() if line]


def test_kill_9_of_a_worker_holding_a_claim_redelivers_after_the_lease(redis, tmp_path):
    holder, _ = start_worker(redis, tmp_path, "holder", mode="hold")
    try:
        with keywatch.Client(redis.url) as client:
            client.schedule("jobs", b"job-1", b"payload")
            assert holder.stdout.readline() == "holding job-1 task\n"
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(30)
            assert [q["inflight"] for q in client.inspect()["queues"] if q["queue"] == "jobs"] == [1]
            worker, out = start_worker(redis, tmp_path, "worker")
            wait_for(lambda: not [q for q in client.inspect()["queues"]
                                  if q["queue"] == "jobs" and (q["due"] or q["inflight"])],
                     what="the redelivered task to be acked")
            handled = stop_worker(worker, out)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert handled == [[b"job-1".hex(), "lease_expired"]]


def test_three_workers_handle_10k_tracked_keys_exactly_once(redis, tmp_path):
    workers = [start_worker(redis, tmp_path, f"w{i}") for i in range(3)]
    keys = [f"k:{i}".encode() for i in range(10_000)]
    with keywatch.Client(redis.url) as client:
        for start in range(0, len(keys), 1000):
            with client.pipeline() as p:
                for key in keys[start:start + 1000]:
                    p.track(key, b"", ttl=0.5)
        wait_for(lambda: [(q["due"], q["inflight"]) for q in client.inspect()["queues"]
                          if q["queue"] == "keys"] in ([], [(0, 0)]),
                 timeout=120, what="every tracked key to be handled")
    handled = [stop_worker(child, out) for child, out in workers]
    seen = [bytes.fromhex(key) for lines in handled for key, _ in lines]
    assert len(seen) == len(keys) and set(seen) == set(keys)
    assert sum(1 for lines in handled if lines) >= 2  # the work was shared
