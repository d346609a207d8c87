#!/usr/bin/env python3
"""Thin wrapper, kept for older instructions: the SQLite benchmark is the `sqlite` suite of
atomfs-bench (docs/bench.md), i.e. `atomfs bench sqlite [--quick|--full] [--out DIR]`.

Usage: scripts/bench-sqlite.py [EXTENSION] [--quick|--full|--tiny] [--out DIR] [--seed N]
Builds atomfs-bench (release) and runs the suite. EXTENSION, when given, is an existing
libatomfs_sqlite.so to use for the atomfs VFS (ATOMFS_SQLITE_EXT); without it the suite builds
the VFS from crates/frontends/sqlite against the libatomfs.so built with atomfs-bench. The
former options --updates/--rows/--json are gone: the suite's sizes follow --quick/--full, and
results.json is written to the --out directory.
"""
import os
import subprocess
import sys


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = sys.argv[1:]
    old = [a for a in args if a in ("--updates", "--rows", "--json")]
    if old:
        sys.exit(f"bench-sqlite: {old[0]} is gone; use --quick/--full and --out DIR (see docs/bench.md)")
    env = dict(os.environ)
    if args and not args[0].startswith("-"):
        env["ATOMFS_SQLITE_EXT"] = os.path.abspath(args.pop(0))
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "atomfs-bench"], cwd=root, check=True)
    bench = os.path.join(root, "target", "release", "atomfs-bench")
    sys.exit(subprocess.run([bench, "sqlite", *args], cwd=root, env=env).returncode)


if __name__ == "__main__":
    main()
