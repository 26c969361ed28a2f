#!/usr/bin/env bash
# Replays one fuzz target deterministically: every input of its committed corpus, then a
# fixed number of mutations from a fixed seed. New inputs go to a throw-away folder, so the
# committed corpus is never changed by a test run; a crash's input is kept in the build
# folder (artifact prefix) and named in the output.
#   replay.sh TARGET_BINARY CORPUS_DIR RUNS ARTIFACT_DIR
set -euo pipefail
target=$1 corpus=$2 runs=$3 artifacts=$4
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || { echo "replay: no corpus in $corpus" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"
exec "$target" -seed=1 -runs="$runs" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$scratch" "$corpus"
