"""Every call of the package, on both engines where it matters."""

import io
import os
import pathlib
import stat

import pytest

import atomfs


def test_create_close_reopen_keeps_data(path):
    with atomfs.create(path, size="16M") as s:
        assert s.engine == "pool"
        assert s.path == path
        s.write_bytes("/a", b"hello")
    assert s.closed
    with atomfs.open(path) as s:
        assert s.read_bytes("/a") == b"hello"
        assert not s.closed


def test_mmio_is_reachable_and_reopens(path, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with atomfs.create(path, engine="mmio", size="16M", home=home) as s:
        assert s.engine == "mmio"
        s.write_bytes("/f", b"on the host")
    assert (home / "f").read_bytes() == b"on the host"
    with atomfs.open(pathlib.Path(path)) as s:
        assert s.engine == "mmio"
        assert s.read_bytes(b"/f") == b"on the host"


def test_engines_lists_every_engine_with_options():
    engines = {e["name"]: e for e in atomfs.engines()}
    assert {"pool", "mmio"} <= set(engines)
    keys = {o["key"] for o in engines["pool"]["options"]}
    assert {"size", "mode"} <= keys


def test_info_and_fsck(any_store):
    info = any_store.info()
    assert info["engine"] == any_store.engine
    assert info["blocks_total"] >= info["blocks_free"] > 0
    assert isinstance(info["stats"], dict)
    any_store.write_bytes("/x", b"1" * 10000)
    report = any_store.fsck()
    assert report.clean, report.problems
    assert report.checked


def test_modes_wrap_like_builtin_open(store):
    with store.open("/f", "wb") as f:
        assert isinstance(f, io.BufferedWriter) and isinstance(f.raw, io.RawIOBase)
        f.write(b"abc")
    with store.open("/f", "rb") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read() == b"abc"
    with store.open("/f", "r+b") as f:
        assert isinstance(f, io.BufferedRandom)
    with store.open("/f", "rb", buffering=0) as f:
        assert isinstance(f, atomfs.RawFile) and isinstance(f, io.RawIOBase)
    with store.open("/t", "w", encoding="utf-8") as f:
        assert isinstance(f, io.TextIOWrapper)
        f.write("héllo\nwörld\n")
    with store.open("/t", "r", encoding="utf-8") as f:
        assert f.readlines() == ["héllo\n", "wörld\n"]
    with pytest.raises(ValueError):
        store.open("/f", "rw")
    with pytest.raises(ValueError):
        store.open("/f", "r", buffering=0)


def test_append_exclusive_and_truncating_modes(any_store):
    s = any_store
    with s.open("/f", "xb") as f:
        f.write(b"one")
    with pytest.raises(FileExistsError):
        s.open("/f", "xb")
    with s.open("/f", "ab") as f:
        f.write(b"two")
        assert f.tell() == 6
    assert s.read_bytes("/f") == b"onetwo"
    with s.open("/f", "wb") as f:
        f.write(b"3")
    assert s.read_bytes("/f") == b"3"


def test_raw_file_calls(any_store):
    s = any_store
    with s.open("/f", "w+b", buffering=0) as f:
        assert f.readable() and f.writable() and f.seekable() and not f.isatty()
        assert f.write(bytearray(b"0123456789")) == 10
        assert f.tell() == 10
        assert f.seek(2) == 2
        assert f.read(3) == b"234"
        buf = bytearray(4)
        assert f.readinto(buf) == 4 and buf == b"5678"
        assert f.seek(-1, io.SEEK_END) == 9
        assert f.read() == b"9"
        assert f.seek(-2, io.SEEK_CUR) == 8
        assert f.truncate(5) == 5
        assert f.tell() == 8
        assert f.seek(0) == 0 and f.readall() == b"01234"
        assert f.pwrite(memoryview(b"xy"), 1) == 2 and f.pread(3, 0) == b"0xy"
        assert f.stat().st_size == 5
        f.flush()
        f.sync()
        with pytest.raises(io.UnsupportedOperation):
            f.fileno()
    assert f.closed
    with pytest.raises(ValueError):
        f.read()
    with s.open("/f", "rb", buffering=0) as r:
        with pytest.raises(io.UnsupportedOperation):
            r.write(b"no")


def test_paths_may_be_str_bytes_or_pathlike(store):
    store.makedirs(pathlib.PurePosixPath("/d/e"))
    store.write_bytes(b"/d/e/f", b"1")
    with store.open(pathlib.PurePosixPath("/d/e/f")) as f:
        assert f.read() == b"1"
    assert store.listdir(b"/d/e") == [b"f"]
    assert store.listdir("/d/e") == ["f"]


def test_namespace_calls(any_store):
    s = any_store
    s.mkdir("/d")
    s.makedirs("/d/e/f")
    with pytest.raises(FileExistsError):
        s.makedirs("/d/e/f")
    s.makedirs("/d/e/f", exist_ok=True)
    s.write_bytes("/d/a", b"A")
    assert s.exists("/d/a") and not s.exists("/d/zz") and not s.exists("/d/a/zz")
    assert s.isdir("/d/e") and s.isfile("/d/a") and not s.isfile("/d/e")
    st = s.stat("/d/a")
    assert stat.S_ISREG(st.st_mode) and st.st_size == 1 and st.st_nlink == 1
    assert stat.S_ISDIR(s.stat("/d").st_mode)
    s.rename("/d/a", "/d/b")
    assert s.listdir("/d") == ["b", "e"]
    s.write_bytes("/d/c", b"C")
    s.replace("/d/c", "/d/b")
    assert s.read_bytes("/d/b") == b"C"
    entries = {e.name: e for e in s.scandir("/d")}
    assert entries["e"].is_dir() and entries["b"].is_file() and not entries["b"].is_symlink()
    assert entries["b"].path == "/d/b" and entries["b"].stat().st_size == 1
    assert entries["b"].inode() == s.stat("/d/b").st_ino
    assert list(s.walk("/d")) == [("/d", ["e"], ["b"]), ("/d/e", ["f"], []),
                                  ("/d/e/f", [], [])]
    assert [t[0] for t in s.walk("/d", topdown=False)] == ["/d/e/f", "/d/e", "/d"]
    s.remove("/d/b")
    s.rmdir("/d/e/f")
    assert s.listdir("/d") == ["e"]


def test_transaction_commits_at_exit(any_store):
    s = any_store
    s.write_bytes("/a", b"100")
    s.write_bytes("/b", b"0")
    with s.open("/a", "r+b") as a, s.open("/b", "r+b") as b:
        with s.transaction(a, b) as tx:
            assert not tx.done
            a.truncate(0)
            a.write(b"70")  # buffered: the commit flushes it into the transaction
            b.truncate(0)
            b.write(b"30")
        assert tx.done
    assert (s.read_bytes("/a"), s.read_bytes("/b")) == (b"70", b"30")


def test_transaction_aborts_on_exception(any_store):
    s = any_store
    s.write_bytes("/a", b"100")
    s.write_bytes("/b", b"0")
    with s.open("/a", "r+b") as a, s.open("/b", "r+b") as b:
        with pytest.raises(RuntimeError):
            with s.transaction(a, b):
                a.write(b"999")
                b.write(b"999")
                b.flush()
                raise RuntimeError("changed my mind")
    assert (s.read_bytes("/a"), s.read_bytes("/b")) == (b"100", b"0")


def test_transaction_add_commit_abort_and_namespace(store):
    s = store
    tx = s.transaction()
    with tx.open("/new", "wb") as f:  # created inside the transaction
        f.write(b"N")
        tx.mkdir("/dir")
        tx.write_bytes("/dir/x", b"X")
        tx.abort()
    assert not s.exists("/new") and not s.exists("/dir")
    s.write_bytes("/old", b"o")
    with s.open("/old", "r+b", buffering=0) as f:
        tx = s.transaction()
        tx.add(f)
        f.write(b"O")
        s.rename("/old", "/renamed", tx=tx)
        tx.commit()
    assert s.read_bytes("/renamed") == b"O" and not s.exists("/old")
    with pytest.raises(atomfs.TransactionError):
        tx.commit()
    with s.transaction() as tx:
        tx.makedirs("/m/n")
        tx.replace("/renamed", "/m/n/r")
        tx.remove("/m/n/r")
        tx.rmdir("/m/n")
    assert s.listdir("/m") == []


def test_atomic_files_sync_syncv_abortv(any_store):
    s = any_store
    s.write_bytes("/a", b"a0")
    s.write_bytes("/b", b"b0")
    a = s.open("/a", "r+b", atomic=True)
    b = s.open("/b", "r+b", atomic=True)
    a.write(b"a1")
    a.sync()
    assert s.read_bytes("/a") == b"a1"
    a.seek(0)
    b.write(b"b2")
    a.write(b"a2")
    s.syncv([a, b])
    assert (s.read_bytes("/a"), s.read_bytes("/b")) == (b"a2", b"b2")
    a.seek(0)
    a.write(b"a3")
    s.abortv([a])
    assert s.read_bytes("/a") == b"a2"
    b.seek(0)
    b.write(b"b4")
    b.close()  # closing without a sync drops the pending writes, as a crash would
    a.close()
    assert s.read_bytes("/b") == b"b2"


def test_atomic_text_file_sync(store):
    with store.open("/cfg", "w", atomic=True, encoding="utf-8") as f:
        f.write("key = 1\n")
        f.sync()
    assert store.read_text("/cfg") == "key = 1\n"


def test_committed_transaction_survives_reopen(path):
    with atomfs.create(path, size="16M") as s:
        s.write_bytes("/a", b"")
        s.write_bytes("/b", b"")
        with s.open("/a", "r+b") as a, s.open("/b", "r+b") as b, s.transaction(a, b):
            a.write(b"A" * 5000)
            b.write(b"B" * 3000)
    with atomfs.open(path) as s:
        assert s.read_bytes("/a") == b"A" * 5000
        assert s.read_bytes("/b") == b"B" * 3000
        assert s.fsck().clean


def test_calls_after_close_fail(path):
    s = atomfs.create(path, size="16M")
    f = s.open("/f", "wb", buffering=0)
    s.close()
    s.close()  # twice is fine
    with pytest.raises(atomfs.Error):
        s.listdir("/")
    with pytest.raises(atomfs.Error):
        f.write(b"x")
    f.close()
