#!/usr/bin/env python3
"""SQLite on atomfs versus SQLite's own journals: the seed's workload (random row updates,
values 0-16 KB, one thread, each update its own transaction).

Configurations (synchronous=FULL everywhere):
  atomfs-off     VFS "atomfs" (libatomfs_sqlite.so), journal_mode=OFF, pool on /dev/shm
  atomfs-memory  VFS "atomfs", journal_mode=MEMORY
  ext4-rollback  default VFS, journal_mode=DELETE, on ext4 on a loop device backed by /dev/shm
  ext4-wal       default VFS, journal_mode=WAL, same ext4
  tmpfs-rollback, tmpfs-wal   the same on /dev/shm directly

Usage: scripts/bench-sqlite.py EXTENSION [--updates 10000] [--rows 1000] [--json out.json]
The ext4 runs need root (mkfs.ext4, mount -o loop); they are skipped with a message otherwise.
Prints updates/s per configuration and the ratios atomfs-off / WAL. Needs a Python whose
sqlite3 module can load extensions (Debian's /usr/bin/python3 can).
"""
import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time


def connect(path, vfs=None, pool=None):
    if vfs:
        uri = f"file:{path}?vfs={vfs}&pool={pool}"
        return sqlite3.connect(uri, uri=True, isolation_level=None)
    return sqlite3.connect(path, isolation_level=None)


def run(db, journal, rows, updates, seed):
    mode = db.execute(f"PRAGMA journal_mode={journal}").fetchone()[0]
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE kv(id INTEGER PRIMARY KEY, v BLOB)")
    rng = random.Random(seed)
    db.execute("BEGIN")
    for i in range(rows):
        db.execute("INSERT INTO kv VALUES (?, ?)", (i, rng.randbytes(rng.randint(0, 16384))))
    db.execute("COMMIT")
    payloads = [(rng.randbytes(rng.randint(0, 16384)), rng.randrange(rows)) for _ in range(updates)]
    start = time.perf_counter()
    for value, key in payloads:
        db.execute("UPDATE kv SET v = ? WHERE id = ?", (value, key))
    elapsed = time.perf_counter() - start
    ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    if ok != "ok":
        raise SystemExit(f"integrity_check after the run: {ok}")
    return mode, updates / elapsed


def mount_ext4(shm_dir):
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        print("SKIP ext4: needs root and mkfs.ext4", file=sys.stderr)
        return None, None
    image = os.path.join(shm_dir, "ext4.img")
    mnt = os.path.join(shm_dir, "ext4")
    os.makedirs(mnt)
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
        subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"SKIP ext4: {e}", file=sys.stderr)
        return None, None
    return image, mnt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("extension")
    ap.add_argument("--updates", type=int, default=10000)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json")
    args = ap.parse_args()

    loader = sqlite3.connect(":memory:")
    loader.enable_load_extension(True)
    loader.load_extension(args.extension)

    shm = tempfile.mkdtemp(prefix="atomfs-bench-", dir="/dev/shm")
    image, mnt = mount_ext4(shm)
    results = {}
    try:
        os.environ["ATOMFS_CREATE_SIZE"] = str(2 << 30)
        configs = [
            ("atomfs-off", dict(vfs="atomfs", pool=os.path.join(shm, "off.pool"), path="/bench.db"), "OFF"),
            ("atomfs-memory", dict(vfs="atomfs", pool=os.path.join(shm, "mem.pool"), path="/bench.db"), "MEMORY"),
            ("tmpfs-rollback", dict(path=os.path.join(shm, "rb.db")), "DELETE"),
            ("tmpfs-wal", dict(path=os.path.join(shm, "wal.db")), "WAL"),
        ]
        if mnt:
            configs += [
                ("ext4-rollback", dict(path=os.path.join(mnt, "rb.db")), "DELETE"),
                ("ext4-wal", dict(path=os.path.join(mnt, "wal.db")), "WAL"),
            ]
        for name, where, journal in configs:
            db = connect(where["path"], where.get("vfs"), where.get("pool"))
            mode, rate = run(db, journal, args.rows, args.updates, args.seed)
            db.close()
            results[name] = rate
            print(f"{name:15s} journal={mode:7s} {rate:10.0f} updates/s", flush=True)
    finally:
        if mnt:
            subprocess.run(["umount", mnt], check=False)
        shutil.rmtree(shm, ignore_errors=True)

    ratios = {}
    for base in ("tmpfs-wal", "ext4-wal", "tmpfs-rollback", "ext4-rollback"):
        if base in results:
            ratios[f"atomfs-off/{base}"] = results["atomfs-off"] / results[base]
            print(f"atomfs-off / {base:15s} = {ratios[f'atomfs-off/{base}']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"updates": args.updates, "rows": args.rows, "updates_per_s": results, "ratios": ratios,
                       "machine": os.uname().nodename}, f, indent=2)


if __name__ == "__main__":
    main()
