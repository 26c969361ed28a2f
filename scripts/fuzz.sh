#!/usr/bin/env bash
# Fuzzes keywatch's parsers for real (libFuzzer, clang 14) and grows the committed corpus.
#   scripts/fuzz.sh [-t SECONDS] [-j JOBS] [TARGET...]
# Targets: url time config channel resp json_line (all by default). Each runs for SECONDS
# (default 600), JOBS targets at once (default 1). Inputs that reach new code are merged
# into fuzz/corpus/TARGET/ (only those: libFuzzer's -merge=1); a crash stops that target,
# its input is saved under build-fuzz/fuzz/artifacts/TARGET/ and the script exits 1.
# Commit the corpus it grew, and add each crash to the corpus as regression-NAME.
# The test command only replays the corpus (fuzz/replay.sh): see docs/testing.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=600 jobs=1
while getopts "t:j:" opt; do
    case $opt in
        t) seconds=$OPTARG ;;
        j) jobs=$OPTARG ;;
        *) echo "usage: scripts/fuzz.sh [-t SECONDS] [-j JOBS] [TARGET...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(url time config channel resp json_line)

bash "$root/scripts/install-deps.sh"
build="$root/build-fuzz"
cmake -S "$root" -B "$build" -DKW_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" -j"$(nproc)"
logs="$build/fuzz/logs"
mkdir -p "$logs"

fuzz_one() {
    local name=$1 bin="$build/fuzz/kw_fuzz_$1" corpus="$root/fuzz/corpus/$1"
    local fresh="$build/fuzz/new/$1" artifacts="$build/fuzz/artifacts/$1"
    rm -rf "$fresh" && mkdir -p "$fresh" "$artifacts" "$corpus"
    local rc=0
    "$bin" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$fresh" "$corpus" >"$logs/$name.log" 2>&1 || rc=$?
    # Keep only the new inputs that reach code the corpus does not.
    "$bin" -merge=1 "$corpus" "$fresh" >"$logs/$name.merge.log" 2>&1 || true
    return $rc
}

summary() {
    local name=$1 log="$logs/$1.log"
    local last execs crashes
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    execs=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}' || true)
    crashes=$(find "$build/fuzz/artifacts/$name" -type f 2>/dev/null | wc -l || true)
    printf '%-10s exec/s %-8s %s; corpus %s files; crash/leak/timeout files %s\n' "$name" \
        "${execs:-?}" "$(sed -E 's/.*(cov: [0-9]+ ft: [0-9]+).*/\1/' <<<"$last")" \
        "$(find "$root/fuzz/corpus/$name" -type f | wc -l)" "$crashes"
}

failed=0
running=0
for t in "${targets[@]}"; do
    [ -x "$build/fuzz/kw_fuzz_$t" ] || { echo "fuzz: no target '$t'" >&2; exit 2; }
    echo "fuzz: $t for ${seconds}s (log: $logs/$t.log)"
    fuzz_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
echo "fuzz: results (cov = edges covered, ft = features)"
for t in "${targets[@]}"; do summary "$t"; done
[ "$failed" -eq 0 ] || { echo "fuzz: a target failed: see its log and artifacts" >&2; exit 1; }
