//! `hostfs` — the host-file substrate of atomfs.
//!
//! The engines that keep user files on an ordinary file system (mmio, journal, remap, cache)
//! reach them only through the [`HostFs`] trait: one store directory, file handles, and the
//! operations whose crash behaviour the engines rely on. Two implementations:
//!
//! - [`RealHostFs`]: a real directory. Every path is validated ([`path`]) and resolved beneath
//!   the directory (openat2 with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
//!   RESOLVE_NO_SYMLINKS`, or a component-by-component walk with `O_NOFOLLOW` where the kernel
//!   lacks openat2), so no path — absolute, with `..`, or through a symlink — leaves it.
//! - [`SimHostFs`]: the crash model. Per file a durable and a live image, per directory a
//!   durable and a live set of entries, and the crash images of a crash at any moment
//!   (exhaustive for small state counts, seeded samples above). See [`sim`] and
//!   docs/hostfs.md for the model case by case and the kernel behaviour each case stands for.
//!
//! [`Faulty`] wraps either one and injects ENOSPC, EIO on write or fsync (with the
//! "fsyncgate" rule: a failed fsync loses that file's unsynced data), short writes, and files
//! truncated or deleted behind the engine's back.

#![deny(unsafe_op_in_unsafe_fn)]

mod caps;
mod error;
pub mod fault;
pub mod path;
pub mod real;
pub mod sim;
mod types;
mod usage;

pub use caps::{Capabilities, Capability, FsType};
pub use error::{HostFsError, HostFsResult};
pub use fault::{Fault, FaultKind, FaultOp, FaultPlan, Faulty};
pub use path::RelPath;
pub use real::RealHostFs;
pub use sim::{HostCrashPoint, HostImage, SimConfig, SimHostFs};
pub use types::{
    DirEntry, FallocateHow, FileKind, NodeKind, OpenOptions, RenameHow, Stat, StatFs, XattrHow,
};
pub use usage::SharedUsage;

use std::path::Path;

