#!/usr/bin/env bash
# expect_exit.sh STATUS REGEX COMMAND...: runs COMMAND, passes when it exits with STATUS
# and its stderr matches the extended REGEX. For the CLI's bad-input tests.
set -uo pipefail
want_status=$1 regex=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
timeout 60 "$@" >/dev/null 2>"$err"
status=$?
cat "$err" >&2
if [ "$status" -ne "$want_status" ]; then
    echo "FAIL: exit status $status, expected $want_status: $*" >&2
    exit 1
fi
if ! grep -Eq -- "$regex" "$err"; then
    echo "FAIL: stderr does not match /$regex/: $*" >&2
    exit 1
fi
echo "ok: exit $status, stderr matches /$regex/"
