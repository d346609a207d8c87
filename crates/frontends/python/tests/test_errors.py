"""Errors are atomfs.Error (an OSError) subclasses with the right errno."""

import errno
import os

import pytest

import atomfs


def test_hierarchy():
    assert issubclass(atomfs.Error, OSError)
    for cls in (atomfs.TransactionError, atomfs.CorruptError, atomfs.NoSpaceError,
                atomfs.BusyError, atomfs.NotEmptyError):
        assert issubclass(cls, atomfs.Error)
    assert issubclass(atomfs.NotFoundError, FileNotFoundError)
    assert issubclass(atomfs.ExistsError, FileExistsError)
    assert issubclass(atomfs.NotADirError, NotADirectoryError)
    assert issubclass(atomfs.IsADirError, IsADirectoryError)
    assert issubclass(atomfs.PermissionDeniedError, PermissionError)


def test_errno_mapping(store):
    store.mkdir("/d")
    store.write_bytes("/d/f", b"x")
    cases = [
        (lambda: store.open("/missing"), FileNotFoundError, errno.ENOENT),
        (lambda: store.stat("/missing/x"), FileNotFoundError, errno.ENOENT),
        (lambda: store.mkdir("/d"), FileExistsError, errno.EEXIST),
        (lambda: store.open("/d", "rb"), IsADirectoryError, errno.EISDIR),
        (lambda: store.listdir("/d/f"), NotADirectoryError, errno.ENOTDIR),
        (lambda: store.rmdir("/d"), atomfs.NotEmptyError, errno.ENOTEMPTY),
        (lambda: store.mkdir("/" + "n" * 300), atomfs.Error, errno.ENAMETOOLONG),
    ]
    for call, cls, code in cases:
        with pytest.raises(cls) as info:
            call()
        assert isinstance(info.value, atomfs.Error)
        assert info.value.errno == code, info.value
        assert info.value.strerror


def test_except_file_not_found_works(store):
    try:
        store.read_bytes("/nope")
    except FileNotFoundError as e:
        assert "nope" in str(e)
    else:
        pytest.fail("no error")


def test_transaction_errors(store):
    store.write_bytes("/f", b"")
    with store.open("/f", "r+b", buffering=0) as f:
        tx = store.transaction(f)
        with pytest.raises(atomfs.TransactionError) as info:
            store.transaction(f)  # bound to tx already
        assert info.value.errno == errno.EBUSY
        tx.commit()
        with pytest.raises(atomfs.TransactionError):
            tx.abort()
        with pytest.raises(atomfs.TransactionError):
            store.mkdir("/x", tx=tx)


def test_corrupt_error(path):
    with open(path, "wb") as f:
        f.write(b"not a store" * 1000)
    with pytest.raises(atomfs.CorruptError) as info:
        atomfs.open(path)
    assert info.value.errno == errno.EUCLEAN


def test_no_space_error(path):
    with atomfs.create(path, size="4M") as s:
        with pytest.raises(atomfs.NoSpaceError) as info:
            for i in range(10000):
                s.write_bytes(f"/f{i}", b"x" * 65536)
        assert info.value.errno == errno.ENOSPC


def test_busy_error(store):
    with pytest.raises(atomfs.BusyError) as info:
        atomfs.open(store.path)
    assert info.value.errno == errno.EBUSY
    assert str(os.getpid()) in str(info.value)


def test_bad_options_are_errors(path):
    with pytest.raises(atomfs.Error) as info:
        atomfs.create(path, engine="pool", colour="red")
    assert info.value.errno == errno.EINVAL and "colour" in str(info.value)
    with pytest.raises(atomfs.Error):
        atomfs.create(path, engine="nosuch")
    with pytest.raises(atomfs.Error):
        atomfs.create(path, engine="mmio")  # no home
    assert not os.path.exists(path)


def test_files_of_another_store_are_refused(store, path):
    other_path = path + ".other"
    try:
        with atomfs.create(other_path, size="16M") as other:
            with other.open("/f", "wb", buffering=0) as f:
                with pytest.raises(atomfs.Error) as info:
                    store.transaction(f)
                assert info.value.errno == errno.EXDEV
    finally:
        os.remove(other_path)
