"""The session-index cleanup of session_cleanup.py, for asyncio programs: the handler is a
coroutine (keywatch.aio.Engine), sessions are tracked through keywatch.aio.Client, and the
index is kept with redis-py's asyncio client. While the coroutine runs, its item's lease
is renewed; returning acks it.

    python3 examples/python/session_cleanup_async.py --redis redis://127.0.0.1:6379
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging

import redis.asyncio as aioredis

import keywatch
from keywatch import aio


def make_engine(url: str, r: "aioredis.Redis[bytes]") -> aio.Engine:
    engine = aio.Engine(url)

    @engine.on("expired", prefix="session:")
    async def session_expired(event: keywatch.Event) -> None:
        if event.value is None:
            raise keywatch.Reject("session tracked without its user (snapshot=True missing)")
        session = event.key[len(b"session:"):]
        await r.srem(b"user:" + event.value + b":sessions", session)
        logging.info("session %s of %s expired: removed from the index",
                     session.decode(errors="replace"), event.value.decode(errors="replace"))

    return engine


async def demo(url: str) -> int:
    r = aioredis.Redis.from_url(url)
    users = {"alice": ["s1", "s2"], "bob": ["s3"]}
    engine = make_engine(url, r)
    async with aio.Client(url) as client, engine:
        for user, sessions in users.items():
            for session in sessions:
                await r.sadd(f"user:{user}:sessions", session)
                await client.track(f"session:{session}", user,
                                   ttl=dt.timedelta(milliseconds=300), snapshot=True)
        for _ in range(600):
            if all([await r.scard(f"user:{u}:sessions") == 0 for u in users]):
                print("every session left its user's index")
                return 0
            await asyncio.sleep(0.05)
    print("sessions still indexed after 30 s: is the engine connected?")
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument("--serve", action="store_true", help="only serve, until Ctrl-C")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.serve:
        engine = make_engine(args.redis, aioredis.Redis.from_url(args.redis))
        asyncio.run(engine.run())
        return 0
    return asyncio.run(demo(args.redis))


if __name__ == "__main__":
    raise SystemExit(main())
