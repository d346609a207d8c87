#!/usr/bin/env bash
# Emulated NVMM with 2 MiB pages: mount a tmpfs with `huge=always` (idempotent) and print its
# path. The benchmarks put their pools there when ATOMFS_BENCH_DIR names it:
#
#   ATOMFS_BENCH_DIR=$(scripts/nvmm-hugepages.sh) atomfs bench fcfs-micro --full
#   cargo run --release -p atomfs-pool --example micro -- --dir "$(scripts/nvmm-hugepages.sh)"
#   scripts/nvmm-hugepages.sh --umount
#
# Why: /dev/shm maps files with 4 KiB pages, so every block an engine touches for the first
# time in a while costs a TLB miss and a page-table walk. NVMM mapped with DAX uses 2 MiB
# pages, and the seeds' in-kernel file systems reach their emulated NVMM through the kernel's
# direct map (1 GiB / 2 MiB pages): out-of-place designs (FCFS's pending blocks, shadow
# paging) touch twice the pages of an in-place write and pay most for 4 KiB pages. The mount
# changes nothing else: it is tmpfs (DRAM page cache) like /dev/shm, with the same
# durability (flush + fence), and its own size limit. Needs root (mount); the kernel's
# global shmem_enabled setting is left as it is (a mount option does not need it).
#
# Environment: ATOMFS_NVMM_DIR (default /mnt/atomfs-nvmm-huge), ATOMFS_NVMM_SIZE (default
# 75% of MemTotal, e.g. 12g).
set -euo pipefail

dir="${ATOMFS_NVMM_DIR:-/mnt/atomfs-nvmm-huge}"

if [[ "${1:-}" == "--umount" ]]; then
    if mountpoint -q "$dir"; then
        umount "$dir"
        echo "nvmm-hugepages: unmounted $dir" >&2
    fi
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "nvmm-hugepages: mounting a tmpfs needs root" >&2
    exit 1
fi

if mountpoint -q "$dir"; then
    if ! grep -qE "^[^ ]+ $dir tmpfs [^ ]*huge=(always|within_size)" /proc/mounts; then
        echo "nvmm-hugepages: $dir is mounted but is not a tmpfs with huge=always" >&2
        exit 1
    fi
else
    if [[ -z "${ATOMFS_NVMM_SIZE:-}" ]]; then
        total_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
        ATOMFS_NVMM_SIZE="$((total_kb * 3 / 4))k"
    fi
    mkdir -p "$dir"
    mount -t tmpfs -o "huge=always,size=$ATOMFS_NVMM_SIZE,mode=1777" tmpfs "$dir"
    # Check that the kernel honours the option: a file written there must use huge pages.
    probe="$dir/.probe"
    before=$(awk '/^ShmemHugePages:/ {print $2}' /proc/meminfo)
    dd if=/dev/zero of="$probe" bs=1M count=4 status=none
    after=$(awk '/^ShmemHugePages:/ {print $2}' /proc/meminfo)
    rm -f "$probe"
    if (( after <= before )); then
        umount "$dir"
        echo "nvmm-hugepages: this kernel gave the tmpfs no huge pages (transparent huge pages off?)" >&2
        exit 1
    fi
fi
echo "$dir"
