#!/bin/sh
# Runs every test Cairn has: unit tests, fuzz corpus replay and short fuzz
# runs, and the system tests on real FUSE mounts with real daemons, all
# under AddressSanitizer + UndefinedBehaviorSanitizer, plus the benchmark
# harness's own tests. Installs its own dependencies. Run as root.
set -e
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "test: run as root (FUSE mounts, daemons on 127.0.0.x)" >&2; exit 1; }
scripts/deps.sh --test

echo "== build (plain and ASan+UBSan)"
make -j"$(nproc)" >/dev/null
make -j"$(nproc)" SAN=1 >/dev/null

echo "== format (clang-format, .clang-format)"
make format-check

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "== unit tests (ASan+UBSan)"
for t in build-san/tests/test_*; do
    case "$t" in *.d) continue ;; esac
    "$t"
done

echo "== fuzz corpus replay (ASan+UBSan)"
for r in build-san/fuzz/*-replay; do
    name=$(basename "$r" -replay)
    "$r" "tests/fuzz/corpus/${name#fuzz_}"
done

echo "== short fuzz runs (libFuzzer, one per CPU at a time)"
make -j"$(nproc)" fuzz >/dev/null
ls build-fuzz/fuzz_* | grep -v '\.d$' | xargs -P "$(nproc)" -n 1 scripts/fuzz-one.sh

echo "== system tests on real mounts (ASan+UBSan daemons and clients)"
# Daemons and FUSE clients are killed by the tests; leak reports at those
# exits are noise, real memory errors still abort.
# deps.sh installed glusterfs-server and debhelper: test_import.py and
# test_package.py (which builds, installs and purges the Debian packages)
# must not skip.
ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 CAIRN_BUILD="$PWD/build-san" CAIRN_TEST_GLUSTERFS=1 \
    CAIRN_TEST_PACKAGE=1 \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=25 tests/system bench/tests
