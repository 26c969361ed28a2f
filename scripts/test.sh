#!/usr/bin/env bash
# The second command of the README: installs what is needed, builds everything and runs
# every test against real redis-servers that the tests start themselves, in five stages,
# each in its own build folder (reused when present):
#   release  the whole suite, Release build            build/
#   python   the Python package: pip install into a venv, then its pytest suite
#                                                      build/python-venv, build/python-*/
#   asan     the C++ and CLI suites, ASan + UBSan      build-asan/
#   tsan     the threaded suites, ThreadSanitizer      build-tsan/
#   fuzz     every fuzz target replays its corpus      build-fuzz/ (clang, libFuzzer)
# Any failed test or sanitizer report fails the run (reports are shown at the end of their
# stage); every stage runs, and the times of each are printed at the end.
#
# The builds run ahead: the first stage is built as usual; the others, one after another in
# the background at the lowest CPU and I/O priority, while the tests of the stages before
# run (the tests mostly wait on Redis and timers; the build takes only the CPU they leave).
# A stage's build output is shown when its tests are next.
#
#   KW_FAST=1              only the release and python stages (a quick local run)
#   KW_STAGES="asan fuzz"  only these stages
#   KW_SANITIZE=address    only the asan stage; KW_SANITIZE=thread only the tsan stage
#   KW_TEST_JOBS=N         tests run N at a time (default: 3 in release, 2 in the sanitizer
#                          stages; most tests wait on Redis and timers, not on the CPU)
#   KW_BUILD_AHEAD=0       each stage is built just before its tests, nothing beside them
# Extra arguments go to every ctest call (e.g. -R cli. to run some tests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

stages="release python asan tsan fuzz"
case "${KW_SANITIZE:-}" in
    "") ;;
    address) stages=asan ;;
    thread) stages=tsan ;;
    *)
        echo "test.sh: KW_SANITIZE must be 'address' or 'thread', not '$KW_SANITIZE'" >&2
        exit 2
        ;;
esac
[ -z "${KW_STAGES:-}" ] || stages=$KW_STAGES
[ "${KW_FAST:-}" != 1 ] || stages="release python"
seen=" "
for s in $stages; do
    case $s in release | python | asan | tsan | fuzz) ;; *)
        echo "test.sh: unknown stage '$s' in KW_STAGES (use release, python, asan, tsan, fuzz)" >&2
        exit 2
        ;;
    esac
    case $seen in *" $s "*)
        echo "test.sh: stage '$s' is twice in KW_STAGES; name each stage once" >&2
        exit 2
        ;;
    esac
    seen="$seen$s "
done
case ${KW_BUILD_AHEAD:-1} in 0 | 1) ;; *)
    echo "test.sh: KW_BUILD_AHEAD must be 0 or 1, not '$KW_BUILD_AHEAD'" >&2
    exit 2
    ;;
esac

bash "$root/scripts/install-deps.sh"

# The threaded suites: engine, queue, lifecycle and dispatcher tests (label integration),
# the cluster (label cluster) and the CLI (label cli). Unit tests have no threads.
tsan_labels='integration|cluster|cli'

# Sanitizer reports go to files in $reports (from every process a test starts: the CLI,
# worker processes), so none is lost in a child's stderr; any report fails the stage.
sanitizer_env() {
    local reports=$1
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:log_path=$reports/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan"
}

configure_args() {
    case $1 in
        release) echo "-DCMAKE_BUILD_TYPE=Release" ;;
        asan) echo "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKW_SANITIZE_ADDRESS=ON -DKW_BUILD_BENCH=OFF" ;;
        # Only the programs of the labels it runs: no unit or C99 tests, no examples.
        tsan) echo "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKW_SANITIZE_THREAD=ON -DKW_BUILD_BENCH=OFF" \
                   "-DKW_BUILD_EXAMPLES=OFF -DKW_TEST_LABELS=${tsan_labels//|/;}" ;;
        fuzz) echo "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKW_BUILD_FUZZ=ON" \
                   "-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14" ;;
    esac
}

build_dir() {
    case $1 in release) echo "$root/build" ;; *) echo "$root/build-$1" ;; esac
}

# How many tests of a stage run at once. Every test has its own servers on free ports and
# private folders; a test that needed the machine to itself would be RUN_SERIAL
# (tests/CMakeLists.txt; none is), and the builds ahead would still run beside it.
test_jobs() {
    if [ -n "${KW_TEST_JOBS:-}" ]; then
        echo "$KW_TEST_JOBS"
    elif [ "$1" = release ]; then
        echo 3
    else
        echo 2
    fi
}

