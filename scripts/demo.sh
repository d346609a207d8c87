#!/usr/bin/env bash
# The main job: build atomfs and run `atomfs demo` (pools in /dev/shm): atomic two-file
# updates timed against no-consistency mode, a SIGKILL mid-run, recovery and verification.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo run --quiet --release -p atomfs-cli -- demo "$@"
