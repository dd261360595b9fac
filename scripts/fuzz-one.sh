#!/bin/sh
# Runs one libFuzzer target (build-fuzz/fuzz_NAME) for FUZZ_SECONDS
# (default 20) on a copy of its corpus, tests/fuzz/corpus/NAME; prints the
# last status line, or the whole log when it finds a crash (exit 1).
# scripts/test.sh runs one per CPU at a time.
set -e
f="$1"
name=$(basename "$f")
corpus=$(mktemp -d)
trap 'rm -rf "$corpus" "$corpus.log"' EXIT
cp -r "tests/fuzz/corpus/${name#fuzz_}/." "$corpus/"
if "$f" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=8192 "$corpus" >"$corpus.log" 2>&1; then
    echo "$name: $(tail -1 "$corpus.log")"
else
    cat "$corpus.log"
    echo "$name: FAILED" >&2
    exit 1
fi
