#!/usr/bin/env bash
# Thin wrapper, kept for older instructions: the FUSE benchmark is the `fuse` suite of
# atomfs-bench (docs/bench.md), i.e. `atomfs bench fuse [--quick|--full] [--out DIR]`: fio on an
# atomfs pool mounted with `atomfs mount` vs ext4 on a /dev/shm-backed loop device (and tmpfs),
# 4 KiB random writes with fsync after each, sequential 1 MiB writes and reads.
# Usage: scripts/bench-fuse.sh [--quick|--full|--tiny] [--out DIR] [--seed N]   (needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
    echo "bench-fuse: SECONDS is gone; the run time follows --quick/--full (see docs/bench.md)" >&2
    exit 2
fi
scripts/install-deps.sh
cargo build --quiet --release -p atomfs-bench -p atomfs-cli
exec target/release/atomfs-bench fuse "$@"
