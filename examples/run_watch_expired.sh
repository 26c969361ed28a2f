#!/usr/bin/env bash
# Runs the C quick start against a private redis-server (unix socket) and checks that it
# prints the expiry of a session: key and nothing for other keys.
# Usage: run_watch_expired.sh PATH/TO/watch_expired
set -euo pipefail
example=$1
work=$(mktemp -d)
redis-server --port 0 --unixsocket "$work/redis.sock" --dir "$work" --save '' \
    --daemonize no >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
cli() { redis-cli -s "$work/redis.sock" "$@" >/dev/null; }
for _ in $(seq 100); do
    redis-cli -s "$work/redis.sock" PING 2>/dev/null | grep -q PONG && break
    sleep 0.05
done

# notify.enable=true in the example turns notifications on (the server starts with none).
"$example" "unix://$work/redis.sock" 3 >"$work/out" 2>"$work/err" &
for _ in $(seq 100); do
    grep -q watching "$work/err" && break
    sleep 0.05
done
cli SET session:42 v PX 100
cli SET cache:1 v PX 100
sleep 0.3
cli EXISTS session:42 cache:1
wait $!
if [ "$(cat "$work/out")" != "expired db=0 key=session:42" ]; then
    echo "FAIL: unexpected output" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
fi
echo "ok: watch_expired printed the session key's expiry"
