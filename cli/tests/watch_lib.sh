# What the `keywatch watch` end-to-end scripts share (source it after setting kw): a work
# directory and a trap that stops the watch and removes it, fail(), and start_watch ARGS...,
# which runs `keywatch watch ARGS...` on its private redis-server (stdout to $work/out,
# stderr to $work/err) and returns once it watches, with kwpid, port and server_pid set;
# wait_lines N SECONDS; stop_watch.
work=$(mktemp -d)
kwpid=
cleanup() {
    if [ -n "$kwpid" ]; then kill "$kwpid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    echo "--- stdout" >&2; cat "$work/out" >&2 || true
    echo "--- stderr" >&2; cat "$work/err" >&2 || true
    exit 1
}
start_watch() {
    "$kw" watch "$@" >"$work/out" 2>"$work/err" &
    kwpid=$!
    for _ in $(seq 200); do
        grep -q "keywatch: watching" "$work/err" && break
        kill -0 "$kwpid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "keywatch: watching" "$work/err" || fail "keywatch did not start watching"
    port=$(grep -oE 'started a private redis-server at redis://127\.0\.0\.1:[0-9]+' "$work/err" |
           grep -oE '[0-9]+$')
    server_pid=$(grep -oE '\(pid [0-9]+' "$work/err" | grep -oE '[0-9]+')
    if [ -z "$port" ] || [ -z "$server_pid" ]; then fail "no 'started a private redis-server' line"; fi
}
# Waits up to SECONDS for N lines on stdout; fails if keywatch exited meanwhile.
wait_lines() {
    for _ in $(seq $(($2 * 10))); do
        [ "$(wc -l <"$work/out")" -ge "$1" ] && break
        sleep 0.1
    done
    kill -0 "$kwpid" 2>/dev/null || fail "keywatch exited early"
}
# SIGTERM: keywatch must exit 0.
stop_watch() {
    kill -TERM "$kwpid"
    local status=0
    wait "$kwpid" || status=$?
    kwpid=
    [ "$status" -eq 0 ] || fail "keywatch exited with $status after SIGTERM"
}
