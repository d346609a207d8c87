"""Files of a store as Python file objects.

:class:`RawFile` is an :class:`io.RawIOBase` over one open handle of the store; ``Store.open``
wraps it by mode exactly like the built-in :func:`open` does (``BufferedReader``,
``BufferedWriter``, ``BufferedRandom``, ``TextIOWrapper``), with subclasses that add
:meth:`sync`. Writes reach the store when the buffer is flushed: a transaction flushes its
files before it commits or aborts, ``sync`` flushes before it commits.
"""

import io
import os
from typing import Any, Optional, Union

from . import _native

__all__ = [
    "RawFile",
    "BufferedReader",
    "BufferedWriter",
    "BufferedRandom",
    "TextIOWrapper",
    "native_of",
    "open_file",
]

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def path_bytes(path: PathArg) -> bytes:
    """The store's bytes for a ``str``, ``bytes`` or ``os.PathLike`` path."""
    return os.fsencode(os.fspath(path))


class RawFile(io.RawIOBase):
    """One open file of a store: unbuffered, seekable, without a file descriptor."""

    def __init__(self, native: "_native.NativeFile", name: Any, mode: str,
                 readable: bool, writable: bool) -> None:
        super().__init__()
        self._native = native
        self._readable = readable
        self._writable = writable
        self.name = name
        self.mode = mode

    def __repr__(self) -> str:
        return f"<atomfs.RawFile name={self.name!r} mode={self.mode!r}>"

    def readable(self) -> bool:
        self._check_open()
        return self._readable

    def writable(self) -> bool:
        self._check_open()
        return self._writable

    def seekable(self) -> bool:
        self._check_open()
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("atomfs files have no file descriptor")

    def isatty(self) -> bool:
        self._check_open()
        return False

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def read(self, size: Optional[int] = -1) -> bytes:
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        return self._native.read(-1 if size is None else size)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        n = len(data)
        view[:n] = data
        return n

    def write(self, data: Any) -> int:
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        if type(data) is not bytes:
            data = bytes(data)
        return self._native.write(data)

    def pread(self, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` without moving the position."""
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        return self._native.pread(size, offset)

    def pwrite(self, data: Any, offset: int) -> int:
        """Write ``data`` at ``offset`` without moving the position."""
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        if type(data) is not bytes:
            data = bytes(data)
        return self._native.pwrite(data, offset)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        return self._native.seek(offset, whence)

    def tell(self) -> int:
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        return self._native.tell()

    def truncate(self, size: Optional[int] = None) -> int:
        if self.closed:  # inline: the hot path
            raise ValueError("I/O operation on closed file")
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        return self._native.truncate(size)

    def sync(self, datasync: bool = False) -> None:
        """fsync: make the file durable. For a file opened with ``atomic=True``, commit
        every write since the last sync as one atomic unit."""
        self._check_open()
        self._native.sync(datasync)

    def set_atomic(self, atomic: bool) -> None:
        """Switch O_ATOMIC mode; switching it off commits the pending writes."""
        self._check_open()
        self._native.set_atomic(atomic)

    def stat(self) -> os.stat_result:
        self._check_open()
        from ._store import stat_result
        return stat_result(self._native.fstat())

    def close(self) -> None:
        if not self.closed:
            try:
                self._native.close()
            finally:
                super().close()


class _Sync:
    """``sync()`` for the buffered and text wrappers: flush, then sync the raw file."""

    def sync(self, datasync: bool = False) -> None:
        """Flush the buffer, then fsync the file (commit it, in atomic mode)."""
        self.flush()  # type: ignore[attr-defined]
        raw_of(self).sync(datasync)


class BufferedReader(_Sync, io.BufferedReader):
    """``io.BufferedReader`` over a :class:`RawFile`, with :meth:`sync`."""


class BufferedWriter(_Sync, io.BufferedWriter):
    """``io.BufferedWriter`` over a :class:`RawFile`, with :meth:`sync`."""


class BufferedRandom(_Sync, io.BufferedRandom):
    """``io.BufferedRandom`` over a :class:`RawFile`, with :meth:`sync`."""


class TextIOWrapper(_Sync, io.TextIOWrapper):
    """``io.TextIOWrapper`` over a buffered atomfs file, with :meth:`sync`."""


def raw_of(file: Any) -> RawFile:
    """The :class:`RawFile` under a file object that ``Store.open`` returned."""
    raw = file
    while type(raw) is not RawFile:
        inner = getattr(raw, "buffer", None) or getattr(raw, "raw", None)
        if inner is None:
            raise TypeError(f"not a file of an atomfs store: {file!r}")
        raw = inner
    return raw


def native_of(file: Any) -> "_native.NativeFile":
    """The native handle under a file object that ``Store.open`` returned."""
    if type(file) is RawFile:
        return file._native
    return raw_of(file)._native


def parse_mode(mode: str) -> "tuple[bool, bool, bool, bool, bool, bool, bool]":
    """``(read, write, append, truncate, create, create_new, text)`` of a built-in mode."""
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwaxbt+"):
        raise ValueError(f"invalid mode: {mode!r}")
    kinds = chars & set("rwax")
    if len(kinds) != 1 or ("b" in chars and "t" in chars):
        raise ValueError(f"invalid mode: {mode!r}")
    kind = kinds.pop()
    plus = "+" in chars
    return (kind == "r" or plus, kind != "r" or plus, kind == "a", kind == "w",
            kind in "wa", kind == "x", "b" not in chars)


def open_file(store_native: "_native.NativeStore", path: PathArg, mode: str, buffering: int,
              encoding: Optional[str], errors: Optional[str], newline: Optional[str],
              atomic: bool, perm: int, tx: Any) -> Any:
    """``Store.open``: open the native file, then wrap it as the built-in ``open`` would."""
    read, write, append, truncate, create, create_new, text = parse_mode(mode)
    if text and buffering == 0:
        raise ValueError("can't have unbuffered text I/O")
    native = store_native.open(path_bytes(path), read, write, append, truncate, create,
                               create_new, atomic, perm, tx)
    raw_mode = mode.replace("t", "").replace("b", "") + "b"
    raw = RawFile(native, os.fspath(path), raw_mode, read, write)
    if append:
        raw.seek(0, io.SEEK_END)  # as the built-in open: an append file starts at its end
    if buffering == 0:
        return raw
    line_buffering = buffering == 1 and text
    size = io.DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
    if size < 0:
        raise ValueError("invalid buffering size")
    wrapper = BufferedRandom if read and write else BufferedWriter if write else BufferedReader
    buffer = wrapper(raw, size)
    if not text:
        return buffer
    wrapped = TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
    wrapped.mode = mode  # type: ignore[misc]
    return wrapped
