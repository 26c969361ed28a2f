#!/usr/bin/env bash
# The second command of the README: installs what is needed, builds everything and runs
# every test (ctest) against real redis-servers that the tests start themselves.
#   KW_SANITIZE=address   AddressSanitizer + UBSan, in build-asan/
#   KW_SANITIZE=thread    ThreadSanitizer, in build-tsan/
# Extra arguments go to ctest (e.g. -R cli. to run some tests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bash "$root/scripts/install-deps.sh"

case "${KW_SANITIZE:-}" in
    "")
        build=build
        flags=(-DCMAKE_BUILD_TYPE=Release)
        ;;
    address)
        build="build-asan"
        flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKW_SANITIZE_ADDRESS=ON)
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
        ;;
    thread)
        build="build-tsan"
        flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKW_SANITIZE_THREAD=ON)
        export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
        ;;
    *)
        echo "test.sh: KW_SANITIZE must be 'address' or 'thread', not '$KW_SANITIZE'" >&2
        exit 2
        ;;
esac

cmake -S "$root" -B "$root/$build" "${flags[@]}"
cmake --build "$root/$build" -j"$(nproc)"
cd "$root/$build"
# Each test has its own timeout too; this one catches a test that forgot to set one.
ctest --output-on-failure --no-tests=error --timeout 600 "$@"
