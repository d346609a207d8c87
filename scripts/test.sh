#!/usr/bin/env bash
# The whole test suite: installs missing packages (as root), builds everything, runs every
# test, and ends with one line "atomfs tests: N passed, N failed". Exits non-zero when a test
# fails or when no test ran.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# As root (as CI runs) every tool the tests need is installed above, so a test that finds its
# environment missing fails instead of skipping.
if [ "$(id -u)" -eq 0 ]; then export ATOMFS_REQUIRE_ALL=1; fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# The C front ends' tests link the cdylibs (libatomfs.so, libatomfs_preload.so) from
# target/debug, which only a build of the library targets produces.
cargo build --workspace --all-targets
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log" || status=$?

passed=$(grep -E '^test result:' "$log" | sed -E 's/.* ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result:' "$log" | sed -E 's/.* ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
echo "atomfs tests: $passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
    echo "atomfs tests: FAILED" >&2
    exit 1
fi
if [ "$passed" -eq 0 ]; then
    echo "atomfs tests: no test ran — treating as failure" >&2
    exit 1
fi

# The Python package: wheel built by maturin in target/python-venv, installed there, pytest
# suite run (ends with "python tests: N passed, N failed"; fails on a failure or no test).
scripts/python.sh

# Benchmark smoke run: `atomfs bench fcfs-micro --quick` must run and write
# results.json and the PNG plots. No timing is asserted; the JSON shape is checked by
# crates/bench/tests/tiny_pool.rs. Debug build (opt-level 1): 10-30 s.
smoke=target/bench-smoke/fcfs-micro
rm -rf "$smoke"
bench_start=$(date +%s)
if ! timeout 600 target/debug/atomfs bench fcfs-micro --quick --out "$smoke" --no-progress; then
    echo "atomfs bench smoke run: FAILED (atomfs bench fcfs-micro --quick exited non-zero)" >&2
    exit 1
fi
if ! grep -q '"rows"' "$smoke/results.json" 2>/dev/null \
    || ! ls "$smoke"/fcfs-micro_*.png >/dev/null 2>&1; then
    echo "atomfs bench smoke run: FAILED (no results.json with rows, or no PNG in $smoke)" >&2
    exit 1
fi
echo "atomfs bench smoke run: ok in $(( $(date +%s) - bench_start )) s ($smoke)"

# Benchmark smoke run of the mmio suite: `atomfs bench mmio --quick` must run and
# write results.json and the PNG plots. No timing is asserted; the JSON shape is checked by
# crates/bench/tests/tiny_mmio.rs.
smoke=target/bench-smoke/mmio
rm -rf "$smoke"
bench_start=$(date +%s)
if ! timeout 600 target/debug/atomfs bench mmio --quick --out "$smoke" --no-progress; then
    echo "atomfs bench mmio smoke run: FAILED (atomfs bench mmio --quick exited non-zero)" >&2
    exit 1
fi
if ! grep -q '"rows"' "$smoke/results.json" 2>/dev/null \
    || ! ls "$smoke"/fio-rand-write_*.png >/dev/null 2>&1; then
    echo "atomfs bench mmio smoke run: FAILED (no results.json with rows, or no PNG in $smoke)" >&2
    exit 1
fi
echo "atomfs bench mmio smoke run: ok in $(( $(date +%s) - bench_start )) s ($smoke)"

# Benchmark smoke run of the engines suite: `atomfs bench engines --quick` must run every
# workload on every registered engine and ext4 and write results.json (with the verdict
# table) and the PNG plots. No timing is asserted; the JSON shape is checked by
# crates/bench/tests/tiny_engines.rs.
smoke=target/bench-smoke/engines
rm -rf "$smoke"
bench_start=$(date +%s)
if ! timeout 600 target/debug/atomfs bench engines --quick --out "$smoke" --no-progress; then
    echo "atomfs bench engines smoke run: FAILED (atomfs bench engines --quick exited non-zero)" >&2
    exit 1
fi
if ! grep -q '"verdict"' "$smoke/results.json" 2>/dev/null \
    || ! ls "$smoke"/two-file-tx_*.png >/dev/null 2>&1; then
    echo "atomfs bench engines smoke run: FAILED (no results.json with a verdict, or no PNG in $smoke)" >&2
    exit 1
fi
echo "atomfs bench engines smoke run: ok in $(( $(date +%s) - bench_start )) s ($smoke)"
