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

/// Longest symbolic link target, in bytes (PATH_MAX less its NUL, as in Linux).
pub const SYMLINK_MAX: usize = 4095;

/// Kind of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// A named pipe (mkfifo). The store keeps the inode; the kernel moves the data.
    Fifo,
    /// A unix socket's name (bind). The store keeps the inode; the kernel does the rest.
    Socket,
    /// A character device node; its device number is [`Metadata::rdev`].
    CharDevice,
    /// A block device node; its device number is [`Metadata::rdev`].
    BlockDevice,
}

impl FileKind {
    /// Every kind, for tables and tests.
    pub const ALL: [FileKind; 7] = [
        FileKind::File,
        FileKind::Dir,
        FileKind::Symlink,
        FileKind::Fifo,
        FileKind::Socket,
        FileKind::CharDevice,
        FileKind::BlockDevice,
    ];

    /// The kinds [`Store::mknod`](crate::Store::mknod) creates.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            FileKind::Fifo | FileKind::Socket | FileKind::CharDevice | FileKind::BlockDevice
        )
    }

    /// Whether the kind carries a device number.
    pub fn is_device(self) -> bool {
        matches!(self, FileKind::CharDevice | FileKind::BlockDevice)
    }

    /// The `S_IFMT` bits of `st_mode` for this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::File => libc::S_IFREG,
            FileKind::Dir => libc::S_IFDIR,
            FileKind::Symlink => libc::S_IFLNK,
            FileKind::Fifo => libc::S_IFIFO,
            FileKind::Socket => libc::S_IFSOCK,
            FileKind::CharDevice => libc::S_IFCHR,
            FileKind::BlockDevice => libc::S_IFBLK,
        }
    }

    /// The kind named by the `S_IFMT` bits of `mode`, if any.
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        let bits = mode & libc::S_IFMT;
        FileKind::ALL.into_iter().find(|k| k.mode_bits() == bits)
    }

    /// One byte per kind, for on-media records and the wire (stable: never renumber).
    pub fn code(self) -> u8 {
        match self {
            FileKind::File => 1,
            FileKind::Dir => 2,
            FileKind::Symlink => 3,
            FileKind::Fifo => 4,
            FileKind::Socket => 5,
            FileKind::CharDevice => 6,
            FileKind::BlockDevice => 7,
        }
    }

    /// The kind of a [`FileKind::code`] byte; `None` for any other byte.
    pub fn from_code(code: u8) -> Option<FileKind> {
        FileKind::ALL.into_iter().find(|k| k.code() == code)
    }
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
    /// Device number of a device node (`st_rdev`); 0 for every other kind.
    pub rdev: u64,
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

/// What [`Store::fallocate`](crate::Store::fallocate) does to `[off, off + len)` of a file
/// (fallocate(2); COLLAPSE_RANGE and INSERT_RANGE are not offered: they move data, which no
/// engine's block map does atomically today). Atomic and durable like a write, and part of the
/// transaction the file is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallocate {
    /// Reserve storage for the range (holes in it read as zeros and take storage); the size
    /// grows to `off + len` unless `keep_size` (mode 0, FALLOC_FL_KEEP_SIZE).
    Allocate { keep_size: bool },
    /// Free the range's storage; it reads as zeros; the size is unchanged
    /// (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE).
    PunchHole,
    /// Zero the range, allocated; the size grows to `off + len` unless `keep_size`
    /// (FALLOC_FL_ZERO_RANGE).
    ZeroRange { keep_size: bool },
}

impl Fallocate {
    /// The operation of a Linux fallocate(2) `mode`; InvalidArgument or Unsupported (with the
    /// reason) for the modes not offered.
    pub fn from_linux_mode(mode: i32) -> crate::Result<Fallocate> {
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        match mode {
            0 => Ok(Fallocate::Allocate { keep_size: false }),
            KEEP => Ok(Fallocate::Allocate { keep_size: true }),
            m if m == PUNCH | KEEP => Ok(Fallocate::PunchHole),
            PUNCH => Err(crate::Error::InvalidArgument(
                "FALLOC_FL_PUNCH_HOLE needs FALLOC_FL_KEEP_SIZE".into(),
            )),
            ZERO => Ok(Fallocate::ZeroRange { keep_size: false }),
            m if m == ZERO | KEEP => Ok(Fallocate::ZeroRange { keep_size: true }),
            m => Err(crate::Error::Unsupported(format!(
                "fallocate mode {m:#x} (collapse/insert range move data; not offered)"
            ))),
        }
    }
}

/// How [`Store::setxattr`](crate::Store::setxattr) treats an existing attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    #[default]
    Either,
    /// Fail with [`Error::Exists`](crate::Error::Exists) when it exists (XATTR_CREATE).
    Create,
    /// Fail with [`Error::NoAttribute`](crate::Error::NoAttribute) when it does not
    /// (XATTR_REPLACE).
    Replace,
}

/// How [`Store::rename_with`](crate::Store::rename_with) treats an existing target name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace it, as rename(2).
    #[default]
    Replace,
    /// Fail with [`Error::Exists`](crate::Error::Exists) when it exists (RENAME_NOREPLACE).
    NoReplace,
    /// Swap the two names atomically; both must exist (RENAME_EXCHANGE).
    Exchange,
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
