#!/usr/bin/env bash
# The first command of the README: installs what is needed, builds keywatch (Release, in
# build/) and runs `keywatch demo`, which starts a private redis-server, tracks a few keys
# with short TTLs and schedules a delayed task, and prints their events as JSON lines as
# they come due, how late each was, and the queues' figures.
# Extra arguments go to `keywatch demo` (e.g. --redis redis://host:6379).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/build" -j"$(nproc)" --target keywatch_cli
exec "$root/build/cli/keywatch" demo "$@"
