//! [`HomeFiles`]: the [`Backing`] of a real store — the home files through `hostfs` (the
//! jailed home directory, or the crash model in tests), by inode number. The store registers
//! each file's open handle when it first caches it; a file unlinked while cached keeps its
//! handle until the cache forgets it.

use crate::backing::Backing;
use hostfs::{HostFs, HostFsError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use store::{Error, Result};

/// Open home files by inode number.
pub struct HomeFiles<H: HostFs> {
    fs: Arc<H>,
    open: Mutex<HashMap<u64, Arc<H::File>>>,
}

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
        HomeFiles {
            fs,
            open: Mutex::new(HashMap::new()),
        }
    }
    pub fn fs(&self) -> &Arc<H> {
        &self.fs
    }
    /// Remember the open home file of inode `id`.
    pub fn register(&self, id: u64, file: H::File) {
        self.open.lock().insert(id, Arc::new(file));
    }
    pub fn is_registered(&self, id: u64) -> bool {
        self.open.lock().contains_key(&id)
    }
    pub fn forget(&self, id: u64) {
        self.open.lock().remove(&id);
    }
    fn file(&self, id: u64) -> Result<Arc<H::File>> {
        self.open
            .lock()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("home file with inode {id} is not open")))
    }
}

impl<H: HostFs> Backing for HomeFiles<H> {
    fn read(&self, id: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let f = self.file(id)?;
        self.fs.read_full_at(&f, off, buf).map_err(host_err)
    }
    fn write(&self, id: u64, off: u64, data: &[u8]) -> Result<()> {
        let f = self.file(id)?;
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
}

impl<H: HostFs> HomeFiles<H> {
    /// Attributes of the open home file `id` (works for an unlinked, still open file).
    pub fn stat(&self, id: u64) -> Result<hostfs::Stat> {
        let f = self.file(id)?;
        self.fs.file_stat(&f).map_err(host_err)
    }
}
