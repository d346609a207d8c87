//! Plain data types of the Store API.

/// Inode number. Engines number their inodes; [`ROOT_INO`] is the root directory everywhere.
pub type Ino = u64;

/// Inode number of the root directory of every store.
pub const ROOT_INO: Ino = 1;

/// Longest file name, in bytes, every engine accepts.
pub const NAME_MAX: usize = 255;

/// An open file, as issued by [`Store::open`](crate::Store::open).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fh(pub u64);

/// A transaction, as issued by [`Store::tx_begin`](crate::Store::tx_begin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u64);

/// Kind of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
}

/// A point in time, nanoseconds since the Unix epoch.
pub type TimeNs = u64;

/// Now, in nanoseconds since the Unix epoch, for file times.
///
/// Read from the coarse real-time clock (`CLOCK_REALTIME_COARSE`: the time of the last
/// scheduler tick, a few milliseconds of resolution), as the Linux kernel stamps file times
/// (`current_time()` uses the coarse clock too). It costs a few nanoseconds instead of a
/// full clock read on every write.
pub fn now_ns() -> TimeNs {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_REALTIME_COARSE exists on Linux;
    // clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// What `stat` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub ino: Ino,
    pub kind: FileKind,
    /// Size in bytes (for a directory: engine-defined, informative only).
    pub size: u64,
    /// Permission bits (`0o7777` part of st_mode).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bytes of storage the file occupies (holes take none).
    pub allocated: u64,
    pub atime: TimeNs,
    pub mtime: TimeNs,
    pub ctime: TimeNs,
}

impl Metadata {
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
}

/// Attribute changes for [`Store::setattr`](crate::Store::setattr); `None` leaves a field as is.
/// (The size changes through [`Store::set_len`](crate::Store::set_len).)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<TimeNs>,
    pub mtime: Option<TimeNs>,
}

/// How a file is opened at the engine level. Creation, exclusivity and truncation are
/// namespace steps done before (see [`OpenOptions`](crate::OpenOptions)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    /// Every write goes to the end of the file, atomically with finding the end.
    pub append: bool,
    /// O_ATOMIC (ACCFS): writes since the last `fsync` become durable together at the next
    /// `fsync`/`syncv`, or are dropped by `abortv` and by a crash.
    pub atomic: bool,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileKind,
}

/// What `statfs` returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u64,
    pub blocks_total: u64,
    pub blocks_free: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
    pub name_max: u64,
}

/// One problem found by fsck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsckProblem {
    /// What is wrong, e.g. "block 812 referenced by inodes 5 and 9".
    pub what: String,
    /// Where: a structure name and offset, an inode, a path.
    pub location: String,
}

/// Result of a consistency check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub problems: Vec<FsckProblem>,
    /// Named counters of what was checked ("inodes", "blocks", "log entries", ...).
    pub checked: Vec<(String, u64)>,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
    pub fn problem(&mut self, what: impl Into<String>, location: impl Into<String>) {
        self.problems.push(FsckProblem {
            what: what.into(),
            location: location.into(),
        });
    }
}

/// One bounded resource of a store (`Store::limits`, shown by `atomfs info`): what it is, its
/// maximum, what is in use now where the engine counts it, and the error a call gets past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// What is bounded ("open files", "file name bytes", ...).
    pub name: String,
    pub max: u64,
    /// In use now; `None` for a limit that applies per call (a name's length).
    pub used: Option<u64>,
    /// The error past it, as its errno name ("ENAMETOOLONG", "EMFILE", "ENOSPC").
    pub error: &'static str,
}

impl Limit {
    pub fn new(name: &str, max: u64, used: Option<u64>, error: &'static str) -> Limit {
        Limit {
            name: name.to_string(),
            max,
            used,
            error,
        }
    }
}

/// The limits every store has, from its capacity: file name length, inodes and blocks.
pub fn common_limits(s: &StatFs) -> Vec<Limit> {
    vec![
        Limit::new("file name bytes", s.name_max, None, "ENAMETOOLONG"),
        Limit::new(
            "inodes",
            s.inodes_total,
            Some(s.inodes_total.saturating_sub(s.inodes_free)),
            "ENOSPC",
        ),
        Limit::new(
            "data blocks",
            s.blocks_total,
            Some(s.blocks_total.saturating_sub(s.blocks_free)),
            "ENOSPC",
        ),
    ]
}
