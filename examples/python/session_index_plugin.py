"""The session-index cleanup without a Python handler: the built-in ``session_index`` plugin.

Each login writes ``session:<id>`` (value: the user's name) with a TTL through
keywatch.Client.track(..., snapshot=True), and adds ``<id>`` to the set
``user:<name>:sessions``. Instead of a Python handler, the engine loads the handler plugin
``session_index`` (docs/plugins.md) for the ``expired`` events of ``session:*``: it takes
the user from the value snapshot and SREMs the ``{session}`` capture of the key from
``user:{user}:sessions``, on the engine's worker threads, without calling into Python.

    python3 examples/python/session_index_plugin.py --redis redis://127.0.0.1:6379

``--plugin`` is the plugin's name (looked up in $KEYWATCH_PLUGIN_PATH, then the installed
plugin directory) or its path, e.g. build/handlers/session_index.so in a build tree. Logs
in three sessions with short TTLs, waits until every index is empty, prints the plugin's
counters and exits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

import redis  # redis-py (Debian: python3-redis)

import keywatch


def make_engine(url: str, plugin: str) -> keywatch.Engine:
    engine = keywatch.Engine(url)
    engine.add_plugin(plugin, instance="sessions", events="expired", prefix="session:",
                      options={"index": "user:{user}:sessions", "type": "set",
                               "user": "value", "pattern": "session:{session}",
                               "member": "session"})
    return engine


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument("--plugin", default="session_index",
                        help="the plugin's name or path (default: session_index)")
    args = parser.parse_args()
    r = redis.Redis.from_url(args.redis)
    try:
        engine = make_engine(args.redis, args.plugin)
    except keywatch.Error as e:  # not found, not loadable, a bad option: the library says
        print(f"cannot load the plugin: {e}")
        return 1
    users = {"alice": ["s1", "s2"], "bob": ["s3"]}
    with keywatch.Client(args.redis) as client:
        for user, sessions in users.items():
            for session in sessions:
                r.sadd(f"user:{user}:sessions", session)
                client.track(f"session:{session}", user, ttl=dt.timedelta(milliseconds=300),
                             snapshot=True)
    print("indexed:", {u: sorted(s.decode() for s in r.smembers(f"user:{u}:sessions"))
                       for u in users})
    with engine:  # starts it
        deadline = time.monotonic() + 30
        count = sum(len(sessions) for sessions in users.values())
        removed = absent = 0
        # Done when every index is empty and the plugin has counted each session.
        while (any(r.scard(f"user:{u}:sessions") for u in users) or removed + absent < count):
            if time.monotonic() > deadline:
                print("sessions still indexed after 30 s: is the engine connected?")
                return 1
            time.sleep(0.05)
            removed = engine.stat("plugin.sessions.removed")
            absent = engine.stat("plugin.sessions.absent")
    print(f"session_index: {removed} removed, {absent} already absent")
    print("every session left its user's index")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
