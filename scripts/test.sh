#!/usr/bin/env bash
# The whole test suite: installs missing packages (as root), builds everything, runs every
# test, and ends with one line "atomfs tests: N passed, N failed". Exits non-zero when a test
# fails or when no test ran.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/verdict.sh
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
verdict "atomfs tests" "$status" "$passed" "$failed"

# The Python package: wheel built by maturin in target/python-venv, installed there, pytest
# suite run (ends with "python tests: N passed, N failed"; fails on a failure or no test).
scripts/python.sh

# Benchmark smoke runs: each suite's `--quick` run must finish and write results.json (with
# the key named) and its PNG plots. No timing is asserted; the JSON shapes are checked by
# crates/bench/tests/tiny_*.rs. Debug build (opt-level 1): 10-60 s each.
# smoke SUITE JSON_KEY PNG_PREFIX
smoke() {
    local suite=$1 key=$2 png=$3 out=target/bench-smoke/$1 start
    rm -rf "$out"
    start=$(date +%s)
    if ! timeout 600 target/debug/atomfs bench "$suite" --quick --out "$out" --no-progress; then
        echo "atomfs bench $suite smoke run: FAILED (atomfs bench $suite --quick exited non-zero)" >&2
        exit 1
    fi
    if ! grep -q "\"$key\"" "$out/results.json" 2>/dev/null \
        || ! ls "$out"/"$png"_*.png >/dev/null 2>&1; then
        echo "atomfs bench $suite smoke run: FAILED (no results.json with \"$key\", or no $png PNG in $out)" >&2
        exit 1
    fi
    echo "atomfs bench $suite smoke run: ok in $(( $(date +%s) - start )) s ($out)"
}
smoke fcfs-micro rows fcfs-micro
smoke mmio rows fio-rand-write
smoke engines verdict two-file-tx
