//! The one-file IO trait of the `mmio` suite (the Libnvmmio seed's FIO jobs, §4.2), and its
//! kernel baseline: `pread` / `pwrite` + `fdatasync` on a file in a directory of tmpfs
//! (`/dev/shm`) or of the ext4 RAM disk.
//!
//! Every system is an adapter over [`FileIo`] (CONVENTIONS.md §15): one file of a fixed
//! length, accessed in IO units at offsets the suite chooses, with a `sync` after every
//! n-th write. The mmio engine's adapter is `systems/mmio.rs`, the pool engine's
//! `systems/pool_file.rs`.

use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Bytes written per call while filling a file at setup (FIO's layout phase).
pub const FILL_CHUNK: usize = 1 << 20;

/// Byte every file is filled with at setup, so that reads return data and writes overwrite.
pub const FILL_BYTE: u8 = 0x5A;

/// One file accessed by offset, with an explicit durability point.
pub trait FileIo {
    /// Name in tables, JSON rows and plots ("pwrite-tmpfs", "mmio", "fcfs", ...).
    fn name(&self) -> String;

    /// What a crash can leave of the writes since the last `sync`.
    fn guarantee(&self) -> &'static str;

    /// Where the file lives and anything a reader of the results must know.
    fn medium(&self) -> String;

    /// Create the file of `len` bytes filled with [`FILL_BYTE`], durable, ready for IO.
    fn setup(&mut self, len: u64) -> Result<()>;

    /// Write `data` at `off` (durable at the next [`sync`](FileIo::sync)).
    fn write(&mut self, off: u64, data: &[u8]) -> Result<()>;

    /// Read `buf.len()` bytes at `off` (sees every write so far).
    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()>;

    /// fsync: every write so far is durable when it returns (and, for the atomfs engines,
    /// the writes since the previous sync became durable together, all or nothing).
    fn sync(&mut self) -> Result<()>;

    /// Finish the work the writes of a run left behind (the engines' logs are checkpointed
    /// home), so that the run is charged for all of it. Called at the end of every run,
    /// inside its timed part.
    fn drain(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Where a [`PwriteFile`] keeps its file.
pub enum PwriteMedium {
    /// A directory of tmpfs (`/dev/shm`): the page cache is the medium, fdatasync has
    /// nothing to write (the "not even durable" reference).
    Tmpfs,
    /// The ext4 RAM disk (a /dev/shm-backed loop device, or its fallback directory).
    Ext4(Rc<Ext4Disk>),
}

/// `pwrite-tmpfs` / `pwrite-ext4`: the kernel file IO path, `pread` / `pwrite` and
/// `fdatasync` at every sync. Durable after the sync, not atomic: a crash between two syncs
/// (or inside a write) can leave any mix of old and new bytes.
pub struct PwriteFile {
    medium: PwriteMedium,
    path: Option<PathBuf>,
    file: Option<File>,
}

impl PwriteFile {
    pub fn new(medium: PwriteMedium) -> Self {
        PwriteFile {
            medium,
            path: None,
            file: None,
        }
    }

    fn file(&self) -> Result<&File> {
        self.file
            .as_ref()
            .ok_or_else(|| BenchError::Invalid(format!("{}: no setup", self.name())))
    }

    fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new("?"))
    }
}

/// Release an engine's file handle and unmount the store (adapters' teardown; errors are
/// moot by then).
pub fn close_store(store: &dyn store::Store, fh: Option<store::Fh>) {
    if let Some(fh) = fh {
        let _ = store.release(fh);
    }
    let _ = store.unmount();
}

/// Fill `len` bytes of an engine's file with [`FILL_BYTE`] through a plain handle (each call
/// outside a transaction is durable when it returns).
pub fn fill_through(store: &dyn store::Store, fh: store::Fh, len: u64) -> store::Result<()> {
    let chunk = vec![FILL_BYTE; FILL_CHUNK.min(len as usize).max(1)];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(chunk.len() as u64) as usize;
        store.write(fh, off, &chunk[..n])?;
        off += n as u64;
    }
    Ok(())
}

/// Create `path` (truncated) and fill `len` bytes with [`FILL_BYTE`], then fsync it and its
/// directory.
pub fn create_filled(path: &Path, len: u64) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| BenchError::io("create", path, e))?;
    let chunk = vec![FILL_BYTE; FILL_CHUNK.min(len as usize).max(1)];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(chunk.len() as u64) as usize;
        f.write_all_at(&chunk[..n], off)
            .map_err(|e| BenchError::io("fill", path, e))?;
        off += n as u64;
    }
    // persist: the filled file is durable before the runs start.
    f.sync_all().map_err(|e| BenchError::io("fsync", path, e))?;
    if let Some(dir) = path.parent() {
        super::fileset::sync_dir(dir)?;
    }
    Ok(f)
}

impl FileIo for PwriteFile {
    fn name(&self) -> String {
        match self.medium {
            PwriteMedium::Tmpfs => "pwrite-tmpfs".into(),
            PwriteMedium::Ext4(_) => "pwrite-ext4".into(),
        }
    }

    fn guarantee(&self) -> &'static str {
        "none (durable after fdatasync, not atomic)"
    }

    fn medium(&self) -> String {
        match &self.medium {
            PwriteMedium::Tmpfs => format!(
                "pread/pwrite + fdatasync, file in {} (tmpfs)",
                crate::scratch_base().display()
            ),
            PwriteMedium::Ext4(disk) => {
                format!("pread/pwrite + fdatasync, file on {}", disk.label())
            }
        }
    }

    fn setup(&mut self, len: u64) -> Result<()> {
        let path = match &self.medium {
            PwriteMedium::Tmpfs => crate::scratch_path("fio-pwrite.dat"),
            PwriteMedium::Ext4(disk) => disk.root().join("fio-pwrite.dat"),
        };
        self.file = Some(create_filled(&path, len)?);
        self.path = Some(path);
        Ok(())
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        self.file()?
            .write_all_at(data, off)
            .map_err(|e| BenchError::io("pwrite", self.path(), e))
    }

    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.file()?
            .read_exact_at(buf, off)
            .map_err(|e| BenchError::io("pread", self.path(), e))
    }

    fn sync(&mut self) -> Result<()> {
        // persist: the file's written bytes are durable (nothing ties them together).
        self.file()?
            .sync_data()
            .map_err(|e| BenchError::io("fdatasync", self.path(), e))
    }
}

impl Drop for PwriteFile {
    fn drop(&mut self) {
        self.file = None;
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
