#!/usr/bin/env bash
# Install the Debian packages atomfs's tests, front ends and benchmarks need, when missing.
# Idempotent and quiet when everything is present. Needs root (or sudo) to install; without
# it, prints what is missing and carries on (tests that need a missing tool skip with a message).
set -euo pipefail

packages=(
    build-essential pkg-config     # C API, shim and SQLite extension builds
    fuse3 libfuse3-dev             # FUSE mount (fusermount3)
    sqlite3 libsqlite3-dev         # SQLite VFS tests and baselines
    python3                        # SQLite VFS crash test (sqlite3 module with extension loading)
    python3-venv                   # Python package: scripts/python.sh builds its wheel in a venv
    libpmemobj-dev                 # PMDK baseline in the bench crate
    xfsprogs btrfs-progs           # remap engine tests on loop-mounted XFS/Btrfs images
    e2fsprogs                      # ext4 RAM-disk baselines
    fonts-dejavu-core              # text in the benchmark plots (read at run time)
    fio git tar rsync              # real programs run on a mounted store
    stress-ng                      # FUSE stress tests (--dir, --rename, --link, --symlink, --fifo, --xattr, ...)
    acl attr                       # setfacl/getfacl and getfattr/setfattr on a mounted store
    glusterfs-server glusterfs-client  # host-file engines on a distributed file system (scripts/gluster.sh)
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo -n"; else SUDO=none; fi
if [ "$SUDO" = none ]; then
    echo "install-deps: not root; missing packages: ${missing[*]} (tests needing them will skip)" >&2
    exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
