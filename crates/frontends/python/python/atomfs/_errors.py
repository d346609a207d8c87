"""The exceptions of atomfs.

Every failure is an :class:`Error`, which is an :class:`OSError` with the errno of the
failure (``e.errno``) and the store's message (``e.strerror``). Where Python has a built-in
``OSError`` subclass for that errno, the atomfs class inherits from it too, so the usual
handlers work::

    try:
        store.open("/missing")
    except FileNotFoundError:      # also an atomfs.NotFoundError, an atomfs.Error
        ...
"""

import builtins

__all__ = [
    "Error",
    "TransactionError",
    "CorruptError",
    "NoSpaceError",
    "BusyError",
    "NotFoundError",
    "ExistsError",
    "NotADirError",
    "IsADirError",
    "NotEmptyError",
    "PermissionDeniedError",
]


class Error(OSError):
    """Root of every atomfs exception: an ``OSError`` carrying the errno."""


class TransactionError(Error):
    """A transaction is not running (committed, aborted, never begun), or a file belongs to
    another open transaction (errno ``EBUSY`` or ``EINVAL``)."""


class CorruptError(Error):
    """The store's on-media structures are damaged, of an unknown format version, or not an
    atomfs store at all (errno ``EUCLEAN``)."""


class NoSpaceError(Error):
    """The pool, its inode table or its log is full (errno ``ENOSPC``)."""


class BusyError(Error):
    """The store is open in another process (or another ``Store`` of this one), or was
    inherited by ``fork`` (errno ``EBUSY``)."""


class NotFoundError(Error, builtins.FileNotFoundError):
    """No such file or directory (errno ``ENOENT``)."""


class ExistsError(Error, builtins.FileExistsError):
    """The name is taken (errno ``EEXIST``)."""


class NotADirError(Error, builtins.NotADirectoryError):
    """A path component is not a directory (errno ``ENOTDIR``)."""


class IsADirError(Error, builtins.IsADirectoryError):
    """A file operation on a directory (errno ``EISDIR``)."""


class NotEmptyError(Error):
    """``rmdir`` of a directory with entries (errno ``ENOTEMPTY``)."""


class PermissionDeniedError(Error, builtins.PermissionError):
    """Permission denied, or an operation never allowed (errno ``EACCES``/``EPERM``)."""
