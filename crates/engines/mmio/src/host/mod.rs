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
    /// Space of the host file system: (block size, blocks total, blocks free).
    fn space(&self) -> io::Result<(u64, u64, u64)>;
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
