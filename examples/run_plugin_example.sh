#!/usr/bin/env bash
# The out-of-tree plugin example, as a user builds it: installs keywatch to a fresh prefix,
# compiles examples/plugin/expiry_counter.c as strict C99 with nothing but
# `pkg-config --cflags keywatch-plugin` (no keywatch library), compiles the small host
# against the installed libkeywatch, loads the plugin by name from a directory on
# KEYWATCH_PLUGIN_PATH, and checks its counts in Redis.
# Usage: run_plugin_example.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; }; rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name keywatch-plugin.pc | head -1)
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
if pkg-config --libs keywatch-plugin | grep -q keywatch; then
    echo "FAIL: keywatch-plugin.pc must give no libraries" >&2
    exit 1
fi
mkdir "$work/plugins"
cc -std=c99 -pedantic -Wall -Wextra -Werror -shared -fPIC $(pkg-config --cflags keywatch-plugin) \
    "$src/examples/plugin/expiry_counter.c" -o "$work/plugins/expiry_counter.so"
cc -std=c99 -pedantic -Wall -Wextra -Werror $(pkg-config --cflags keywatch) \
    "$src/examples/plugin/host.c" -o "$work/host" $(pkg-config --libs keywatch) \
    -Wl,-rpath,"$(pkg-config --variable=libdir keywatch)"

redis-server --port 0 --unixsocket "$work/redis.sock" --dir "$work" --save '' \
    --daemonize no >/dev/null &
server=$!
for _ in $(seq 100); do
    redis-cli -s "$work/redis.sock" PING 2>/dev/null | grep -q PONG && break
    sleep 0.05
done
cli() { redis-cli -s "$work/redis.sock" "$@"; }

KEYWATCH_PLUGIN_PATH="$work/plugins" "$work/host" "unix://$work/redis.sock" expiry_counter 2 \
    hash counts 2>"$work/err" &
host=$!
for _ in $(seq 100); do
    grep -q running "$work/err" && break
    sleep 0.05
done
cli SET a v PX 50 >/dev/null
cli SET b v PX 50 >/dev/null
sleep 0.3
cli EXISTS a b >/dev/null
wait "$host" || { cat "$work/err" >&2; exit 1; }
got=$(cli HGET counts expired)
if [ "$got" != "2" ]; then
    echo "FAIL: counts[expired] = '$got', expected 2" >&2
    cat "$work/err" >&2
    exit 1
fi
echo "ok: the example plugin, built against the installed header, counted 2 expiries"
