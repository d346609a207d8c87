"""SIGKILL loop: a child process commits two-file transactions and acknowledges each commit
on stdout; the parent kills it at a random moment, 100 times, and after every kill opens the
store (recovery) and checks that every acknowledged transaction is present and none is torn
(both files hold the same transaction, whole)."""

import json
import os
import random
import select
import signal
import subprocess
import sys
import time

import atomfs

KILLS = 100
# Options of the store under test (a comparison mode without consistency, mode="nc", makes
# this test fail: that is how the oracle was checked).
OPTIONS: dict = {}

CHILD = r"""
import atomfs, json, random, sys
store = atomfs.open(sys.argv[1], **json.loads(sys.argv[3]))
a = store.open("/a", "r+b", buffering=0)
b = store.open("/b", "r+b", buffering=0)
n = int(sys.argv[2])
while True:
    n += 1
    rng = random.Random(n)
    body = (b"%010d:" % n) + rng.randbytes(rng.randrange(0, 4096))
    with store.transaction(a, b):
        for f in (a, b):
            f.truncate(0)
            f.pwrite(body, 0)
    sys.stdout.write("%d\n" % n)
    sys.stdout.flush()
"""


def expected(n: int) -> bytes:
    rng = random.Random(n)
    return (b"%010d:" % n) + rng.randbytes(rng.randrange(0, 4096))


def committed(path: str) -> int:
    """Open (recover) the store and return the transaction both files hold, whole."""
    with atomfs.open(path, **OPTIONS) as s:
        a, b = s.read_bytes("/a"), s.read_bytes("/b")
        assert a == b, f"torn: /a holds {a[:11]!r}, /b holds {b[:11]!r}"
        n = int(a[:10]) if a else 0
        assert n == 0 or a == expected(n), f"transaction {n} not whole"
        assert s.fsck().clean
        return n


def run_child(path: str, start: int, rng: random.Random) -> int:
    """Start a child at transaction `start`, let it acknowledge a few commits, kill it;
    returns the last acknowledged transaction."""
    argv = [sys.executable, "-c", CHILD, path, str(start), json.dumps(OPTIONS)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    acked = start
    want = rng.randrange(1, 6)
    deadline = time.monotonic() + 10
    out = child.stdout
    buf = b""
    while acked - start < want and time.monotonic() < deadline:
        ready, _, _ = select.select([out], [], [], 0.5)
        if ready:
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            acked = max([acked] + [int(x) for x in lines if x])
    time.sleep(rng.random() * 0.002)  # kill mid-transaction at a random point
    child.send_signal(signal.SIGKILL)
    child.wait()
    rest = out.read()
    lines = (buf + rest).split(b"\n")
    acked = max([acked] + [int(x) for x in lines[:-1] if x])
    out.close()
    assert child.returncode == -signal.SIGKILL, f"child ended on its own ({child.returncode})"
    return acked


def test_sigkill_loop(path):
    with atomfs.create(path, size="16M", **OPTIONS) as s:
        s.write_bytes("/a", b"")
        s.write_bytes("/b", b"")
    rng = random.Random(0xA70F5)
    n = 0
    for kill in range(KILLS):
        acked = run_child(path, n, rng)
        n = committed(path)
        assert n >= acked, f"kill {kill}: acknowledged {acked}, recovered only {n}"
        assert n <= acked + 1, f"kill {kill}: recovered {n} past the attempted {acked + 1}"
    assert n > KILLS
