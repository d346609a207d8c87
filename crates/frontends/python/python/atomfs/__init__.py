"""atomfs — failure-atomic, durable updates to your files, one file or many.

::

    import atomfs

    with atomfs.create("/dev/shm/bank.pool", size="64M") as store:
        store.write_bytes("/alice", b"100")
        store.write_bytes("/bob", b"0")
        with store.open("/alice", "r+b") as alice, store.open("/bob", "r+b") as bob:
            with store.transaction(alice, bob):     # commit at exit, abort on exception
                alice.truncate(0); alice.write(b"70")
                bob.truncate(0); bob.write(b"30")

A :class:`Store` is one atomfs store, served by any engine of the registry (``pool``: files in
a persistent-memory pool file; ``mmio``: files in a host directory ``home``, logs in the pool
file). Its files are ordinary Python file objects; every call outside a transaction is durable
and atomic when it returns; ``store.transaction(f1, f2, ...)`` makes everything written
through its files durable at once, or not at all. Errors are :class:`Error` (an ``OSError``)
subclasses. The GIL is released around every call into the store. See docs/python.md.
"""

import os
from typing import Any, Dict, List

from . import _native
from ._errors import (BusyError, CorruptError, Error, ExistsError, IsADirError, NoSpaceError,
                      NotADirError, NotEmptyError, NotFoundError, PermissionDeniedError,
                      TransactionError)
from ._files import (BufferedRandom, BufferedReader, BufferedWriter, PathArg, RawFile,
                     TextIOWrapper)
from ._store import DirEntry, FsckReport, Store, Transaction

__all__ = [
    "create", "open", "engines", "Store", "Transaction", "RawFile", "BufferedReader",
    "BufferedWriter", "BufferedRandom", "TextIOWrapper", "DirEntry", "FsckReport", "Error",
    "TransactionError", "CorruptError", "NoSpaceError", "BusyError", "NotFoundError",
    "ExistsError", "NotADirError", "IsADirError", "NotEmptyError", "PermissionDeniedError",
]

try:
    from importlib.metadata import version as _version
    __version__ = _version("atomfs")
except Exception:  # pragma: no cover - not installed as a distribution
    __version__ = "0.0.0"

_builtin_open = open


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(value))
    return str(value)


def _options(options: Dict[str, Any]) -> List[tuple]:
    return [(key, _option_text(value)) for key, value in options.items() if value is not None]


def create(path: PathArg, engine: str = "pool", size: Any = None, **options: Any) -> Store:
    """Create a new store in the file ``path`` (which must not exist).

    ``engine``: ``"pool"`` (default) or ``"mmio"`` (needs ``home=DIR``), or any engine
    :func:`engines` lists. ``size``: bytes (``int``) or text such as ``"64M"``. Other keyword
    options are the engine's (``mode="nc"``, ``checkpoint_threads=0``, ``home=...``).
    Recovery, formatting and the lock run with the GIL released."""
    options = dict(options, size=size)
    return Store(_native.create(os.fsencode(os.fspath(path)), engine, _options(options)))


def open(path: PathArg, **options: Any) -> Store:  # noqa: A001 - the module's verb
    """Open (and recover) the store in ``path``, whichever engine made it. Keyword options
    are the engine's runtime options."""
    return Store(_native.open(os.fsencode(os.fspath(path)), _options(options)))


def engines() -> List[Dict[str, Any]]:
    """Every engine of this build: name, description and options (key, default, help,
    whether it is fixed at create)."""
    return [
        {"name": name, "description": description,
         "options": [{"key": k, "default": d, "help": h, "create_only": c}
                     for k, d, h, c in options]}
        for name, description, options in _native.engines()
    ]
