//! Plain data types of the [`HostFs`](crate::HostFs) seam.

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    pub read: bool,
    pub write: bool,
    /// Create the file when it does not exist.
    pub create: bool,
    /// Create the file; fail when it exists.
    pub create_new: bool,
    /// Truncate to zero length on open.
    pub truncate: bool,
    /// Permission bits of a created file.
    pub perm: u32,
}

impl OpenOptions {
    /// Read only.
    pub fn read_only() -> Self {
        OpenOptions {
            read: true,
            write: false,
            create: false,
            create_new: false,
            truncate: false,
            perm: 0o644,
        }
    }

    /// Read and write an existing file.
    pub fn read_write() -> Self {
        OpenOptions {
            write: true,
            ..Self::read_only()
        }
    }

    /// Read and write, creating the file when missing.
    pub fn create() -> Self {
        OpenOptions {
            create: true,
            ..Self::read_write()
        }
    }

    /// Read and write a file that must not exist yet.
    pub fn create_new() -> Self {
        OpenOptions {
            create_new: true,
            ..Self::read_write()
        }
    }
}

/// Kind of a directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// Device, FIFO or socket.
    Other,
}

/// Attributes of a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number: the file's identity across renames and links.
    pub ino: u64,
    pub kind: FileKind,
    pub len: u64,
    pub perm: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub atime_ns: u64,
    pub mtime_ns: u64,
    pub ctime_ns: u64,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: u64,
    pub kind: FileKind,
}

/// Space of a file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    /// Blocks free for an unprivileged user.
    pub blocks_available: u64,
    pub fs_type: crate::FsType,
}
