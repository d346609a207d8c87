//! [`HomeFiles`]: the [`Backing`] of a real store — the home files through `hostfs` (the
//! jailed home directory, or the crash model in tests), by inode number. The store registers
//! each file's open handle when it first caches it; a file unlinked while cached keeps its
//! handle until the cache forgets it.

use crate::backing::{Backing, HomeStamp};
use crate::format::CHUNK_SIZE;
use hostfs::{Capability, HostFs, HostFsError, OpenOptions};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use store::{Error, Result};

/// Home files by inode number: each file's path (kept current by the store across renames),
/// and a bounded set of open descriptors (`open_max`), reopened by path when needed. A file
/// unlinked while the cache still holds it keeps its descriptor (pinned) until forgotten.
pub struct HomeFiles<H: HostFs> {
    fs: Arc<H>,
    state: Mutex<Descriptors<H>>,
    io: Mutex<FlushIo>,
    direct_writes: AtomicU64,
}

/// How whole chunks are written home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushIo {
    /// O_DIRECT (pwritev2 RWF_ATOMIC of one aligned 4 KiB block from an aligned buffer:
    /// past the page cache, never torn), then fdatasync. The file's partial last block goes
    /// through the page cache.
    Direct,
    /// Through the page cache, then fdatasync.
    Buffered(BufferedReason),
}

/// Why chunks go home through the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferedReason {
    /// The home file system takes no O_DIRECT (tmpfs, for one).
    NoDirectIo,
    /// It takes O_DIRECT but no untorn direct 4 KiB write (RWF_ATOMIC), the direct write the
    /// host layer offers.
    NoUntornDirectWrite,
    /// A direct write failed; every later write goes through the page cache.
    DirectWriteFailed,
}

impl FlushIo {
    /// The mode the file system of `fs` allows.
    fn probe<H: HostFs>(fs: &H) -> FlushIo {
        let caps = fs.capabilities();
        if !caps.has(Capability::DirectIo) {
            FlushIo::Buffered(BufferedReason::NoDirectIo)
        } else if !caps.has(Capability::AtomicWrite {
            len: CHUNK_SIZE as u32,
        }) {
            FlushIo::Buffered(BufferedReason::NoUntornDirectWrite)
        } else {
            FlushIo::Direct
        }
    }

    /// The code `stats` shows as `flush_buffered_reason` (0: direct).
    pub fn reason_code(self) -> u64 {
        match self {
            FlushIo::Direct => 0,
            FlushIo::Buffered(BufferedReason::NoDirectIo) => 1,
            FlushIo::Buffered(BufferedReason::NoUntornDirectWrite) => 2,
            FlushIo::Buffered(BufferedReason::DirectWriteFailed) => 3,
        }
    }

    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            FlushIo::Direct => "O_DIRECT (untorn 4 KiB writes) + fdatasync",
            FlushIo::Buffered(BufferedReason::NoDirectIo) => {
                "buffered + fdatasync: the home file system takes no O_DIRECT"
            }
            FlushIo::Buffered(BufferedReason::NoUntornDirectWrite) => {
                "buffered + fdatasync: the home file system has no untorn O_DIRECT 4 KiB write (RWF_ATOMIC)"
            }
            FlushIo::Buffered(BufferedReason::DirectWriteFailed) => {
                "buffered + fdatasync: a direct write failed"
            }
        }
    }
}

struct Descriptors<H: HostFs> {
    paths: HashMap<u64, PathBuf>,
    open: HashMap<u64, Arc<H::File>>,
    pinned: HashSet<u64>,
    open_max: usize,
}

/// Descriptors kept open at most (besides pinned ones).
pub const OPEN_MAX: usize = 1024;

/// A hostfs error as a Store error (the errno kept).
pub fn host_err(e: HostFsError) -> Error {
    let what = e.to_string();
    match e.errno() {
        libc::ENOENT => Error::NotFound(what),
        libc::EEXIST => Error::Exists(what),
        libc::ENOTDIR => Error::NotDir(what),
        libc::EISDIR => Error::IsDir(what),
        libc::ENOTEMPTY => Error::NotEmpty(what),
        libc::ENOSPC => Error::NoSpace(what),
        libc::EFBIG => Error::FileTooLarge(what),
        errno => Error::Io {
            path: what,
            op: "home",
            source: std::io::Error::from_raw_os_error(errno),
        },
    }
}

