#!/usr/bin/env bash
# The main job: build atomfs and run `atomfs demo` on an embedded default pool in /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo run --quiet --release -p atomfs-pmem --example demo -- "$@"
