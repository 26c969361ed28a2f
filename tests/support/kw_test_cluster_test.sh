#!/usr/bin/env bash
# kw_test_cluster as a pytest fixture uses it: start it with a pipe on stdin, read its one
# JSON line, talk to every node, close stdin, and check that it exits 0 and that every
# server it started is gone.
# Usage: kw_test_cluster_test.sh PATH/TO/kw_test_cluster single|cluster
set -euo pipefail
# A command that stops the script (set -e) says which.
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
starter=$1
mode=$2
work=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; [ -z "${child:-}" ] || kill "$child" 2>/dev/null || true; rm -rf "$work"' EXIT
mkfifo "$work/in"
args=()
[ "$mode" = single ] && args=(--single)
"$starter" "${args[@]}" <"$work/in" >"$work/out" 2>"$work/err" &
child=$!
exec 3>"$work/in"  # the writer end: closing it is the stop signal
for _ in $(seq 1200); do
    [ -s "$work/out" ] && break
    kill -0 "$child" 2>/dev/null || { echo "FAIL: the starter exited early" >&2; cat "$work/err" >&2; exit 1; }
    sleep 0.1
done
line=$(cat "$work/out")
echo "$line"
[ "$(wc -l <"$work/out")" -eq 1 ] || { echo "FAIL: stdout is not one line" >&2; exit 1; }
[[ $line == *"\"mode\":\"$mode\""* ]] || { echo "FAIL: mode is not $mode" >&2; exit 1; }
ports=$(echo "$line" | grep -o '"port":[0-9]*' | cut -d: -f2)
pids=$(echo "$line" | grep -o '"pid":[0-9]*' | cut -d: -f2)
want=1
[ "$mode" = cluster ] && want=6
[ "$(echo "$ports" | wc -l)" -eq "$want" ] || { echo "FAIL: expected $want nodes" >&2; exit 1; }
for p in $ports; do
    [ "$(redis-cli -p "$p" PING)" = PONG ] || { echo "FAIL: node $p does not answer" >&2; exit 1; }
done
if [ "$mode" = cluster ]; then
    # No `| head` or `| grep -q` under pipefail: the reader may exit before the writer is
    # done, and the writer's SIGPIPE would fail the pipeline (seen: `echo | head -1` failed
    # 36 times in 3000 on this machine, which stopped the script silently).
    first=${ports%%$'\n'*}
    info=$(redis-cli -p "$first" CLUSTER INFO)
    [[ $info == *cluster_state:ok* ]] || { echo "FAIL: cluster not ok" >&2; exit 1; }
fi
exec 3>&-
wait "$child" || { echo "FAIL: the starter exited with $?" >&2; cat "$work/err" >&2; exit 1; }
child=
for pid in $pids; do
    if kill -0 "$pid" 2>/dev/null; then echo "FAIL: server $pid still runs" >&2; exit 1; fi
done
echo "OK: $mode started, answered, stopped"
