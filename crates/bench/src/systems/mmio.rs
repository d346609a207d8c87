//! `mmio`, `mmio-undo`, `mmio-redo`, `mmio-ext4`: the mmio engine (crates/engines/mmio, the
//! Libnvmmio seed) driven through the `Store` API exactly as an interposed application is:
//! the file is opened once with an O_ATOMIC handle (what `MmioStore::nvmmap` opens, and what
//! the C shim's interposed `open` gives a file of an mmio store), then `write` / `read` at
//! offsets and `fsync` at every sync. Writes since the last fsync become durable together at
//! the fsync (one 8-byte epoch store), or not at all.
//!
//! The host file lives in a directory of tmpfs (`/dev/shm`, whose page cache is the emulated
//! NVMM, as in the seed's DAX setup), or on the ext4 RAM disk (`mmio-ext4`: a non-DAX file
//! system, where home data reaches the file only through `msync`); the log pool is a file in
//! /dev/shm in both cases. The engine's default configuration (256 MB log pool, background
//! checkpoint every 100 µs) with the policy of the system's name.

use super::file_io::{FileIo, FILL_CHUNK};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use mmio::{HostMmioStore, MmioConfig, MmioStore, PolicyMode};
use std::path::PathBuf;
use std::rc::Rc;
use store::{Fh, OpenFlags, Store, ROOT_INO};

/// Where the mmio store keeps its host files.
pub enum MmioMedium {
    /// A directory in /dev/shm.
    Tmpfs,
    /// A directory on the ext4 RAM disk.
    Ext4(Rc<Ext4Disk>),
}

pub struct MmioSystem {
    mode: PolicyMode,
    medium: MmioMedium,
    dir: Option<PathBuf>,
    pool: PathBuf,
    store: Option<HostMmioStore>,
    fh: Option<Fh>,
}

/// The benchmark's name of a policy mode on a medium.
pub fn system_name(mode: PolicyMode, ext4: bool) -> &'static str {
    match (mode, ext4) {
        (_, true) => "mmio-ext4",
        (PolicyMode::Hybrid, false) => "mmio",
        (PolicyMode::Undo, false) => "mmio-undo",
        (PolicyMode::Redo, false) => "mmio-redo",
    }
}

impl MmioSystem {
    pub fn new(mode: PolicyMode, medium: MmioMedium) -> Self {
        MmioSystem {
            mode,
            medium,
            dir: None,
            pool: crate::scratch_path("fio-mmio.pool"),
            store: None,
            fh: None,
        }
    }

    fn err(&self, what: &str, e: store::Error) -> BenchError {
        BenchError::System {
            system: self.name(),
            message: format!("{what}: {e}"),
        }
    }

    fn parts(&self) -> Result<(&HostMmioStore, Fh)> {
        match (&self.store, self.fh) {
            (Some(s), Some(fh)) => Ok((s, fh)),
            _ => Err(BenchError::Invalid(format!("{}: no setup", self.name()))),
        }
    }

    /// Create the store and the file, fill it (appends go home without a log), and open the
    /// O_ATOMIC handle the runs use.
    fn build(&self, dir: &std::path::Path, len: u64) -> store::Result<(HostMmioStore, Fh)> {
        let cfg = MmioConfig {
            policy_mode: self.mode,
            // Touch the log pool's pages once, as the pool engine's bench touches its block
            // area: no run pays tmpfs first-touch faults (real NVMM has none).
            prefault_log_pool: true,
            ..MmioConfig::default()
        };
        let s = MmioStore::create(dir, &self.pool, &cfg)?;
        let meta = s.create(ROOT_INO, b"fio.dat", 0o644, None)?;
        let plain = OpenFlags {
            read: true,
            write: true,
            ..Default::default()
        };
        let fill = s.open(meta.ino, plain)?;
        super::file_io::fill_through(&s, fill, len)?;
        s.release(fill)?;
        let fh = s.open(
            meta.ino,
            OpenFlags {
                atomic: true,
                ..plain
            },
        )?;
        // Read the file once through the new mapping: its page-table entries exist before the
        // runs (the kernel baselines' page cache is warm too).
        let mut buf = vec![0u8; FILL_CHUNK.min(len as usize).max(1)];
        let mut off = 0;
        while off < len {
            off += s.read(fh, off, &mut buf)?.max(1) as u64;
        }
        Ok((s, fh))
    }
}

impl FileIo for MmioSystem {
    fn name(&self) -> String {
        system_name(self.mode, matches!(self.medium, MmioMedium::Ext4(_))).into()
    }

    fn guarantee(&self) -> &'static str {
        "atomic: the writes between two syncs, all or nothing"
    }

    fn medium(&self) -> String {
        let files = match &self.medium {
            MmioMedium::Tmpfs => format!(
                "host file in {} (tmpfs page cache as NVMM)",
                crate::scratch_base().display()
            ),
            MmioMedium::Ext4(disk) => format!("host file on {} (msync)", disk.label()),
        };
        format!(
            "atomfs mmio engine, policy {}, Store API with an O_ATOMIC handle; {files}; \
             log pool {} (256 MB, pages touched at setup), checkpoint thread every 100 µs",
            format!("{:?}", self.mode).to_lowercase(),
            self.pool.display()
        )
    }

    fn setup(&mut self, len: u64) -> Result<()> {
        let dir = match &self.medium {
            MmioMedium::Tmpfs => crate::scratch_path("fio-mmio.dir"),
            MmioMedium::Ext4(disk) => disk.root().join(format!("mmio-{:?}", self.mode)),
        };
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("mkdir", &dir, e))?;
        self.dir = Some(dir.clone());
        let (s, fh) = self.build(&dir, len).map_err(|e| self.err("setup", e))?;
        self.store = Some(s);
        self.fh = Some(fh);
        Ok(())
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let (s, fh) = self.parts()?;
        match s.write(fh, off, data) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => Err(BenchError::Invalid(format!(
                "{}: short write {n} of {}",
                self.name(),
                data.len()
            ))),
            Err(e) => Err(self.err("write", e)),
        }
    }

    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        let (s, fh) = self.parts()?;
        match s.read(fh, off, buf) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(n) => Err(BenchError::Invalid(format!(
                "{}: short read {n} of {} at {off}",
                self.name(),
                buf.len()
            ))),
            Err(e) => Err(self.err("read", e)),
        }
    }

    fn sync(&mut self) -> Result<()> {
        let (s, fh) = self.parts()?;
        s.fsync(fh, true).map_err(|e| self.err("fsync", e))
    }

    fn drain(&mut self) -> Result<()> {
        let (s, _) = self.parts()?;
        s.checkpoint_all()
            .map(|_| ())
            .map_err(|e| self.err("checkpoint", e))
    }
}

impl Drop for MmioSystem {
    fn drop(&mut self) {
        if let Some(s) = self.store.take() {
            super::file_io::close_store(&s, self.fh.take());
        }
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        let _ = std::fs::remove_file(&self.pool);
    }
}
