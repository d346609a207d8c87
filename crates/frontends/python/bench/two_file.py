#!/usr/bin/env python3
"""Two-file 0–4 KB transaction: atomfs from Python vs the same through the Rust API, vs the
write-temp + fsync + rename recipe a Python user would write (on /dev/shm and on an ext4 RAM
disk when one can be mounted).

    python bench/two_file.py [--rounds N] [--rust-bin PATH]

Each transaction replaces the content of two files with 0–4 KB each; the sizes come from one
xorshift64* sequence (seed 42) that the Rust example `two_file_rust` draws too. The rows:

- python: ``with store.transaction(a, b): a.truncate(n); a.pwrite(..); b.truncate(m); ...``
  on unbuffered files (the ``pool`` engine, FCFS, on /dev/shm);
- rust: the same calls through the ``atomfs`` crate (examples/two_file_rust.rs);
- python-core: the five native calls alone (begin, set_len + write of each, commit), to
  separate the cost of the Python-level wrapper classes;
- rename-*: the crash-safe pure-Python recipe: write each file's new version to a new name and
  fsync it, write a manifest naming both versions to a temporary file, fsync, rename it over
  the manifest, fsync the directory, then remove the old versions.

Prints a table and one JSON line; never asserts a timing.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import atomfs

SEED = 42


def sizes(seed: int, rounds: int):
    """The xorshift64* sequence of examples/two_file_rust.rs: (size_a, size_b) per round."""
    mask = (1 << 64) - 1
    x = max(seed, 1)
    out = []
    for _ in range(rounds * 2):
        x ^= x >> 12
        x = (x ^ (x << 25)) & mask
        x ^= x >> 27
        out.append((((x * 0x2545F4914F6CDD1D) & mask) >> 33) % 4097)
    return list(zip(out[0::2], out[1::2]))


def shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def bench_python(plan, data) -> float:
    path = os.path.join(shm_dir(), f"two_file-py-{os.getpid()}.pool")
    with atomfs.create(path, size="64M") as store:
        a = store.open("/a", "w+b", buffering=0)
        b = store.open("/b", "w+b", buffering=0)
        start = time.perf_counter()
        for na, nb in plan:
            with store.transaction(a, b):
                a.truncate(na)
                a.pwrite(data[:na], 0)
                b.truncate(nb)
                b.pwrite(data[:nb], 0)
        elapsed = time.perf_counter() - start
        a.close()
        b.close()
    os.remove(path)
    return elapsed * 1e6 / len(plan)


def bench_python_core(plan, data) -> float:
    """The same transaction through the native objects directly (no Python wrapper)."""
    path = os.path.join(shm_dir(), f"two_file-core-{os.getpid()}.pool")
    with atomfs.create(path, size="64M") as store:
        n = store._native
        a = n.open(b"/a", True, True, False, False, True, False, False, 0o644)
        b = n.open(b"/b", True, True, False, False, True, False, False, 0o644)
        slices = [(data[:na], data[:nb], na, nb) for na, nb in plan]
        start = time.perf_counter()
        for da, db, na, nb in slices:
            tx = n.begin([a, b])
            a.truncate(na)
            a.pwrite(da, 0)
            b.truncate(nb)
            b.pwrite(db, 0)
            tx.commit()
        elapsed = time.perf_counter() - start
        a.close()
        b.close()
    os.remove(path)
    return elapsed * 1e6 / len(plan)


def bench_rust(rust_bin, rounds: int):
    if not rust_bin:
        return None
    pool = os.path.join(shm_dir(), f"two_file-rs-{os.getpid()}.pool")
    out = subprocess.run([rust_bin, pool, str(rounds), str(SEED)], check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().split("=", 1)[1])


def write_synced(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def bench_rename(directory: str, plan, data) -> float:
    """The recipe: new versions, fsynced; manifest via temp + fsync + rename; dir fsync."""
    dfd = os.open(directory, os.O_RDONLY)
    manifest = os.path.join(directory, "manifest.json")
    old = None
    start = time.perf_counter()
    for i, (na, nb) in enumerate(plan):
        names = (f"a.{i}", f"b.{i}")
        write_synced(os.path.join(directory, names[0]), data[:na])
        write_synced(os.path.join(directory, names[1]), data[:nb])
        write_synced(manifest + ".tmp", json.dumps({"a": names[0], "b": names[1]}).encode())
        os.rename(manifest + ".tmp", manifest)
        os.fsync(dfd)
        if old:
            for name in old:
                os.remove(os.path.join(directory, name))
        old = names
    elapsed = time.perf_counter() - start
    os.close(dfd)
    return elapsed * 1e6 / len(plan)


class Ext4RamDisk:
    """An ext4 file system on a loop device backed by a file in /dev/shm (needs root)."""

    def __init__(self) -> None:
        self.image = os.path.join(shm_dir(), f"two_file-ext4-{os.getpid()}.img")
        self.root = tempfile.mkdtemp(prefix="two_file-ext4-")
        self.mounted = False

    def __enter__(self):
        with open(self.image, "wb") as f:
            f.truncate(128 << 20)
        try:
            subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-E",
                            "lazy_itable_init=0,lazy_journal_init=0", self.image],
                           check=True, capture_output=True)
            subprocess.run(["mount", "-t", "ext4", "-o", "loop", self.image, self.root],
                           check=True, capture_output=True)
            self.mounted = True
        except (OSError, subprocess.CalledProcessError) as e:
            self.why = getattr(e, "stderr", b"") or str(e)
        return self

    def __exit__(self, *exc) -> None:
        if self.mounted:
            subprocess.run(["umount", self.root], check=False)
        os.rmdir(self.root)
        os.remove(self.image)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--rename-rounds", type=int, default=2000)
    parser.add_argument("--rust-bin", help="the built two_file_rust example")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved runs of each atomfs row (the best one counts)")
    args = parser.parse_args()
    plan = sizes(SEED, args.rounds)
    data = b"\x5a" * 4096
    rows = {}
    # Interleave the atomfs runs (the machine is shared and noisy); keep each one's best.
    for _ in range(args.repeat):
        for name, run in (("python", lambda: bench_python(plan, data)),
                          ("python-core", lambda: bench_python_core(plan, data)),
                          ("rust", lambda: bench_rust(args.rust_bin, args.rounds))):
            value = run()
            if value is not None:
                rows[name] = min(rows.get(name, value), value)
    small = plan[: args.rename_rounds]
    shm = tempfile.mkdtemp(prefix="two_file-rename-", dir=shm_dir())
    rows["rename-shm"] = bench_rename(shm, small, data)
    shutil.rmtree(shm)
    with Ext4RamDisk() as disk:
        if disk.mounted:
            rows["rename-ext4"] = bench_rename(disk.root, small, data)
        else:
            print(f"ext4 RAM disk unavailable: {disk.why!r}", file=sys.stderr)
    for name, us in rows.items():
        print(f"{name:12s} {us:10.2f} µs/tx")
    if "rust" in rows:
        print(f"binding overhead: {rows['python'] - rows['rust']:.2f} µs/tx "
              f"(native calls only: {rows['python-core'] - rows['rust']:.2f} µs/tx)")
    for base in ("rename-shm", "rename-ext4"):
        if base in rows:
            print(f"{base} / python: {rows[base] / rows['python']:.1f}x")
    print(json.dumps({"cpu": cpu_model(), "date": time.strftime("%Y-%m-%d"),
                      "rounds": args.rounds, "us_per_tx": rows}))


if __name__ == "__main__":
    main()
