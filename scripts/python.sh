#!/usr/bin/env bash
# The Python package `atomfs` (crates/frontends/python): creates a virtual environment under
# target/ when missing, builds the abi3 wheel with maturin, installs it into the venv and runs
# the pytest suite. Ends with one line "python tests: N passed, N failed"; exits non-zero when
# a test fails or errors, or when no test ran.
#
#   scripts/python.sh [PYTEST ARGS...]      e.g. scripts/python.sh -k kill
#
# PYTHON picks the interpreter that makes the venv (default python3; Debian needs the
# python3-venv package, which scripts/install-deps.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/verdict.sh

venv=target/python-venv
crate=crates/frontends/python
wheels=target/wheels

if [ ! -x "$venv/bin/python" ]; then
    echo "python: creating $venv" >&2
    if ! "${PYTHON:-python3}" -m venv "$venv"; then
        rm -rf "$venv"
        echo "python tests: FAILED (cannot create a venv: install python3-venv)" >&2
        exit 1
    fi
fi
if [ ! -x "$venv/bin/maturin" ] || ! "$venv/bin/python" -c "import pytest, hypothesis" 2>/dev/null; then
    "$venv/bin/python" -m pip install -q "maturin>=1.9.4,<2" pytest hypothesis
fi

rm -f "$wheels"/atomfs-*.whl
"$venv/bin/maturin" build --release --quiet -i "$venv/bin/python" --out "$wheels" \
    -m "$crate/Cargo.toml"
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheels"/atomfs-*.whl

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Run from the crate so that its pytest settings apply; the package is imported from the
# venv (the source tree's python/ is not on sys.path).
(cd "$crate" && "../../../$venv/bin/python" -m pytest -p no:cacheprovider "$@") 2>&1 \
    | tee "$log" || status=$?

summary=$(grep -E '(passed|failed|errors?|no tests ran|deselected).* in [0-9.]+s' "$log" | tail -1 || true)
count() { echo "$summary" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(( $(count failed) + $(count error) + $(count errors) ))
verdict "python tests" "$status" "$passed" "$failed"
