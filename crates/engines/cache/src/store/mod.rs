//! [`CacheStore`]: the `Store` of the cache engine — the user's files are plain files in the
//! home directory (through `hostfs`), their data goes through the [`Cache`] in PM.
//!
//! Namespace operations are done on the home directory and made durable there (`sync_dir`)
//! before they return. Inside a transaction they are done at the call and undone by an abort
//! (a removed name is kept in the trash directory until the commit). File data: every write
//! is durable in PM when it returns; a transaction's or an O_ATOMIC file's writes are one
//! cache unit, committed at once.

mod fallocate;
mod handles;
mod home_conflicts;
mod names;
mod open;
mod ops;
mod posix;
mod tx;
mod xattrs;

pub use open::{recorded_home, HostCacheStore};

use crate::cache::Cache;
use crate::home::HomeFiles;
use crate::{Flusher, Unit};
use hostfs::HostFs;
use names::Names;
use parking_lot::Mutex;
use pmem::Region;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use store::{Ino, OpenFlags};

/// Name of the trash directory in the home directory (names removed by open transactions).
pub const TRASH_NAME: &str = ".atomfs-cache-trash";
/// Name of the marker file in the home directory (the store id).
pub const MARKER_NAME: &str = ".atomfs-cache";

/// An open handle.
#[derive(Clone, Copy, Debug)]
struct Handle {
    ino: Ino,
    flags: OpenFlags,
    atomic: bool,
}

/// A name: (directory, name in it).
type Entry = (Ino, Vec<u8>);

/// A namespace change of an open transaction, undone by its abort.
#[derive(Clone, Debug)]
enum Undo {
    /// A file or directory it created.
    Created {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        dir: bool,
    },
    /// A name it removed (kept in the trash as `trash`).
    Removed {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        trash: Vec<u8>,
    },
    /// A name it moved.
    Moved {
        from: (Ino, Vec<u8>),
        to: (Ino, Vec<u8>),
        ino: Ino,
    },
    /// A link it added.
    Linked {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
    },
    /// Attributes it changed (their values before; the owner when it changed it).
    Attr {
        ino: Ino,
        perm: u32,
        atime: u64,
        mtime: u64,
        owner: Option<(u32, u32)>,
    },
    /// Two names it exchanged (RENAME_EXCHANGE): exchanged again.
    Exchanged { a: Entry, b: Entry },
    /// An extended attribute it changed: the old value is in the trash file `saved`.
    Xattr { ino: Ino, saved: std::path::PathBuf },
}

/// An open transaction.
struct TxState {
    unit: Option<Unit>,
    files: Vec<Ino>,
    /// Namespace changes with their intent records.
    undo: Vec<(Undo, Option<u64>)>,
    /// Ranges it punched (file key, start, end): their home storage is freed after the
    /// commit.
    punched: Vec<(u64, u64, u64)>,
}

/// Everything behind the store's one lock.
struct Tables {
    names: Names,
    keys: HashMap<Ino, u64>,
    handles: HashMap<u64, Handle>,
    open_count: HashMap<Ino, u32>,
    /// Files unlinked while open: deleted from the cache at their last release.
    orphans: HashSet<Ino>,
    /// Files whose creating transaction aborted: NotFound to every call but release.
    gone: HashSet<Ino>,
    /// Unnamed files (O_TMPFILE): a staging name in the trash until `link` names them;
    /// deleted at their last release (and by the next open after a crash).
    unnamed: HashSet<Ino>,
    bound: HashMap<Ino, u64>,
    created_by: HashMap<Ino, u64>,
    txs: HashMap<u64, TxState>,
    atomic_units: HashMap<Ino, Unit>,
    trash_seq: u64,
    intent_seq: u64,
}

/// The cache engine's store over PM region `R` and home directory `H`.
pub struct CacheStore<R: Region, H: HostFs> {
    /// Others' use of the home's file system, for `statfs` (hostfs::SharedUsage).
    usage: hostfs::SharedUsage,
    cache: Arc<Cache<R, HomeFiles<H>>>,
    host: Arc<H>,
    t: Mutex<Tables>,
    flusher: Mutex<Option<Flusher>>,
    closed: AtomicBool,
    next_fh: AtomicU64,
    next_tx: AtomicU64,
}
