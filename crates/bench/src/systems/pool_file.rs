//! `fcfs` in the `mmio` suite: the pool engine (crates/engines/pool) in its FCFS mode with
//! one file, driven through the `Store` API like the mmio engine: the file is opened once
//! with an O_ATOMIC handle, then `write` / `read` at offsets and `fsync` at every sync (the
//! writes since the last fsync commit together, as one implicit transaction).
//!
//! The pool is a file in /dev/shm mapped with `pmem::MappedRegion` (the tmpfs page cache is
//! the emulated NVMM), sized and configured as in the pool engine's own suites
//! (`systems::pool::pool_bytes`, `bench_config`), its block area touched once at setup so
//! that no run pays tmpfs page faults.

use super::file_io::FileIo;
use super::pool::{bench_config, pool_bytes};
use crate::error::{BenchError, Result};
use pmem::MappedRegion;
use pool::{Mode, PoolStore};
use std::path::PathBuf;
use std::sync::Arc;
use store::{Fh, OpenFlags, Store, ROOT_INO};

pub struct PoolFile {
    path: PathBuf,
    store: Option<PoolStore<MappedRegion>>,
    fh: Option<Fh>,
}

impl Default for PoolFile {
    fn default() -> Self {
        Self::new()
    }
}

impl PoolFile {
    pub fn new() -> Self {
        PoolFile {
            path: crate::scratch_path("fio-fcfs.pool"),
            store: None,
            fh: None,
        }
    }

    fn err(what: &str, e: impl std::fmt::Display) -> BenchError {
        BenchError::System {
            system: "fcfs".into(),
            message: format!("{what}: {e}"),
        }
    }

    fn parts(&self) -> Result<(&PoolStore<MappedRegion>, Fh)> {
        match (&self.store, self.fh) {
            (Some(s), Some(fh)) => Ok((s, fh)),
            _ => Err(BenchError::Invalid("fcfs: no setup".into())),
        }
    }

    fn build(&self, len: u64) -> store::Result<(PoolStore<MappedRegion>, Fh)> {
        let region =
            MappedRegion::create(&self.path, pool_bytes(1, len)).map_err(|e| store::Error::Io {
                path: self.path.display().to_string(),
                op: "create pool",
                source: std::io::Error::other(e.to_string()),
            })?;
        let s = PoolStore::format(Arc::new(region), &bench_config(Mode::Fcfs, 1))?;
        // Every page faulted in once (not a write of the benchmark: before any run).
        pool::prefault(s.region(), &s.superblock().geometry);
        let meta = s.create(ROOT_INO, b"fio.dat", 0o644, None)?;
        let fh = s.open(
            meta.ino,
            OpenFlags {
                read: true,
                write: true,
                ..Default::default()
            },
        )?;
        super::file_io::fill_through(&s, fh, len)?;
        s.checkpoint_all()?;
        s.set_atomic(fh, true)?;
        Ok((s, fh))
    }
}

impl FileIo for PoolFile {
    fn name(&self) -> String {
        "fcfs".into()
    }

    fn guarantee(&self) -> &'static str {
        "atomic: the writes between two syncs, all or nothing"
    }

    fn medium(&self) -> String {
        format!(
            "atomfs pool engine, mode fcfs, Store API with an O_ATOMIC handle; pool {} \
             (tmpfs page cache as NVMM), default configuration",
            self.path.display()
        )
    }

    fn setup(&mut self, len: u64) -> Result<()> {
        let _ = std::fs::remove_file(&self.path);
        let (s, fh) = self.build(len).map_err(|e| Self::err("setup", e))?;
        self.store = Some(s);
        self.fh = Some(fh);
        Ok(())
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let (s, fh) = self.parts()?;
        let n = s.write(fh, off, data).map_err(|e| Self::err("write", e))?;
        if n != data.len() {
            return Err(Self::err("write", format!("short write {n}")));
        }
        Ok(())
    }

    fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        let (s, fh) = self.parts()?;
        let n = s.read(fh, off, buf).map_err(|e| Self::err("read", e))?;
        if n != buf.len() {
            return Err(Self::err("read", format!("short read {n} at {off}")));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let (s, fh) = self.parts()?;
        s.fsync(fh, true).map_err(|e| Self::err("fsync", e))
    }

    fn drain(&mut self) -> Result<()> {
        let (s, _) = self.parts()?;
        s.checkpoint_all().map_err(|e| Self::err("checkpoint", e))
    }
}

impl Drop for PoolFile {
    fn drop(&mut self) {
        if let Some(s) = self.store.take() {
            super::file_io::close_store(&s, self.fh.take());
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