impl<H: HostFs> HomeFiles<H> {
    pub fn new(fs: Arc<H>) -> Self {
        Self::with_open_max(fs, OPEN_MAX)
    }
    /// Home files keeping at most `open_max` descriptors open (besides pinned ones).
    pub fn with_open_max(fs: Arc<H>, open_max: usize) -> Self {
        let io = FlushIo::probe(&*fs);
        HomeFiles {
            fs,
            io: Mutex::new(io),
            direct_writes: AtomicU64::new(0),
            state: Mutex::new(Descriptors {
                paths: HashMap::new(),
                open: HashMap::new(),
                pinned: HashSet::new(),
                open_max: open_max.max(1),
            }),
        }
    }
    /// The home-descriptor limit: (descriptors open now, the maximum besides pinned ones).
    pub fn descriptors(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.open.len() as u64, st.open_max as u64)
    }
    pub fn fs(&self) -> &Arc<H> {
        &self.fs
    }
    /// The home file `id` lives at `path` (and is open as `file`, when given).
    pub fn register(&self, id: u64, path: &Path, file: Option<H::File>) {
        let mut st = self.state.lock();
        st.paths.insert(id, path.to_path_buf());
        if let Some(file) = file {
            st.open.insert(id, Arc::new(file));
            Self::trim(&mut st, id);
        }
    }
    pub fn is_registered(&self, id: u64) -> bool {
        self.state.lock().paths.contains_key(&id)
    }
    /// A name moved: every registered path at or under `from` is now under `to`.
    pub fn moved(&self, from: &Path, to: &Path) {
        let mut st = self.state.lock();
        for path in st.paths.values_mut() {
            if let Ok(rest) = path.strip_prefix(from) {
                *path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }
    /// Two names were exchanged: every registered path at or under `a` is now under `b`,
    /// and the other way round.
    pub fn exchanged(&self, a: &Path, b: &Path) {
        let mut st = self.state.lock();
        for path in st.paths.values_mut() {
            let moved = [(a, b), (b, a)].into_iter().find_map(|(from, to)| {
                let rest = path.strip_prefix(from).ok()?;
                Some(if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                })
            });
            if let Some(p) = moved {
                *path = p;
            }
        }
    }
    /// The file lost the name it was registered by: `path` is another of its names, or
    /// `None` (unlinked while the cache holds it: its descriptor is kept).
    pub fn renamed_or_unlinked(&self, id: u64, path: Option<&Path>) -> Result<()> {
        match path {
            Some(p) => {
                self.state.lock().paths.insert(id, p.to_path_buf());
                Ok(())
            }
            None => {
                let file = self.file(id)?;
                let mut st = self.state.lock();
                st.open.insert(id, file);
                st.pinned.insert(id);
                st.paths.remove(&id);
                Ok(())
            }
        }
    }
    /// Forget every path and descriptor (before the home tree is walked again at open:
    /// recovery may have moved names back).
    pub fn reset(&self) {
        let mut st = self.state.lock();
        st.paths.clear();
        st.open.clear();
        st.pinned.clear();
    }
    /// How whole chunks are written home now.
    pub fn flush_io(&self) -> FlushIo {
        *self.io.lock()
    }
    /// Chunks written home with O_DIRECT so far.
    pub fn direct_writes(&self) -> u64 {
        self.direct_writes.load(Ordering::Relaxed)
    }
    /// The path the file `id` is reached by, when it has one.
    pub fn path_of(&self, id: u64) -> Option<PathBuf> {
        self.state.lock().paths.get(&id).cloned()
    }
    pub fn forget(&self, id: u64) {
        let mut st = self.state.lock();
        st.paths.remove(&id);
        st.open.remove(&id);
        st.pinned.remove(&id);
    }

    /// Close descriptors beyond the bound (never `keep`, never a pinned one).
    fn trim(st: &mut Descriptors<H>, keep: u64) {
        while st.open.len() > st.open_max + st.pinned.len() {
            let victim = st
                .open
                .keys()
                .copied()
                .find(|id| *id != keep && !st.pinned.contains(id));
            match victim {
                Some(id) => {
                    st.open.remove(&id);
                }
                None => break,
            }
        }
    }

    fn file(&self, id: u64) -> Result<Arc<H::File>> {
        let path = {
            let st = self.state.lock();
            if let Some(f) = st.open.get(&id) {
                return Ok(f.clone());
            }
            st.paths
                .get(&id)
                .cloned()
                .ok_or_else(|| Error::NotFound(format!("home file with inode {id} is not known")))?
        };
        let file = Arc::new(
            self.fs
                .open(&path, &OpenOptions::read_write())
                .map_err(host_err)?,
        );
        let mut st = self.state.lock();
        st.open.insert(id, file.clone());
        Self::trim(&mut st, id);
        Ok(file)
    }
}

