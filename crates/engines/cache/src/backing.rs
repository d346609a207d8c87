//! The home files behind the cache, as the cache sees them: by file identity.
//!
//! A store implements it over `hostfs` (the jailed home directory, or the crash model); the
//! tests use [`MemBacking`], which keeps a durable and a live image per file like the crash
//! model does.

use parking_lot::Mutex;
use std::collections::HashMap;
use store::{Error, Result};

/// Home files by identity (the `id` of their file record).
pub trait Backing: Send + Sync + 'static {
    /// Read at `off`; returns the bytes read (fewer at the end of the file).
    fn read(&self, id: u64, off: u64, buf: &mut [u8]) -> Result<usize>;
    /// Write at `off` (growing the file). Durable after [`sync`](Self::sync).
    fn write(&self, id: u64, off: u64, data: &[u8]) -> Result<()>;
    /// Change the length. Durable after [`sync`](Self::sync).
    fn set_len(&self, id: u64, len: u64) -> Result<()>;
    /// The current length.
    fn len(&self, id: u64) -> Result<u64>;
    /// fdatasync.
    fn sync(&self, id: u64) -> Result<()>;
    /// The file's length and modification time now ([`Error::NotFound`] when it is gone):
    /// what the cache records after its own home writes, to see changes made behind it.
    fn stamp(&self, id: u64) -> Result<HomeStamp>;
    /// Allocate (`punch` false: fallocate mode 0, the length growing to at most the end) or
    /// free (`punch` true: PUNCH_HOLE|KEEP_SIZE) the storage of `[off, off + len)`, never
    /// changing what reads return, durable when it returns (fdatasync). A home that cannot
    /// does nothing (the default).
    fn space(&self, _id: u64, _punch: bool, _off: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// The file's name, for messages (none by default).
    fn path_hint(&self, _id: u64) -> Option<std::path::PathBuf> {
        None
    }
}

/// What the cache remembers of a home file after writing it: its length and modification
/// time (ns). A home file whose stamp differs from the recorded one was changed by someone
/// else (its identity, the inode number, is the record's `id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HomeStamp {
    pub len: u64,
    pub mtime_ns: u64,
}

/// One in-memory home file.
#[derive(Clone, Debug, Default)]
struct MemFile {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Bumped by every change: the modification time of the model.
    version: u64,
}

/// In-memory home files with a durable image per file (unsynced writes are lost by
/// [`MemBacking::crash`]); `fail_writes` makes every write and sync fail with EIO.
#[derive(Debug, Default)]
pub struct MemBacking {
    files: Mutex<HashMap<u64, MemFile>>,
    removed: Mutex<std::collections::HashSet<u64>>,
    fail_writes: std::sync::atomic::AtomicBool,
}

fn eio(what: &str) -> Error {
    Error::Io {
        path: format!("mem home {what}"),
        op: "write",
        source: std::io::Error::from_raw_os_error(libc_eio()),
    }
}

const fn libc_eio() -> i32 {
    5
}

impl MemBacking {
    pub fn new() -> Self {
        Self::default()
    }
    /// A backing holding exactly the durable images of `self` (a crash of the home FS).
    pub fn crash(&self) -> MemBacking {
        let files = self
            .files
            .lock()
            .iter()
            .map(|(id, f)| {
                let durable = f.durable.clone();
                (
                    *id,
                    MemFile {
                        live: durable.clone(),
                        durable,
                        version: f.version,
                    },
                )
            })
            .collect();
        MemBacking {
            files: Mutex::new(files),
            removed: Mutex::new(self.removed.lock().clone()),
            fail_writes: Default::default(),
        }
    }
    /// Create (or replace: a change behind the cache's back) file `id` with durable
    /// contents `data`.
    pub fn put(&self, id: u64, data: &[u8]) {
        let mut files = self.files.lock();
        let version = files.get(&id).map_or(0, |f| f.version) + 1;
        files.insert(
            id,
            MemFile {
                live: data.to_vec(),
                durable: data.to_vec(),
                version,
            },
        );
        self.removed.lock().remove(&id);
    }
    /// Delete file `id` (behind the cache's back): it is gone until `put` again.
    pub fn remove(&self, id: u64) {
        self.files.lock().remove(&id);
        self.removed.lock().insert(id);
    }
    /// The live contents of `id`.
    pub fn contents(&self, id: u64) -> Option<Vec<u8>> {
        self.files.lock().get(&id).map(|f| f.live.clone())
    }
    /// Make writes and syncs fail (EIO) or succeed again.
    pub fn set_fail_writes(&self, fail: bool) {
        self.fail_writes
            .store(fail, std::sync::atomic::Ordering::SeqCst);
    }
    fn failing(&self) -> bool {
        self.fail_writes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Backing for MemBacking {
    fn read(&self, id: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let files = self.files.lock();
        // A file never written is an empty home file.
        let Some(f) = files.get(&id) else {
            return Ok(0);
        };
        let start = (off as usize).min(f.live.len());
        let n = (f.live.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&f.live[start..start + n]);
        Ok(n)
    }
    fn write(&self, id: u64, off: u64, data: &[u8]) -> Result<()> {
        if self.failing() {
            return Err(eio("write"));
        }
        let mut files = self.files.lock();
        let f = files.entry(id).or_default();
        let end = off as usize + data.len();
        if f.live.len() < end {
            f.live.resize(end, 0);
        }
        f.live[off as usize..end].copy_from_slice(data);
        f.version += 1;
        Ok(())
    }
    fn set_len(&self, id: u64, len: u64) -> Result<()> {
        if self.failing() {
            return Err(eio("set_len"));
        }
        let mut files = self.files.lock();
        let f = files.entry(id).or_default();
        f.live.resize(len as usize, 0);
        f.version += 1;
        Ok(())
    }
    fn len(&self, id: u64) -> Result<u64> {
        Ok(self
            .files
            .lock()
            .get(&id)
            .map_or(0, |f| f.live.len() as u64))
    }
    fn sync(&self, id: u64) -> Result<()> {
        if self.failing() {
            return Err(eio("sync"));
        }
        if let Some(f) = self.files.lock().get_mut(&id) {
            f.durable = f.live.clone();
        }
        Ok(())
    }
    fn stamp(&self, id: u64) -> Result<HomeStamp> {
        if self.removed.lock().contains(&id) {
            return Err(Error::NotFound(format!("mem home file {id}")));
        }
        // A file never written is an empty home file; times start at 1 (0 means unknown).
        Ok(self.files.lock().get(&id).map_or(
            HomeStamp {
                len: 0,
                mtime_ns: 1,
            },
            |f| HomeStamp {
                len: f.live.len() as u64,
                mtime_ns: f.version + 1,
            },
        ))
    }
}

/// Shared home files (the crash tests keep a handle to snapshot them).
impl<T: Backing> Backing for std::sync::Arc<T> {
    fn read(&self, id: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        (**self).read(id, off, buf)
    }
    fn write(&self, id: u64, off: u64, data: &[u8]) -> Result<()> {
        (**self).write(id, off, data)
    }
    fn set_len(&self, id: u64, len: u64) -> Result<()> {
        (**self).set_len(id, len)
    }
    fn len(&self, id: u64) -> Result<u64> {
        (**self).len(id)
    }
    fn sync(&self, id: u64) -> Result<()> {
        (**self).sync(id)
    }
    fn stamp(&self, id: u64) -> Result<HomeStamp> {
        (**self).stamp(id)
    }
    fn path_hint(&self, id: u64) -> Option<std::path::PathBuf> {
        (**self).path_hint(id)
    }
}
