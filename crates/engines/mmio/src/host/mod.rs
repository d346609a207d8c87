//! [`FileMedia`]: the engine's view of its host files — namespace operations that are
//! durable when they return, lengths, and whole-file mappings as a [`Region`]. Its one
//! implementation is [`HostMedia`](crate::HostMedia) (src/host/media.rs), over any
//! `hostfs::HostFs` store directory: the jailed real directory in a real store, the crash
//! model (`hostfs::SimHostFs`) in the crash tests.

pub(crate) mod media;
pub(crate) mod window;

use pmem::Region;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::{FileKind, TimeNs};

/// Name of the file in the host directory that ties it to its log pool (holds the store id).
pub const MARKER_NAME: &str = ".atomfs-mmio";

/// Attributes of a host file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaStat {
    /// Persistent identity (inode number on a real file system).
    pub id: u64,
    pub kind: FileKind,
    pub len: u64,
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: TimeNs,
    pub mtime: TimeNs,
    pub ctime: TimeNs,
    /// Device number of a device node (0 otherwise).
    pub rdev: u64,
    /// Bytes of storage the host allocated to it.
    pub allocated: u64,
}

/// Host files: namespace operations (each durable when it returns), lengths, and whole-file
/// mappings as a [`Region`]. Paths are relative to the store's directory ("" is the root).
pub trait FileMedia: Send + Sync + 'static {
    /// The mapping of one file.
    type Map: Region;
    fn describe(&self) -> String;
    fn stat(&self, rel: &Path) -> io::Result<MediaStat>;
    /// Create an empty file (fails when the name exists); durable with its directory entry.
    fn create(&self, rel: &Path, perm: u32) -> io::Result<MediaStat>;
    fn mkdir(&self, rel: &Path, perm: u32) -> io::Result<MediaStat>;
    fn unlink(&self, rel: &Path) -> io::Result<()>;
    fn rmdir(&self, rel: &Path) -> io::Result<()>;
    /// rename(2): replaces the target, durable when it returns. A file moved to a free name
    /// is linked there first and unlinked after: a crash in between leaves both names of the
    /// one file (never neither), which recovery settles from the move's intent record.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn read_dir(&self, rel: &Path) -> io::Result<Vec<(Vec<u8>, MediaStat)>>;
    /// Change the length (zero-filling a growth); durable when it returns.
    fn set_len(&self, rel: &Path, len: u64) -> io::Result<()>;
    fn set_perm(&self, rel: &Path, perm: u32) -> io::Result<()>;
    fn set_times(&self, rel: &Path, atime: Option<TimeNs>, mtime: Option<TimeNs>)
        -> io::Result<()>;
    /// Map the file whole: at least `len_min` bytes (possibly past the end, so that growth
    /// rarely needs a remap); the mapping's `len()` says how much.
    fn map(&self, rel: &Path, len_min: u64) -> io::Result<Self::Map>;
    /// Error of the last failed write-back of a mapping (msync), if any.
    fn check_map(&self, map: &Self::Map) -> io::Result<()>;
    /// Every file, as (id, path), to find the files named by per-file metadata at recovery.
    fn walk(&self) -> io::Result<Vec<(u64, PathBuf)>>;
    /// Space of the host file system.
    fn space(&self) -> io::Result<hostfs::StatFs>;
    /// A symbolic link holding `target` (never resolved); durable with its entry.
    fn symlink(&self, rel: &Path, target: &[u8]) -> io::Result<MediaStat>;
    fn readlink(&self, rel: &Path) -> io::Result<Vec<u8>>;
    /// A special file (`kind` one of `FileKind::is_special`); durable with its entry.
    fn mknod(&self, rel: &Path, kind: FileKind, perm: u32, rdev: u64) -> io::Result<MediaStat>;
    /// A second name for a non-directory; durable when it returns.
    fn link(&self, existing: &Path, new: &Path) -> io::Result<()>;
    /// renameat2(RENAME_EXCHANGE): swap two names, all or nothing; durable when it returns.
    fn exchange(&self, a: &Path, b: &Path) -> io::Result<()>;
    /// lchown; durable when it returns.
    fn set_owner(&self, rel: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()>;
    /// Value of an extended attribute (ENODATA when absent).
    fn get_xattr(&self, rel: &Path, name: &[u8]) -> io::Result<Vec<u8>>;
    /// Set (`Some`) or remove (`None`) an extended attribute; durable when it returns.
    fn set_xattr(
        &self,
        rel: &Path,
        name: &[u8],
        value: Option<&[u8]>,
        how: hostfs::XattrHow,
    ) -> io::Result<()>;
    fn list_xattr(&self, rel: &Path) -> io::Result<Vec<Vec<u8>>>;
    /// fallocate of the file at `rel` (content-neutral allocations and punches of ranges the
    /// engine has already made zero at home).
    fn fallocate(
        &self,
        rel: &Path,
        how: hostfs::FallocateHow,
        off: u64,
        len: u64,
    ) -> io::Result<()>;
    /// Write a small file that must not exist yet, durable with its entry when it returns.
    fn write_new(&self, rel: &Path, data: &[u8]) -> io::Result<()>;
    /// The whole content of a small file.
    fn read_all(&self, rel: &Path) -> io::Result<Vec<u8>>;
    /// The store id written in the directory at format time.
    fn marker(&self) -> io::Result<Option<u64>>;
    fn set_marker(&self, store_id: u64) -> io::Result<()>;
}

pub fn rel_path(components: &[Vec<u8>]) -> PathBuf {
    let mut p = PathBuf::new();
    for c in components {
        p.push(OsStr::from_bytes(c));
    }
    p
}
