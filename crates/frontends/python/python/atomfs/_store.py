"""Stores, their namespace calls and their transactions."""

import os
import stat as stat_module
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _native
from ._errors import ExistsError, NotADirError, NotFoundError
from ._files import PathArg, RawFile, native_of, open_file, path_bytes

__all__ = ["Store", "Transaction", "DirEntry", "FsckReport", "stat_result"]

_KIND_BITS = {"file": stat_module.S_IFREG, "dir": stat_module.S_IFDIR,
              "symlink": stat_module.S_IFLNK}


def stat_result(t: Tuple[Any, ...]) -> os.stat_result:
    """An ``os.stat_result`` from the native ``(ino, kind, size, perm, nlink, uid, gid,
    allocated, atime_ns, mtime_ns, ctime_ns)``."""
    ino, kind, size, perm, nlink, uid, gid, allocated, atime, mtime, ctime = t
    mode = _KIND_BITS[kind] | perm
    return os.stat_result(
        (mode, ino, 0, nlink, uid, gid, size, atime // 10**9, mtime // 10**9, ctime // 10**9),
        {"st_atime": atime / 1e9, "st_mtime": mtime / 1e9, "st_ctime": ctime / 1e9,
         "st_atime_ns": atime, "st_mtime_ns": mtime, "st_ctime_ns": ctime,
         "st_blocks": (allocated + 511) // 512, "st_blksize": 4096},
    )


def _tx(tx: Optional["Transaction"]) -> Optional["_native.NativeTx"]:
    return None if tx is None else tx._native


def _like(path: Any, name: bytes) -> Union[str, bytes]:
    """``name`` as ``str`` unless ``path`` was given as bytes (the ``os.listdir`` rule)."""
    return name if isinstance(os.fspath(path), bytes) else os.fsdecode(name)


def _join(top: Union[str, bytes], name: Union[str, bytes]) -> Any:
    return os.path.join(top, name)


@dataclass
class FsckReport:
    """Result of :meth:`Store.fsck`: ``problems`` as ``(what, where)`` pairs, and counts of
    what was checked."""

    problems: List[Tuple[str, str]] = field(default_factory=list)
    checked: Dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.problems


class DirEntry:
    """One entry of :meth:`Store.scandir`, shaped like ``os.DirEntry``."""

    __slots__ = ("name", "path", "_ino", "_kind", "_store")

    def __init__(self, store: "Store", top: Any, name: Any, ino: int, kind: str) -> None:
        self.name = name
        self.path = _join(os.fspath(top), name)
        self._ino = ino
        self._kind = kind
        self._store = store

    def __repr__(self) -> str:
        return f"<atomfs.DirEntry {self.name!r}>"

    def __fspath__(self) -> Any:
        return self.path

    def inode(self) -> int:
        return self._ino

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind == "dir"

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._kind == "file"

    def is_symlink(self) -> bool:
        return self._kind == "symlink"

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return self._store.stat(self.path)


class _Scandir:
    """The iterator :meth:`Store.scandir` returns (also a context manager)."""

    def __init__(self, entries: List[DirEntry]) -> None:
        self._it = iter(entries)

    def __iter__(self) -> "_Scandir":
        return self

    def __next__(self) -> DirEntry:
        return next(self._it)

    def __enter__(self) -> "_Scandir":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._it = iter(())


class Transaction:
    """A running transaction: every write and truncation through its files, and every
    namespace call given ``tx=`` it, becomes durable at :meth:`commit` all together, or is
    undone by :meth:`abort`. As a context manager it commits at a normal exit and aborts when
    the block raises. A transaction neither committed nor aborted is aborted when garbage
    collected. Isolation is the application's: other handles see its writes as they happen.
    """

    __slots__ = ("_store", "_native", "_buffered")

    def __init__(self, store: "Store", files: Iterable[Any]) -> None:
        self._store = store
        files = list(files)
        self._native = store._native.begin([native_of(f) for f in files])
        # The files whose buffers the commit and the abort flush (a RawFile has none).
        self._buffered = [f for f in files if type(f) is not RawFile]

    def __repr__(self) -> str:
        state = "done" if self._native.done else "running"
        return f"<atomfs.Transaction id={self._native.id} {state}>"

    @property
    def id(self) -> int:
        return self._native.id

    @property
    def done(self) -> bool:
        """Whether the transaction was committed or aborted."""
        return self._native.done

    def add(self, file: Any) -> None:
        """Bind one more open file to the transaction."""
        self._native.add(native_of(file))
        self._track(file)

    def _track(self, file: Any) -> None:
        if type(file) is not RawFile:
            self._buffered.append(file)

    def _flush(self) -> None:
        for f in self._buffered:
            if not f.closed:
                f.flush()

    def commit(self) -> None:
        """Flush the files' buffers into the transaction, then make all of it durable at
        once (the GIL is released meanwhile)."""
        self._flush()
        self._native.commit()

    def abort(self) -> None:
        """Undo every change of the transaction (buffered writes are flushed into it first,
        and undone with it)."""
        try:
            self._flush()
        finally:
            self._native.abort()

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._native.done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    # Calls of the store that belong to this transaction.
    def open(self, path: PathArg, mode: str = "rb", **kwargs: Any) -> Any:
        """``store.open(path, mode, tx=self)``."""
        return self._store.open(path, mode, tx=self, **kwargs)

    def mkdir(self, path: PathArg, mode: int = 0o777) -> None:
        self._store.mkdir(path, mode, tx=self)

    def makedirs(self, path: PathArg, mode: int = 0o777, exist_ok: bool = False) -> None:
        self._store.makedirs(path, mode, exist_ok, tx=self)

    def remove(self, path: PathArg) -> None:
        self._store.remove(path, tx=self)

    def rmdir(self, path: PathArg) -> None:
        self._store.rmdir(path, tx=self)

    def rename(self, src: PathArg, dst: PathArg) -> None:
        self._store.rename(src, dst, tx=self)

    def replace(self, src: PathArg, dst: PathArg) -> None:
        self._store.replace(src, dst, tx=self)

    def write_bytes(self, path: PathArg, data: bytes) -> None:
        self._store.write_bytes(path, data, tx=self)


class Store:
    """An open atomfs store (from :func:`atomfs.create` or :func:`atomfs.open`).

    Thread-safe. As a context manager it closes (checkpointing) at the end of the block.
    Paths are inside the store, ``str``, ``bytes`` or ``os.PathLike``, absolute or relative
    to its root.
    """

    def __init__(self, native: "_native.NativeStore") -> None:
        self._native = native

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<atomfs.Store engine={self.engine!r} path={self.path!r}{state}>"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def engine(self) -> str:
        return self._native.engine

    @property
    def path(self) -> str:
        """The pool file."""
        return os.fsdecode(self._native.path)

    @property
    def closed(self) -> bool:
        return self._native.closed

    def close(self) -> None:
        """Checkpoint everything, close the store and release its lock. Files and
        transactions of a closed store fail; closing twice does nothing."""
        self._native.close()

    def info(self) -> Dict[str, Any]:
        """Engine, capacity (``block_size``, ``blocks_total``, ``blocks_free``,
        ``inodes_total``, ``inodes_free``, ``name_max``) and the engine's counters
        (``stats``)."""
        info = self._native.info()
        info["path"] = os.fsdecode(info["path"])
        info["stats"] = dict(info["stats"])
        return info

    def fsck(self) -> FsckReport:
        """Check the store's on-media structures (read-only)."""
        problems, checked = self._native.fsck()
        return FsckReport(list(problems), dict(checked))

    # ----- files -----
    def open(self, path: PathArg, mode: str = "rb", buffering: int = -1,
             encoding: Optional[str] = None, errors: Optional[str] = None,
             newline: Optional[str] = None, *, atomic: bool = False, perm: int = 0o644,
             tx: Optional[Transaction] = None) -> Any:
        """Open a file as the built-in ``open`` does (modes ``r w a x`` with ``b t +``;
        ``buffering=0`` gives the :class:`RawFile`). The default mode is ``"rb"``.

        ``atomic=True``: O_ATOMIC, every write since the last ``sync()`` becomes durable
        together at the next ``f.sync()`` or ``store.syncv``, or never. ``tx``: the file's
        creation and truncation belong to the transaction and the file is bound to it."""
        f = open_file(self._native, path, mode, buffering, encoding, errors, newline, atomic,
                      perm, _tx(tx))
        if tx is not None:
            tx._track(f)
        return f

    def transaction(self, *files: Any) -> Transaction:
        """Begin a transaction bound to ``files`` (more join with ``tx.add``)."""
        return Transaction(self, files)

    def syncv(self, files: Iterable[Any]) -> None:
        """Commit the pending writes of several ``atomic=True`` files as one unit."""
        files = list(files)
        for f in files:
            f.flush()
        self._native.syncv([native_of(f) for f in files])

    def abortv(self, files: Iterable[Any]) -> None:
        """Drop the pending writes of several ``atomic=True`` files."""
        files = list(files)
        for f in files:
            f.flush()
        self._native.abortv([native_of(f) for f in files])

    def read_bytes(self, path: PathArg) -> bytes:
        """The whole content of a file."""
        return self._native.read_file(path_bytes(path))

    def write_bytes(self, path: PathArg, data: bytes, *,
                    tx: Optional[Transaction] = None) -> None:
        """Create or replace a whole file, atomically (in ``tx``, or in its own)."""
        self._native.write_file(path_bytes(path), bytes(data), _tx(tx))

    def read_text(self, path: PathArg, encoding: str = "utf-8") -> str:
        return self.read_bytes(path).decode(encoding)

    def write_text(self, path: PathArg, text: str, encoding: str = "utf-8", *,
                   tx: Optional[Transaction] = None) -> None:
        self.write_bytes(path, text.encode(encoding), tx=tx)

    # ----- namespace -----
    def stat(self, path: PathArg) -> os.stat_result:
        return stat_result(self._native.stat(path_bytes(path)))

    lstat = stat

    def exists(self, path: PathArg) -> bool:
        try:
            self._native.stat(path_bytes(path))
        except (NotFoundError, NotADirError):
            return False
        return True

    def isdir(self, path: PathArg) -> bool:
        return self.exists(path) and stat_module.S_ISDIR(self.stat(path).st_mode)

    def isfile(self, path: PathArg) -> bool:
        return self.exists(path) and stat_module.S_ISREG(self.stat(path).st_mode)

    def mkdir(self, path: PathArg, mode: int = 0o777, *,
              tx: Optional[Transaction] = None) -> None:
        self._native.mkdir(path_bytes(path), mode, _tx(tx))

    def makedirs(self, path: PathArg, mode: int = 0o777, exist_ok: bool = False, *,
                 tx: Optional[Transaction] = None) -> None:
        """Create a directory and its missing parents (``os.makedirs``)."""
        parts = [p for p in path_bytes(path).split(b"/") if p and p != b"."]
        created = False
        for i in range(len(parts)):
            here = b"/" + b"/".join(parts[: i + 1])
            try:
                self._native.mkdir(here, mode, _tx(tx))
                created = True
            except ExistsError:
                if not self.isdir(here):
                    raise
        if not created and not exist_ok:
            raise ExistsError(17, f"already exists: {os.fsdecode(path_bytes(path))}")

    def remove(self, path: PathArg, *, tx: Optional[Transaction] = None) -> None:
        self._native.remove(path_bytes(path), _tx(tx))

    unlink = remove

    def rmdir(self, path: PathArg, *, tx: Optional[Transaction] = None) -> None:
        self._native.rmdir(path_bytes(path), _tx(tx))

    def rename(self, src: PathArg, dst: PathArg, *,
               tx: Optional[Transaction] = None) -> None:
        """Rename atomically; an existing ``dst`` is replaced as rename(2) (and ``os.rename``
        on POSIX) does."""
        self._native.rename(path_bytes(src), path_bytes(dst), _tx(tx))

    def replace(self, src: PathArg, dst: PathArg, *,
                tx: Optional[Transaction] = None) -> None:
        """``os.replace``: rename, replacing ``dst``."""
        self._native.rename(path_bytes(src), path_bytes(dst), _tx(tx))

    def listdir(self, path: PathArg = "/") -> List[Any]:
        """Names in a directory (``bytes`` when ``path`` is ``bytes``), sorted."""
        return sorted(_like(path, name) for name, _, _ in self._native.listdir(path_bytes(path)))

    def scandir(self, path: PathArg = "/") -> _Scandir:
        entries = [DirEntry(self, path, _like(path, name), ino, kind)
                   for name, ino, kind in sorted(self._native.listdir(path_bytes(path)))]
        return _Scandir(entries)

    def walk(self, top: PathArg = "/", topdown: bool = True,
             onerror: Optional[Any] = None) -> Iterator[Tuple[Any, List[Any], List[Any]]]:
        """``os.walk`` over the store."""
        top = os.fspath(top)
        try:
            entries = list(self.scandir(top))
        except OSError as e:
            if onerror is not None:
                onerror(e)
            return
        dirs = [e.name for e in entries if e.is_dir()]
        files = [e.name for e in entries if not e.is_dir()]
        if topdown:
            yield top, dirs, files
        for name in dirs:
            yield from self.walk(_join(top, name), topdown, onerror)
        if not topdown:
            yield top, dirs, files
