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
    /// The file type bits of `st_mode` (`S_IFMT`): tells the kinds folded into
    /// [`FileKind::Other`] apart.
    pub mode_type: u32,
    /// Device number of a device node (0 for every other kind).
    pub rdev: u64,
    /// Bytes of storage allocated to the file (`st_blocks` × 512).
    pub allocated: u64,
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

/// The kind of a special file made by [`HostFs::mknod`](crate::HostFs::mknod).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeKind {
    Fifo,
    /// A socket's name (an `S_IFSOCK` node; nothing listens on it).
    Socket,
    CharDevice,
    BlockDevice,
}

impl NodeKind {
    /// The `S_IFMT` bits of this kind.
    pub fn mode_type(self) -> u32 {
        match self {
            NodeKind::Fifo => libc::S_IFIFO,
            NodeKind::Socket => libc::S_IFSOCK,
            NodeKind::CharDevice => libc::S_IFCHR,
            NodeKind::BlockDevice => libc::S_IFBLK,
        }
    }

    /// The kind of `S_IFMT` bits (`None` for files, directories and symlinks).
    pub fn from_mode_type(mode: u32) -> Option<NodeKind> {
        match mode & libc::S_IFMT {
            libc::S_IFIFO => Some(NodeKind::Fifo),
            libc::S_IFSOCK => Some(NodeKind::Socket),
            libc::S_IFCHR => Some(NodeKind::CharDevice),
            libc::S_IFBLK => Some(NodeKind::BlockDevice),
            _ => None,
        }
    }
}

/// How [`HostFs::rename_with`](crate::HostFs::rename_with) treats an existing target
/// (renameat2 flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameHow {
    /// RENAME_NOREPLACE: fail with EEXIST when the target exists.
    NoReplace,
    /// RENAME_EXCHANGE: swap two existing names atomically.
    Exchange,
}

/// How [`HostFs::set_xattr`](crate::HostFs::set_xattr) treats an existing attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrHow {
    /// Create or replace.
    Either,
    /// XATTR_CREATE: EEXIST when it exists.
    Create,
    /// XATTR_REPLACE: ENODATA when it does not.
    Replace,
}

/// What [`HostFs::fallocate`](crate::HostFs::fallocate) does to a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallocateHow {
    /// Mode 0 (or FALLOC_FL_KEEP_SIZE): allocate storage, content unchanged.
    Allocate { keep_size: bool },
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: free the storage, reads give zeros.
    PunchHole,
    /// FALLOC_FL_ZERO_RANGE: zeros, storage allocated.
    ZeroRange { keep_size: bool },
}

impl FallocateHow {
    /// The fallocate(2) mode bits.
    pub fn mode(self) -> i32 {
        match self {
            FallocateHow::Allocate { keep_size } => {
                if keep_size {
                    libc::FALLOC_FL_KEEP_SIZE
                } else {
                    0
                }
            }
            FallocateHow::PunchHole => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            FallocateHow::ZeroRange { keep_size } => {
                libc::FALLOC_FL_ZERO_RANGE
                    | if keep_size {
                        libc::FALLOC_FL_KEEP_SIZE
                    } else {
                        0
                    }
            }
        }
    }
}
