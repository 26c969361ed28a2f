#!/usr/bin/env bash
# `keywatch watch --adopt` used as a person would, on its private redis-server: keys that
# redis-cli writes with a TTL and that match a pattern (a prefix, a glob) are printed at
# their deadline as tracked keys (queue "keys", attempt 1); another key's expiry is printed
# as its live event.
# Usage: watch_adopt.sh PATH/TO/keywatch
set -euo pipefail
kw=$1
. "$(dirname "$0")/watch_lib.sh"

start_watch --adopt app: --adopt 'cache:*:v2'

cli() { redis-cli -p "$port" "$@" >/dev/null; }
cli SET app:1 v EX 1
cli SET cache:9:v2 v PX 1500
cli SET other:1 v EX 1   # no pattern: its live event only

wait_lines 3 30

python3 - "$work/out" <<'PY' || fail "unexpected output"
import json, sys
by_key = {}
for line in open(sys.argv[1], encoding="utf-8"):
    ev = json.loads(line)
    assert ev["key"] not in by_key, ("printed twice", ev)
    by_key[ev["key"]] = ev
assert set(by_key) == {"app:1", "cache:9:v2", "other:1"}, by_key
for key in ("app:1", "cache:9:v2"):
    ev = by_key[key]
    assert ev["event"] == "expired" and ev["queue"] == "keys" and ev["attempt"] == 1, ev
    assert ev["source"] in ("sweep", "notification") and "deadline_ms" in ev, ev
assert "queue" not in by_key["other:1"], by_key["other:1"]
PY

stop_watch
echo "ok: adopted keys printed once as tracked keys, the other as its live event"
