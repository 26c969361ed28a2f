"""A delayed-task worker: ``reminders`` are scheduled for later and handled when due.

    python3 examples/python/delayed_tasks.py --redis redis://127.0.0.1:6379

schedules three reminders (one of them malformed), runs the worker until each was handled
or dead-lettered, then shows the dead letter (the default --demo mode). A handler that
raises keywatch.Retry (or any exception) has the task delivered again later, up to
max_attempts; keywatch.Reject sends it to the dead-letter stream at once, where
``Client.replay`` can put it back.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import time
from typing import List

import keywatch


def make_worker(url: str, handled: List[str]) -> keywatch.Engine:
    engine = keywatch.Engine(url, max_attempts=3, retry_base=dt.timedelta(milliseconds=100))

    @engine.task("reminders")
    def remind(event: keywatch.Event) -> None:
        try:
            reminder = json.loads(event.value or b"")
        except ValueError:
            raise keywatch.Reject("payload is not JSON")
        print(f"reminder for {reminder['to']}: {reminder['text']} (attempt {event.attempt})")
        handled.append(event.key.decode())

    return engine


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument("--serve", action="store_true", help="only serve, until Ctrl-C")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    handled: List[str] = []
    worker = make_worker(args.redis, handled)
    if args.serve:
        worker.run()
        return 0
    with keywatch.Client(args.redis) as client:
        now = dt.datetime.now(dt.timezone.utc)
        client.schedule("reminders", "r1", json.dumps({"to": "alice", "text": "standup"}),
                        delay=0.2)
        client.schedule("reminders", "r2", json.dumps({"to": "bob", "text": "review"}),
                        at=now + dt.timedelta(milliseconds=400))
        client.schedule("reminders", "r3", b"\xffnot json", delay=0.1)
        worker.start()
        deadline = time.monotonic() + 30
        try:
            while len(handled) < 2 or not client.dead_letters("reminders"):
                if time.monotonic() > deadline:
                    print("reminders not handled after 30 s: is the worker connected?")
                    return 1
                time.sleep(0.05)
        finally:
            worker.stop()
        for dead in client.dead_letters("reminders"):
            print(f"dead letter {dead['entry']}: task {dead['id']}: {dead['error']}")
        client.purge("reminders")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
