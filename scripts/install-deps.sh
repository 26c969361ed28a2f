#!/usr/bin/env bash
# Installs everything keywatch needs to build, test and run its demo, from Debian's
# packages (bookworm). Idempotent and fast when everything is already there: apt-get runs
# only for missing packages. Non-interactive. Never leaves a system redis-server running
# (the tests and the demo start their own).
set -euo pipefail

packages=(
    build-essential cmake pkg-config
    libhiredis-dev libevent-dev libssl-dev openssl
    # The webhook plugin's HTTP client.
    libcurl4-openssl-dev
    redis-server redis-tools
    libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libtomlplusplus-dev
    libgtest-dev libgmock-dev googletest libbenchmark-dev
    pybind11-dev python3-pybind11 python3-pytest python3-setuptools python3-wheel
    # The Python package (bindings/): its venv, redis-py for its tests, mypy for its stubs.
    python3-dev python3-venv python3-redis mypy
    # The daemon's end-to-end tests (cli/tests/daemon/): /metrics parsed by a real parser.
    python3-prometheus-client
    # The dashboard's browser tests (cli/tests/daemon/test_dashboard_browser.py).
    chromium chromium-driver python3-selenium
    clang-format
    # The fuzz stage: clang with libFuzzer and the sanitizer runtimes.
    clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages already installed"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo)" >&2; exit 1; }
    sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"

# Keep packages from starting services while they install (redis-server would start a
# system server on port 6379). policy-rc.d exit 101 = "not allowed"; only ours is removed.
policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    own_policy=true
fi
cleanup() { if $own_policy; then "${sudo[@]}" rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
"${sudo[@]}" apt-get update -q </dev/null
"${sudo[@]}" apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null

# Belt and braces: if the package started its service anyway, stop that one server (by
# the pid in its pidfile) and keep it from starting at boot.
if [[ " ${missing[*]} " == *" redis-server "* ]]; then
    pidfile=/run/redis/redis-server.pid
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "install-deps: stopping the system redis-server the package started"
        "${sudo[@]}" kill "$(cat "$pidfile")" || true
    fi
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        "${sudo[@]}" systemctl disable --now redis-server >/dev/null 2>&1 || true
    fi
fi
echo "install-deps: done"