times=()
failed=()
passed_total=0 failed_total=0
# With a test selection (-R ...), a stage may hold no matching test: that is not an error.
no_tests=error
[ $# -eq 0 ] || no_tests=ignore

# Adds ctest's "N% tests passed, F tests failed out of T" to the totals.
count_tests() {
    local line t f
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1 || true)
    [ -n "$line" ] || return 0
    f=$(sed -E 's/.*passed, ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.*passed, ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
    passed_total=$((passed_total + t - f))
    failed_total=$((failed_total + f))
}

# build_stage NAME: configures and builds the stage's folder (python: its venv and the
# package, below); the status is the build's.
build_stage() {
    case $1 in
        python) build_python ;;
        *)
            # shellcheck disable=SC2046
            cmake -S "$root" -B "$(build_dir "$1")" $(configure_args "$1") >/dev/null &&
                cmake --build "$(build_dir "$1")" -j"$(nproc)"
            ;;
    esac
}

# The builds ahead (KW_BUILD_AHEAD, default 1): the first stage is built in the foreground,
# at normal priority (nothing runs beside it); then one background job builds the other
# stages in turn at nice 19 and idle I/O priority, so a stage's build goes on while the
# stages before it test, with the CPU their tests leave. It writes each build's output to
# $ahead/NAME.log, then its status and seconds to $ahead/NAME.done. It has its own process
# group, stopped with test.sh.
ahead=""
builds_pid=""
later_stages=${stages#* }
[ "$later_stages" != "$stages" ] || later_stages=""
start_builds() {
    ahead=$(mktemp -d "${TMPDIR:-/tmp}/kw-test-builds.XXXXXX")
    set -m
    (
        renice -n 19 -p "$BASHPID" >/dev/null || true
        ionice -c 3 -p "$BASHPID" 2>/dev/null || true
        for s in $later_stages; do
            t0=$(date +%s)
            if build_stage "$s" >"$ahead/$s.log" 2>&1 </dev/null; then rc=0; else rc=1; fi
            echo "$rc $(($(date +%s) - t0))" >"$ahead/$s.tmp" && mv "$ahead/$s.tmp" "$ahead/$s.done"
        done
    ) &
    builds_pid=$!
    set +m
}
# Stops the background job unless every build it had is done (its group id may be
# another process's by then).
stop_builds() {
    local s left=0
    for s in $later_stages; do [ -e "$ahead/$s.done" ] || left=1; done
    [ -z "$builds_pid" ] || [ "$left" = 0 ] || kill -- -"$builds_pid" 2>/dev/null || true
    [ -z "$ahead" ] || rm -rf "$ahead"
}
trap stop_builds EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# get_build NAME: the stage's build, done; prints its output (as it comes, while waiting for
# it) and sets built_s (the build's seconds) and waited_s (the seconds waited here). The
# status is the build's.
built_s=0 waited_s=0
get_build() {
    local t0 rc=0 log shown=0 size
    t0=$(date +%s)
    if [ -z "$ahead" ]; then
        # The first stage (or every stage, with KW_BUILD_AHEAD=0): built here; then the
        # builds of the others start in the background.
        build_stage "$1" || rc=1
        built_s=$(($(date +%s) - t0)) waited_s=$built_s
        [ "${KW_BUILD_AHEAD:-1}" = 0 ] || [ -z "$later_stages" ] || start_builds
        return $rc
    fi
    log="$ahead/$1.log"
    while :; do
        local done_=0
        [ ! -e "$ahead/$1.done" ] || done_=1
        if [ -e "$log" ]; then
            size=$(stat -c %s "$log")
            [ "$size" -le "$shown" ] || tail -c +$((shown + 1)) "$log" | head -c $((size - shown))
            shown=$size
        fi
        [ $done_ = 0 ] || break
        if ! kill -0 "$builds_pid" 2>/dev/null && [ ! -e "$ahead/$1.done" ]; then
            echo "test.sh: the background builds stopped before $1 was built" >&2
            return 1
        fi
        sleep 2
    done
    read -r rc built_s <"$ahead/$1.done"
    waited_s=$(($(date +%s) - t0))
    return "$rc"
}

# build_time: the stage's build time for the summary.
build_time() {
    if [ -z "$ahead" ]; then
        echo "build $built_s s"
    else
        echo "build $built_s s (waited for $waited_s s)"
    fi
}

# run_stage NAME [ctest args...]: build, test, check for sanitizer reports.
run_stage() {
    local stage=$1 build t1 t2 ok=1
    shift
    build=$(build_dir "$stage")
    echo "==== test.sh: stage $stage ($build)"
    if ! get_build "$stage"; then
        failed+=("$stage (build)")
        times+=("$stage: $(build_time) failed")
        return
    fi
    t1=$(date +%s)
    local reports="$build/sanitizer-reports"
    rm -rf "$reports" && mkdir -p "$reports"
    local log="$build/ctest-output.log"
    (
        [ "$stage" = release ] || sanitizer_env "$reports"
        cd "$build"
        # Each test has its own timeout too; this one catches a test that forgot to set one.
        ctest --output-on-failure --no-tests=$no_tests --timeout 600 \
            --parallel "$(test_jobs "$stage")" "$@"
    ) 2>&1 | tee "$log" || ok=0
    t2=$(date +%s)
    count_tests "$log"
    if [ -n "$(find "$reports" -type f -size +0 2>/dev/null)" ]; then
        echo "==== test.sh: stage $stage: sanitizer reports:" >&2
        find "$reports" -type f -size +0 -exec sh -c 'echo "--- $1"; cat "$1"' _ {} \; >&2
        ok=0
    fi
    [ "$ok" = 1 ] || failed+=("$stage")
    times+=("$stage: $(build_time), tests $((t2 - t1)) s")
}

# Adds pytest's closing "N passed, F failed, S skipped in T s" to the totals.
count_pytest() {
    local line p f e
    line=$(grep -E '^=*.* in [0-9.]+s' "$1" | tail -1 || true)
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    e=$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    passed_total=$((passed_total + p))
    failed_total=$((failed_total + f + e))
}

# The Python package, as a user installs it: a venv on Debian's python3 (with the system's
# setuptools and pybind11), `pip install --no-build-isolation .` (setup.py drives CMake into
# build/python-<abi>/), then its pytest suite from outside the source tree. Extra arguments
# are ctest's and do not apply here. The CLI of the release stage, when built, is compared
# line for line with `python -m keywatch watch`; its cluster starter, when built, runs the
# cluster tests (they are skipped without it).
venv="$root/build/python-venv"
build_python() {
    mkdir -p "$root/build" &&
        { [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"; } &&
        (cd "$root" && CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$venv/bin/pip" install -q \
            --no-build-isolation --no-deps .)
}
run_python_stage() {
    local t1 t2 ok=1 log="$root/build/pytest-output.log"
    echo "==== test.sh: stage python ($venv)"
    if ! get_build python; then
        failed+=("python (build)")
        times+=("python: $(build_time) failed")
        return
    fi
    t1=$(date +%s)
    (
        cd "$root/build"  # not the source tree: the installed package is the one imported
        [ ! -x "$root/build/cli/keywatch" ] || export KW_CLI="$root/build/cli/keywatch"
        # The project's cluster starter (release build): the cluster tests run through it.
        starter="$root/build/tests/support/kw_test_cluster"
        [ ! -x "$starter" ] || export KW_TEST_CLUSTER="$starter"
        [ ! -f "$root/build/handlers/session_index.so" ] || export KW_HANDLERS_DIR="$root/build/handlers"
        "$venv/bin/python" -m pytest -p no:cacheprovider -q "$root/bindings/tests"
    ) 2>&1 | tee "$log" || ok=0
    t2=$(date +%s)
    count_pytest "$log"
    [ "$ok" = 1 ] || failed+=("python")
    times+=("python: $(build_time), tests $((t2 - t1)) s")
}

for stage in $stages; do
    case $stage in
        python) run_python_stage ;;
        tsan) run_stage tsan -L "$tsan_labels" "$@" ;;
        *) run_stage "$stage" "$@" ;;
    esac
done

echo "==== test.sh: times"
printf '  %s\n' "${times[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "==== test.sh: FAILED: ${failed[*]}"
    [ "$failed_total" -gt 0 ] || failed_total=1  # a build or a sanitizer report failed
    echo "total: $passed_total passed, $failed_total failed"
    exit 1
fi
echo "==== test.sh: every stage passed ($stages)"
echo "total: $passed_total passed, $failed_total failed"
