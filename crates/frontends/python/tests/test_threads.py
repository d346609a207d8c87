"""Threads: one store shared by many threads, each running its own transactions, and several
threads writing one file at disjoint offsets. The GIL is released in every store call, so
these calls really overlap."""

import sys
import threading

import atomfs

THREADS = 4
ROUNDS = 150


def test_threads_each_with_their_own_transactions(any_store):
    s = any_store
    for t in range(THREADS):
        s.write_bytes(f"/a{t}", b"")
        s.write_bytes(f"/b{t}", b"")
    errors = []

    def worker(t: int) -> None:
        try:
            with s.open(f"/a{t}", "r+b", buffering=0) as a, \
                    s.open(f"/b{t}", "r+b", buffering=0) as b:
                for i in range(ROUNDS):
                    with s.transaction(a, b):
                        a.pwrite(b"%08d" % i, 0)
                        b.pwrite(b"%08d" % i, 0)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(THREADS):
        assert s.read_bytes(f"/a{t}") == s.read_bytes(f"/b{t}") == b"%08d" % (ROUNDS - 1)
    assert s.fsck().clean


def test_threads_share_one_file(store):
    store.write_bytes("/shared", b"")
    f = store.open("/shared", "r+b", buffering=0)
    size = 512

    def worker(t: int) -> None:
        for i in range(50):
            f.pwrite(bytes([t + 1]) * size, (t * 50 + i) * size)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    data = f.pread(THREADS * 50 * size, 0)
    f.close()
    for t in range(THREADS):
        chunk = data[t * 50 * size:(t + 1) * 50 * size]
        assert chunk == bytes([t + 1]) * (50 * size)


def test_gil_is_released_during_store_calls(store):
    """With a switch interval of 100 s, a thread waiting for the GIL gets it within this test
    only when the holder releases it voluntarily. The main thread wakes a helper, then makes
    store calls (big reads and commits) without blocking in Python: the helper runs while a
    call is in progress only if the call released the GIL."""
    store.write_bytes("/big", b"z" * (8 << 20))
    ready, go = threading.Event(), threading.Event()
    in_calls = [False]
    seen = []

    def helper() -> None:
        ready.set()
        go.wait()
        seen.append(in_calls[0])

    interval = sys.getswitchinterval()
    th = threading.Thread(target=helper)
    th.start()
    ready.wait()
    with store.open("/big", "r+b", buffering=0) as f:
        sys.setswitchinterval(100.0)
        try:
            in_calls[0] = True
            go.set()  # the helper now waits for the GIL
            for _ in range(10):
                assert len(f.pread(8 << 20, 0)) == 8 << 20
                with store.transaction(f):
                    f.pwrite(b"y" * 4096, 0)
            in_calls[0] = False
        finally:
            sys.setswitchinterval(interval)
    th.join()
    assert seen == [True], "the helper never ran during a store call: the GIL was held"
