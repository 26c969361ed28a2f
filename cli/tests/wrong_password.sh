#!/usr/bin/env bash
# A wrong password is refused with status 1, a message that says what to check, and the
# password itself never printed; the right one over a unix socket works.
# Usage: wrong_password.sh PATH/TO/keywatch PATH/TO/expect_exit.sh
set -euo pipefail
kw=$1 expect=$2
work=$(mktemp -d)
redis-server --port 0 --unixsocket "$work/redis.sock" --requirepass right-secret \
    --dir "$work" --save '' --daemonize no --notify-keyspace-events AKE >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    redis-cli -s "$work/redis.sock" -a right-secret --no-auth-warning PING 2>/dev/null |
        grep -q PONG && break
    sleep 0.05
done

bash "$expect" 1 'refused AUTH.*KW_ERR_AUTH' \
    "$kw" watch --redis "unix://:wrong-secret@$work/redis.sock" 2>"$work/err"
if grep -q wrong-secret "$work/err"; then
    echo "FAIL: the password was printed" >&2
    exit 1
fi
bash "$expect" 0 'watching' "$kw" watch --redis "unix://:right-secret@$work/redis.sock" \
    --duration 200ms
