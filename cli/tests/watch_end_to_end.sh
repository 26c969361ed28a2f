#!/usr/bin/env bash
# `keywatch watch` used as a person would, on its private redis-server: lines arrive
# while it runs (flushed), a non-UTF-8 key comes as key_b64, --prefix and --events
# filter, and SIGTERM stops keywatch with status 0 and takes its redis-server with it.
# Usage: watch_end_to_end.sh PATH/TO/keywatch
set -euo pipefail
kw=$1
. "$(dirname "$0")/watch_lib.sh"

start_watch --events expired,del --prefix t:

cli() { redis-cli -p "$port" "$@" >/dev/null; }
cli SET t:plain v PX 100
cli SET $'t:bin\xca\xfe' v PX 100
cli SET other:skipped v PX 100   # filtered out by --prefix
cli SET t:gone v                 # 'set' is not in --events
cli DEL t:gone
sleep 0.3
cli EXISTS t:plain $'t:bin\xca\xfe' other:skipped  # touch: Redis expires them now

wait_lines 3 5

python3 - "$work/out" <<'PY' || fail "unexpected output"
import json, sys
got = set()
for line in open(sys.argv[1], encoding="utf-8"):
    ev = json.loads(line)
    for field in ("event", "db", "ts_ms", "source", "id", "node"):
        assert field in ev, (field, ev)
    got.add((ev["event"], ev.get("key"), ev.get("key_b64")))
want = {("expired", "t:plain", None), ("expired", None, "dDpiaW7K/g=="), ("del", "t:gone", None)}
assert got == want, got
PY

stop_watch
if kill -0 "$server_pid" 2>/dev/null; then fail "redis-server $server_pid still running"; fi
echo "ok: 3 events as JSON lines, filters applied, SIGTERM stopped keywatch and its server"