impl<H: HostFs> Backing for HomeFiles<H> {
    fn read(&self, id: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let f = self.file(id)?;
        self.fs.read_full_at(&f, off, buf).map_err(host_err)
    }
    fn write(&self, id: u64, off: u64, data: &[u8]) -> Result<()> {
        let f = self.file(id)?;
        let whole = data.len() as u64 == CHUNK_SIZE && off.is_multiple_of(CHUNK_SIZE);
        if whole && *self.io.lock() == FlushIo::Direct {
            match self.fs.atomic_write(&f, off, data) {
                Ok(()) => {
                    self.direct_writes.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(_) => {
                    // Through the page cache from now on (the reason is in `stats`).
                    *self.io.lock() = FlushIo::Buffered(BufferedReason::DirectWriteFailed);
                }
            }
        }
        self.fs.write_all_at(&f, off, data).map_err(host_err)
    }
    fn set_len(&self, id: u64, len: u64) -> Result<()> {
        let f = self.file(id)?;
        self.fs.set_len(&f, len).map_err(host_err)
    }
    fn len(&self, id: u64) -> Result<u64> {
        let f = self.file(id)?;
        self.fs.file_stat(&f).map(|s| s.len).map_err(host_err)
    }
    fn sync(&self, id: u64) -> Result<()> {
        let f = self.file(id)?;
        // persist: the home file's data and length are durable (fdatasync).
        self.fs.sync_data(&f).map_err(host_err)
    }
    fn space(&self, id: u64, punch: bool, off: u64, len: u64) -> Result<()> {
        let f = self.file(id)?;
        let how = if punch {
            hostfs::FallocateHow::PunchHole
        } else {
            hostfs::FallocateHow::Allocate { keep_size: false }
        };
        match self.fs.fallocate(&f, how, off, len) {
            // The home file system keeps no such storage: nothing to do.
            Err(e) if e.errno() == libc::EOPNOTSUPP => return Ok(()),
            r => r.map_err(host_err)?,
        }
        // persist: the home file's storage change is durable (fdatasync).
        self.fs.sync_data(&f).map_err(host_err)
    }
    fn path_hint(&self, id: u64) -> Option<PathBuf> {
        self.path_of(id)
    }
    fn stamp(&self, id: u64) -> Result<HomeStamp> {
        let f = self.file(id)?;
        let st = self.fs.file_stat(&f).map_err(host_err)?;
        if st.nlink == 0 && !self.state.lock().pinned.contains(&id) {
            // Unlinked by someone else while the cache held its descriptor.
            return Err(Error::NotFound(format!(
                "home file with inode {id} was deleted"
            )));
        }
        Ok(HomeStamp {
            len: st.len,
            mtime_ns: st.mtime_ns,
        })
    }
}

impl<H: HostFs> HomeFiles<H> {
    /// Attributes of the open home file `id` (works for an unlinked, still open file).
    pub fn stat(&self, id: u64) -> Result<hostfs::Stat> {
        let f = self.file(id)?;
        self.fs.file_stat(&f).map_err(host_err)
    }
}
