#!/usr/bin/env bash
# fio on an atomfs pool mounted with FUSE vs ext4 on a /dev/shm-backed loop device, same jobs:
#   1. 4 KiB random writes, fsync after every write (the durable small-update case)
#   2. sequential 1 MiB reads of a file written beforehand (cache dropped by fio first)
# Prints IOPS / bandwidth for both and the ratio atomfs/ext4. Needs root (loop mount), fio,
# fuse3 and e2fsprogs. Usage: scripts/bench-fuse.sh [SECONDS_PER_JOB]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
scripts/install-deps.sh
for tool in fio fusermount3 mkfs.ext4 losetup python3; do
    command -v "$tool" >/dev/null || { echo "bench-fuse: $tool is missing" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "bench-fuse: needs root for the ext4 loop mount" >&2; exit 1; }
cargo build --quiet --release -p atomfs-cli
atomfs=target/release/atomfs

work=$(mktemp -d /dev/shm/atomfs-bench.XXXXXX)
loopdev=""
cleanup() {
    "$atomfs" umount "$work/atomfs" >/dev/null 2>&1 || true
    umount "$work/ext4" >/dev/null 2>&1 || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/atomfs" "$work/ext4"

"$atomfs" mkfs "$work/pool" --size 1G >/dev/null
"$atomfs" mount "$work/pool" "$work/atomfs" >/dev/null
truncate -s 1G "$work/ext4.img"
mkfs.ext4 -q -F "$work/ext4.img"
loopdev=$(losetup --find --show "$work/ext4.img")
mount "$loopdev" "$work/ext4"

# fio JSON -> "iops bw_MiB/s mean_latency_us" for the job's read or write side.
measure() { # dir name rw-side fio-args...
    local dir=$1 name=$2 side=$3; shift 3
    (cd "$dir" && fio --name="$name" --output-format=json "$@") | python3 -c '
import json, sys
side = sys.argv[1]
job = json.load(sys.stdin)["jobs"][0][side]
print("%.0f %.1f %.1f" % (job["iops"], job["bw_bytes"] / 2**20, job["lat_ns"]["mean"] / 1000))
' "$side"
}

declare -A result
for fsname in atomfs ext4; do
    dir="$work/$fsname"
    result[$fsname,randwrite]=$(measure "$dir" randwrite write --filename=rw.dat --size=64M \
        --bs=4k --rw=randwrite --ioengine=sync --fsync=1 --time_based --runtime="$secs")
    measure "$dir" fill write --filename=seq.dat --size=256M --bs=1M --rw=write --ioengine=sync \
        --end_fsync=1 >/dev/null
    result[$fsname,seqread]=$(measure "$dir" seqread read --filename=seq.dat --size=256M \
        --bs=1M --rw=read --ioengine=sync --invalidate=1 --time_based --runtime="$secs")
done

echo
echo "fio, ${secs}s per job, $(nproc) cores; atomfs pool in /dev/shm via FUSE vs ext4 on a /dev/shm loop device"
printf '%-44s %14s %14s %10s\n' "job" "atomfs (FUSE)" "ext4 (loop)" "ratio"
row() { # label key field unit
    local a e
    a=$(echo "${result[atomfs,$2]}" | cut -d' ' -f"$3")
    e=$(echo "${result[ext4,$2]}" | cut -d' ' -f"$3")
    printf '%-44s %14s %14s %9.2fx\n' "$1" "$a $4" "$e $4" "$(python3 -c "print($a / max($e, 1e-9))")"
}
row "4 KiB random write + fsync each: IOPS" randwrite 1 ""
per_write() { python3 -c "print('%.1f' % (1e6 / max(float('$1'), 1e-9)))"; }
a=$(per_write "$(echo "${result[atomfs,randwrite]}" | cut -d' ' -f1)")
e=$(per_write "$(echo "${result[ext4,randwrite]}" | cut -d' ' -f1)")
printf '%-44s %14s %14s %9.2fx\n' "  time per durable 4 KiB write (write+fsync)" "$a us" "$e us" "$(python3 -c "print($a / $e)")"
row "sequential read 1 MiB: bandwidth" seqread 2 "MiB/s"
echo "(ratio = atomfs / ext4: above 1 is better for IOPS and bandwidth, below 1 for time)"