/// One store directory on a host file system (see the crate documentation).
///
/// Paths are relative to the store directory and validated by [`RelPath`]; the empty path
/// names the directory itself where a directory is meant. Every operation that changes
/// durable state says in its documentation what makes the change durable; nothing is durable
/// before the sync that its documentation names.
pub trait HostFs: Send + Sync + 'static {
    /// An open file.
    type File: Send + Sync + 'static;
    /// A whole-file mapping.
    type Map: pmem::Region;

    /// The store directory, for messages.
    fn root(&self) -> &Path;

    /// What the file system offers.
    fn capabilities(&self) -> Capabilities;

    /// `Ok` when `capability` is offered, else an error naming it and the file system.
    fn require(&self, capability: Capability) -> HostFsResult<()> {
        self.capabilities().require(capability, self.root())
    }

    /// Open (and with `options.create`, create) a regular file. A created file's directory
    /// entry is durable after [`sync_dir`](Self::sync_dir) of its directory.
    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<Self::File>;

    /// Read at `off`; returns the bytes read (0 at or past the end).
    fn read_at(&self, file: &Self::File, off: u64, buf: &mut [u8]) -> HostFsResult<usize>;

    /// Write at `off`, growing the file when the write ends past it; returns the bytes
    /// written, which may be fewer than asked. Durable after [`sync_data`](Self::sync_data).
    fn write_at(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<usize>;

    /// Change the length (growth reads as zeros). Durable after `sync_data` or `sync_all`.
    fn set_len(&self, file: &Self::File, len: u64) -> HostFsResult<()>;

    /// Attributes of an open file.
    fn file_stat(&self, file: &Self::File) -> HostFsResult<Stat>;

    /// fdatasync: the file's data and length are durable when this returns. After a failure
    /// the data written since the last successful sync must be treated as lost.
    fn sync_data(&self, file: &Self::File) -> HostFsResult<()>;

    /// fsync: `sync_data` plus the file's other attributes.
    fn sync_all(&self, file: &Self::File) -> HostFsResult<()>;

    /// fsync of a directory: creates, links, unlinks and renames of its entries are durable
    /// when this returns.
    fn sync_dir(&self, dir: &Path) -> HostFsResult<()>;

    /// rename(2): atomic, replaces an existing target; durable after `sync_dir` of both
    /// directories (until then a crash leaves the old or the new target, never neither).
    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()>;

    /// Remove a file's name; durable after `sync_dir` of its directory.
    fn unlink(&self, path: &Path) -> HostFsResult<()>;

    /// A second name for a file; durable after `sync_dir` of the new name's directory.
    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()>;

    /// Create a directory; durable after `sync_dir` of its parent.
    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()>;

    /// Remove an empty directory; durable after `sync_dir` of its parent.
    fn rmdir(&self, path: &Path) -> HostFsResult<()>;

    /// The entries of a directory (no `.` or `..`), in no particular order.
    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>>;

    /// Attributes of a path (a symlink is described, not followed).
    fn stat(&self, path: &Path) -> HostFsResult<Stat>;

    /// chmod; durable after `sync_all` of the file.
    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()>;

    /// Access and modification times in ns since the epoch (`None` leaves one unchanged).
    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()>;

    /// Space of the file system.
    fn statfs(&self) -> HostFsResult<StatFs>;

    // ----- the rest of the POSIX file API -----
    // Each has a default that refuses with EOPNOTSUPP, so that a wrapper which does not pass
    // one on says so instead of doing something else. None of them ever follows a symlink:
    // the engine never resolves a link's target itself (a target is bytes it stores).

    /// symlink(2): a symbolic link at `path` holding `target` (any bytes the caller checked;
    /// never resolved). Atomic with its entry; durable after `sync_dir` of its directory.
    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        let _ = (target, path);
        Err(error::io_errno(self.root(), "symlink", libc::EOPNOTSUPP))
    }

    /// readlink(2) of the symlink at `path` (EINVAL for any other kind).
    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        let _ = path;
        Err(error::io_errno(self.root(), "readlink", libc::EOPNOTSUPP))
    }

    /// mknod(2): a special file at `path`; a device node needs privilege (EPERM without it,
    /// returned as is). Durable after `sync_dir` of its directory.
    fn mknod(&self, path: &Path, kind: NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        let _ = (path, kind, perm, rdev);
        Err(error::io_errno(self.root(), "mknod", libc::EOPNOTSUPP))
    }

    /// renameat2(2) with RENAME_NOREPLACE or RENAME_EXCHANGE. An exchange is atomic: a crash
    /// before `sync_dir` of both directories leaves both names as they were or both swapped
    /// (the file system journals the two entries in one transaction).
    fn rename_with(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        let _ = (from, to, how);
        Err(error::io_errno(self.root(), "renameat2", libc::EOPNOTSUPP))
    }

    /// lchown(2) (`None` leaves one unchanged); durable after [`sync_node`](Self::sync_node).
    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        let _ = (path, uid, gid);
        Err(error::io_errno(self.root(), "lchown", libc::EOPNOTSUPP))
    }

    /// Times of the entry at `path` itself, a symlink included (utimensat with
    /// AT_SYMLINK_NOFOLLOW; `None` leaves one unchanged); durable after
    /// [`sync_node`](Self::sync_node).
    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        let _ = (path, atime, mtime);
        Err(error::io_errno(self.root(), "utimensat", libc::EOPNOTSUPP))
    }

    /// Make the attributes of the entry at `path` durable, whatever its kind: fsync of a file
    /// or directory; of a symlink or special file (which cannot be opened for it), fsync of
    /// its directory, which commits the file system's journal holding the inode's change.
    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        let _ = path;
        Err(error::io_errno(self.root(), "fsync", libc::EOPNOTSUPP))
    }

    /// lgetxattr(2) of the entry at `path` (ENODATA when absent).
    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        let _ = (path, name);
        Err(error::io_errno(self.root(), "getxattr", libc::EOPNOTSUPP))
    }

    /// lsetxattr(2): one attribute, atomically; durable after [`sync_node`](Self::sync_node).
    fn set_xattr(&self, path: &Path, name: &[u8], value: &[u8], how: XattrHow) -> HostFsResult<()> {
        let _ = (path, name, value, how);
        Err(error::io_errno(self.root(), "setxattr", libc::EOPNOTSUPP))
    }

    /// llistxattr(2): every attribute name of the entry at `path`.
    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        let _ = path;
        Err(error::io_errno(self.root(), "listxattr", libc::EOPNOTSUPP))
    }

    /// lremovexattr(2) (ENODATA when absent); durable after [`sync_node`](Self::sync_node).
    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        let _ = (path, name);
        Err(error::io_errno(
            self.root(),
            "removexattr",
            libc::EOPNOTSUPP,
        ))
    }

    /// fallocate(2) on an open file. Durable after `sync_data`; until then a punched or
    /// zeroed range holds, per sector, its old content or zeros.
    fn fallocate(
        &self,
        file: &Self::File,
        how: FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        let _ = (file, how, off, len);
        Err(error::io_errno(self.root(), "fallocate", libc::EOPNOTSUPP))
    }

    /// Map the file whole as a region of at least `len` bytes (rounded up to pages; bytes in
    /// pages wholly past the end of the file must not be touched). Stores are durable after
    /// flush + fence of the region, which on a host file system `msync`s the flushed pages.
    fn map(&self, file: &Self::File, len: u64) -> HostFsResult<Self::Map>;

    /// The first failed write-back (msync at a fence) of `map` since the last call, if any:
    /// a failed msync means the fence did not make the flushed stores durable, so engines
    /// check this at commit.
    fn check_map(&self, map: &Self::Map) -> HostFsResult<()>;

    /// FICLONERANGE: `dst[dst_off..+len]` shares `src[src_off..+len]`'s blocks. Offsets and
    /// length block-aligned (a length reaching the source's end may be unaligned). Durable
    /// after `sync_data` of `dst`; until then each block independently old or new.
    fn clone_range(
        &self,
        src: &Self::File,
        src_off: u64,
        dst: &Self::File,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()>;

    /// XFS_IOC_EXCHANGE_RANGE: swap `a[a_off..+len]` with `b[b_off..+len]`, all or nothing
    /// at a crash. Durable after `sync_data` of either file.
    fn exchange_range(
        &self,
        a: &Self::File,
        a_off: u64,
        b: &Self::File,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()>;

    /// pwritev2(RWF_ATOMIC) through O_DIRECT: the write is never torn at a crash. `data`'s
    /// length must be a power of two within the unit limits of [`Capabilities`], `off` a
    /// multiple of it. Durable after `sync_data`.
    fn atomic_write(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<()>;

    /// What a failed fsync does to the file: its data written since the last successful sync
    /// can no longer become durable. A real file system does this itself; the crash model
    /// does it when [`Faulty`] injects a failed fsync.
    fn drop_unsynced(&self, file: &Self::File) -> HostFsResult<()> {
        let _ = file;
        Ok(())
    }

    /// Write all of `data` at `off` (looping over short writes).
    fn write_all_at(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<()> {
        let mut done = 0;
        while done < data.len() {
            let n = self.write_at(file, off + done as u64, &data[done..])?;
            if n == 0 {
                return Err(error::io_errno(self.root(), "write", libc::EIO));
            }
            done += n;
        }
        Ok(())
    }

    /// Read until `buf` is full or the end of the file; returns the bytes read.
    fn read_full_at(&self, file: &Self::File, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(file, off + done as u64, &mut buf[done..])?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }
}
