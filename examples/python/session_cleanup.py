"""The seed use case: session keys expire and must leave their user's index.

Each login writes ``session:<id>`` (value: the user's name) with a TTL through
keywatch.Client.track(..., snapshot=True), and adds the session to the set
``user:<name>:sessions``. When a session expires, keywatch delivers ``expired`` with the
value snapshot (the key itself is gone by then), and the handler removes the session from
its user's index. Tracked keys are delivered at least once, by one engine at a time, even
if no engine ran at the moment of expiry; SREM is idempotent, so a redelivery is harmless.

    python3 examples/python/session_cleanup.py --redis redis://127.0.0.1:6379

logs in three sessions with short TTLs, serves their expiries and exits once every index
is empty (the default --demo mode); --serve only serves, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import time

import redis  # redis-py (Debian: python3-redis)

import keywatch


def login(client: keywatch.Client, r: "redis.Redis[bytes]", user: str, session: str,
          ttl: dt.timedelta) -> None:
    r.sadd(f"user:{user}:sessions", session)
    client.track(f"session:{session}", user, ttl=ttl, snapshot=True)


def make_engine(url: str, r: "redis.Redis[bytes]") -> keywatch.Engine:
    engine = keywatch.Engine(url)

    @engine.on("expired", prefix="session:")
    def session_expired(event: keywatch.Event) -> None:
        if event.value is None:  # tracked without a snapshot: nothing to clean up by
            raise keywatch.Reject("session tracked without its user (snapshot=True missing)")
        session = event.key[len(b"session:"):]
        r.srem(b"user:" + event.value + b":sessions", session)
        logging.info("session %s of %s expired: removed from the index",
                     session.decode(errors="replace"), event.value.decode(errors="replace"))

    return engine


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument("--serve", action="store_true", help="only serve, until Ctrl-C")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    r = redis.Redis.from_url(args.redis)
    engine = make_engine(args.redis, r)
    if args.serve:
        engine.run()
        return 0
    users = {"alice": ["s1", "s2"], "bob": ["s3"]}
    with keywatch.Client(args.redis) as client:
        for user, sessions in users.items():
            for session in sessions:
                login(client, r, user, session, ttl=dt.timedelta(milliseconds=300))
    engine.start()
    deadline = time.monotonic() + 30
    try:
        while not all(r.scard(f"user:{u}:sessions") == 0 for u in users):
            if time.monotonic() > deadline:
                print("sessions still indexed after 30 s: is the engine connected?")
                return 1
            time.sleep(0.05)
    finally:
        engine.stop()
    print("every session left its user's index")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
