#!/usr/bin/env bash
# Runs the metrics example against a private redis-server (unix socket) and checks that it
# printed the lateness histogram of the key it tracked, in the Prometheus text format.
# Usage: run_metrics.sh PATH/TO/metrics
set -euo pipefail
example=$1
work=$(mktemp -d)
redis-server --port 0 --unixsocket "$work/redis.sock" --dir "$work" --save '' \
    --daemonize no >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    redis-cli -s "$work/redis.sock" PING 2>/dev/null | grep -q PONG && break
    sleep 0.05
done
"$example" "unix://$work/redis.sock" >"$work/out" 2>"$work/err"
for line in '# TYPE keywatch_expiry_lateness histogram' \
            'keywatch_expiry_lateness_bucket{queue="keys",le="+Inf"} 1' \
            'keywatch_expiry_lateness_count{queue="keys"} 1' \
            'keywatch_queue_acked{queue="keys"} 1' \
            'keywatch_items_acked 1'; do
    if ! grep -qxF "$line" "$work/out"; then
        echo "FAIL: missing line: $line" >&2
        cat "$work/out" "$work/err" >&2
        exit 1
    fi
done
echo "ok: metrics printed the tracked key's lateness"
