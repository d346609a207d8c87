//! The engine-neutral Store API of atomfs.
//!
//! Every engine (`pool`, `mmio`, `journal`, `remap`, `cache`) implements [`Store`]; every front
//! end (Rust API, C API, SQLite VFS, FUSE, CLI) and every test suite talks only to [`Store`].
//! The trait is inode-based, like a FUSE low-level file system: namespace operations take a
//! parent inode and a name; file I/O goes through open file handles ([`Fh`]). Path-based helpers
//! ([`resolve`], [`OpenOptions`], ...) are built on top, in [`path`].
//!
//! # Transactions
//! A transaction ([`TxId`]) binds a set of open files (`tx_begin`, `tx_add`). Every write and
//! `set_len` through a bound file belongs to the transaction; namespace operations take an
//! optional transaction and then belong to it too. `tx_commit` makes all of it durable at
//! once; `tx_abort` (or a crash before the commit point) makes none of it visible. A file is
//! bound to at most one open transaction at a time ([`Error::FileInTransaction`]).
//! Calls outside any transaction are each their own transaction: durable and atomic when they
//! return. Isolation between transactions is the application's (AD-transactions, as in FCFS).
//!
//! A namespace call checks, in this order: its names ([`path::check_entry_name`]:
//! NameTooLong, InvalidArgument for `.`, `..`, empty, `/` or NUL), then its transaction
//! ([`Error::NoSuchTransaction`] when it is not open), then the tree (NotFound, Exists,
//! NotEmpty, ...); a refused call changes nothing (conformance case `namespace_error_order`).
//!
//! A file or directory created by an open transaction belongs to it until it commits or
//! aborts (an abort removes it). From outside that transaction — a call outside any
//! transaction, another transaction, an O_ATOMIC file's implicit one — every change to it
//! fails with [`Error::FileInTransaction`] naming the creator (EBUSY): `write` (of at least
//! one byte) and `set_len` through a handle whose file is not bound to the creator, binding
//! it to another transaction (`tx_begin`, `tx_add`), `unlink`, `rmdir`, `rename` of it or
//! over it, `link` to it, `setattr`, and adding, removing or moving entries of such a
//! directory. The check comes after the call's own errors (`NotFound`, `Exists`, ...).
//! Looking it up, opening and reading it are allowed (a reader sees the transaction's
//! uncommitted data: isolation is the application's). Once the creator has bound the file,
//! every handle's writes belong to the creator; after the commit the file is everyone's.
//! After an abort the file is gone: a handle still open on it, bound or not, answers
//! [`Error::NotFound`] to every call but `release`, which succeeds (conformance case
//! `tx_aborted_create_handles_not_found`).
//!
//! # O_ATOMIC
//! A file opened with [`OpenFlags::atomic`] (or switched by `set_atomic`) collects its writes
//! since the last `fsync`; `fsync` commits them atomically, `syncv` commits several such files
//! together, `abortv` drops their pending writes.

mod error;
pub mod path;
mod types;
pub mod xattr;

pub use error::{Error, Result};
pub use path::{names_dir, resolve, resolve_parent, split_path, OpenOptions};
pub use types::*;
pub use xattr::{
    check_symlink_target, check_xattr_change, check_xattr_name, check_xattr_value, XattrNamespace,
};

use std::any::Any;

/// The operations every engine provides. Object safe: front ends hold an `Arc<dyn Store>`.
pub trait Store: Send + Sync {
    /// Short engine name ("pool", "mmio", ...), with its mode where it has several.
    fn engine_name(&self) -> String;

    // ----- namespace -----

