//! The POSIX-style layer shared by atomfs's C front ends (the C API `libatomfs`, the
//! LD_PRELOAD shim `libatomfs_preload` and, through the C API, the SQLite VFS).
//!
//! It turns the inode- and handle-based [`store::Store`] into what C programs expect:
//! - [`Pool`]s opened by path, one store per pool file per process however often it is opened;
//! - [`OpenFile`]s with a file offset and status flags, shared by `dup`ed descriptors, closing
//!   their store handle when the last descriptor goes;
//! - [`FdTable`]: descriptor numbers → open files (the C API numbers its own descriptors; the
//!   shim uses real kernel descriptors it reserved);
//! - transaction ids of the C calls (`tx_begin` ...) over the store's [`store::TxId`]s, valid
//!   process-wide and never reused;
//! - errors as errno values ([`Errno`]);
//! - the process umask applied to the modes of created files and directories ([`umask`]).
//!
//! Nothing here panics on bad input: every failure is an errno.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod attrs;
mod names;
mod ops;
mod pools;
mod tx;
pub mod umask;
pub mod xattrs;

pub use attrs::{chown, utimens, TimeArg};
pub use names::{linkat, mknod, readlink, rename2, rename_mode, symlink, tmpfile};
pub use ops::*;
pub use pools::{
    forget_inherited, internal_fd_floor, is_internal_fd, open_pool, relocate_internal_fd,
    CreateSpec, Pool, CREATE_SIZE_DEFAULT,
};
pub use tx::{tx_abort, tx_add, tx_begin, tx_commit, TX_FILES_MAX};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use store::{Fh, Ino};

/// An errno value (positive).
pub type Errno = i32;

/// Result of every call of this layer.
pub type PResult<T> = Result<T, Errno>;

/// errno of a store error.
pub fn errno_of(e: &store::Error) -> Errno {
    e.errno()
}

/// Open-flag bit meaning O_ATOMIC (ACCFS): writes since the last fsync persist together at
/// the next fsync/syncv. Bit 30: no Linux open flag uses it.
pub const O_ATOMIC: i32 = 0x4000_0000;

/// What an open file refers to.
#[derive(Debug)]
pub enum Target {
    /// A regular file with its store handle.
    File(Fh),
    /// A directory (opened for fsync or `fdopendir`); holds no store handle.
    Dir,
}

/// One open file description: shared by every descriptor `dup`ed from it.
pub struct OpenFile {
    pub pool: Arc<Pool>,
    pub ino: Ino,
    pub target: Target,
    /// File offset for read/write/lseek.
    pub pos: Mutex<u64>,
    /// Status flags as `fcntl(F_GETFL)` shows them (access mode, O_APPEND, O_NONBLOCK...).
    pub status: AtomicI32,
    /// Whether the file is in O_ATOMIC mode through this description.
    pub atomic: AtomicBool,
    /// Path inside the pool, for messages and `fdopendir`.
    pub path: Vec<u8>,
}

impl OpenFile {
    /// The store handle of a regular file; `EISDIR` for a directory.
    pub fn fh(&self) -> PResult<Fh> {
        match self.target {
            Target::File(fh) => Ok(fh),
            Target::Dir => Err(libc::EISDIR),
        }
    }

    fn access(&self) -> i32 {
        self.status.load(Ordering::Relaxed) & libc::O_ACCMODE
    }

    /// `EBADF` unless open for reading.
    pub fn check_readable(&self) -> PResult<()> {
        if self.access() == libc::O_WRONLY {
            return Err(libc::EBADF);
        }
        Ok(())
    }

    /// `EBADF` unless open for writing.
    pub fn check_writable(&self) -> PResult<()> {
        if self.access() == libc::O_RDONLY {
            return Err(libc::EBADF);
        }
        Ok(())
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        if let Target::File(fh) = self.target {
            // The last descriptor is gone. A failure here has no one to report to; pending
            // O_ATOMIC writes are dropped by the store as documented.
            let _ = self.pool.store.release(fh);
        }
    }
}

/// Descriptor numbers → open files. Thread-safe.
#[derive(Default)]
pub struct FdTable {
    map: RwLock<HashMap<i32, Arc<OpenFile>>>,
}

impl FdTable {
    pub fn new() -> FdTable {
        FdTable::default()
    }

    /// The open file behind `fd`; `EBADF` when `fd` is not one of ours.
    pub fn get(&self, fd: i32) -> PResult<Arc<OpenFile>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(&fd).cloned().ok_or(libc::EBADF)
    }

    /// Whether `fd` is one of ours.
    pub fn contains(&self, fd: i32) -> bool {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.contains_key(&fd)
    }

    /// Install `file` as `fd` (replacing what was there, as dup2 does).
    pub fn insert(&self, fd: i32, file: Arc<OpenFile>) -> Option<Arc<OpenFile>> {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        map.insert(fd, file)
    }

    /// Forget `fd`; the open file closes when its last descriptor goes.
    pub fn remove(&self, fd: i32) -> Option<Arc<OpenFile>> {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        map.remove(&fd)
    }

    /// Every descriptor currently open (for fork handling and tests).
    pub fn fds(&self) -> Vec<i32> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.keys().copied().collect()
    }

    /// Number of open descriptors.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