    /// The entry `name` in directory `parent`.
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata>;
    /// Attributes of an inode.
    fn getattr(&self, ino: Ino) -> Result<Metadata>;
    /// Change permissions, owner or times.
    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata>;
    /// Create an empty regular file; [`Error::Exists`] when the name is taken.
    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata>;
    /// Create a directory; [`Error::Exists`] when the name is taken.
    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata>;
    /// Create a symbolic link holding `target` (checked by [`check_symlink_target`]; never
    /// resolved by the engine), atomically and durably with its entry, in `tx` like any
    /// namespace call. Its size is the target's length; its permissions are 0o777.
    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let _ = (parent, name, target, tx);
        Err(Error::Unsupported("symlink".into()))
    }
    /// Target of a symbolic link ([`Error::InvalidArgument`] for any other kind, as
    /// readlink(2)).
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let _ = ino;
        Err(Error::Unsupported("readlink".into()))
    }
    /// Create a special file: a FIFO, a socket's name or a device node (`kind` one of
    /// [`FileKind::is_special`], else InvalidArgument; `rdev` kept for device nodes, 0 for
    /// the others). Like `create` in every other respect.
    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let _ = (parent, name, kind, perm, rdev, tx);
        Err(Error::Unsupported("special files (mknod)".into()))
    }
    /// A new regular file with no name, open (O_TMPFILE): nothing of it survives a crash or
    /// its last `release` until [`Store::link`] gives it a name, which publishes it with its
    /// contents atomically. `parent` is the directory it is made in (must be a directory).
    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let _ = (parent, perm, flags, tx);
        Err(Error::Unsupported("unnamed files (O_TMPFILE)".into()))
    }
    /// Remove a name of a non-directory. The inode lives on while it has names or open handles.
    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()>;
    /// Remove an empty directory.
    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()>;
    /// Rename, replacing an existing target as POSIX rename(2) does (a file replaces a file,
    /// a directory replaces an empty directory), atomically.
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()>;
    /// Rename with a [`RenameMode`]: `Replace` is [`Store::rename`]; `NoReplace` fails with
    /// Exists when the target name exists; `Exchange` swaps two existing names (of any kinds,
    /// a directory's `..` following it) atomically. The same checks and order as `rename`.
    #[allow(clippy::too_many_arguments)]
    fn rename_with(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        match mode {
            RenameMode::Replace => self.rename(parent, name, new_parent, new_name, tx),
            RenameMode::NoReplace => Err(Error::Unsupported("RENAME_NOREPLACE".into())),
            RenameMode::Exchange => Err(Error::Unsupported("RENAME_EXCHANGE".into())),
        }
    }
    /// Add a hard link to a non-directory (or the first name of a [`Store::tmpfile`]).
    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata>;
    /// Every entry of a directory ("." and ".." excluded), in engine order.
    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>>;

    // ----- open files -----

    /// Open a regular file.
    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh>;
    /// Close a handle. Pending O_ATOMIC writes not yet fsynced are dropped (as a crash would).
    fn release(&self, fh: Fh) -> Result<()>;
    /// Read at `off`; returns the bytes read (0 at or past end of file). Holes read as zeros.
    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize>;
    /// Write at `off` (at the end of file for append handles); returns `data.len()`.
    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize>;
    /// Truncate or extend (with a hole) to `len` bytes.
    fn set_len(&self, fh: Fh, len: u64) -> Result<()>;
    /// Allocate, punch or zero `[off, off + len)` ([`Fallocate`]); `len` 0 is
    /// InvalidArgument, as fallocate(2). Atomic, durable and part of the file's transaction
    /// like a write; a handle not open for writing is BadMode.
    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let _ = (fh, op, off, len);
        Err(Error::Unsupported("fallocate".into()))
    }
    /// Make the file durable. For an O_ATOMIC file: commit its pending writes atomically.
    fn fsync(&self, fh: Fh, datasync: bool) -> Result<()>;
    /// Attributes of an open file.
    fn fstat(&self, fh: Fh) -> Result<Metadata>;
    /// Switch a handle's file in or out of O_ATOMIC mode. Switching out commits pending writes.
    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()>;
    /// Commit the pending O_ATOMIC writes of several files as one atomic unit.
    fn syncv(&self, fhs: &[Fh]) -> Result<()>;
    /// Drop the pending O_ATOMIC writes of several files.
    fn abortv(&self, fhs: &[Fh]) -> Result<()>;

    // ----- extended attributes -----
    // Names and values are checked by [`check_xattr_name`] / [`check_xattr_value`] first.
    // Changes are atomic and durable like any attribute change, in `tx` when given.

    /// Value of an attribute ([`Error::NoAttribute`] when absent).
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let _ = (ino, name);
        Err(Error::Unsupported("extended attributes".into()))
    }
    /// Set an attribute as [`XattrSet`] says.
    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        let _ = (ino, name, value, how, tx);
        Err(Error::Unsupported("extended attributes".into()))
    }
    /// Names of every attribute of an inode, in engine order.
    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let _ = ino;
        Err(Error::Unsupported("extended attributes".into()))
    }
    /// Remove an attribute ([`Error::NoAttribute`] when absent).
    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let _ = (ino, name, tx);
        Err(Error::Unsupported("extended attributes".into()))
    }

    // ----- transactions -----

    /// Begin a transaction bound to `files` (possibly none yet).
    fn tx_begin(&self, files: &[Fh]) -> Result<TxId>;
    /// Bind one more open file to a running transaction.
    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()>;
    /// Make every change of the transaction durable, atomically. The files stay open, unbound.
    fn tx_commit(&self, tx: TxId) -> Result<()>;
    /// Undo every change of the transaction. The files stay open, unbound.
    fn tx_abort(&self, tx: TxId) -> Result<()>;

    // ----- the store -----

    /// Capacity and usage.
    fn statfs(&self) -> Result<StatFs>;
    /// Engine statistics as named counters (log occupancy, checkpoints, bytes written...).
    fn stats(&self) -> Vec<(String, u64)>;
    /// Every bounded resource, with its maximum and its use (`atomfs info`). The default:
    /// the file name length, inodes and blocks from [`Store::statfs`]; engines add theirs.
    fn limits(&self) -> Result<Vec<Limit>> {
        Ok(common_limits(&self.statfs()?))
    }
    /// Check the store's on-media structures. Never modifies anything.
    fn fsck(&self) -> Result<FsckReport>;
    /// Checkpoint everything and close. Later calls fail with [`Error::Closed`].
    fn unmount(&self) -> Result<()>;
    /// For tools that need an engine's own interface (inspect, bench): downcast target.
    fn as_any(&self) -> &dyn Any;
}
