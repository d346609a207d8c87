//! N files of S bytes in one directory of the ext4 RAM disk, shared by the ext4 baselines.

use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Bytes each system counts on the ext4 device, measured per run (the runner brackets each
/// run with `run_start`/`run_end`), so deferred writeback lands on the system that caused it.
#[derive(Default)]
pub struct DeviceCounter {
    start: Option<u64>,
    total: u64,
    available: bool,
}

impl DeviceCounter {
    pub fn start(&mut self, disk: &Ext4Disk) {
        self.start = disk.device_bytes_written();
        self.available = self.start.is_some();
    }
    pub fn end(&mut self, disk: &Ext4Disk) {
        if let (Some(s), Some(e)) = (self.start.take(), disk.device_bytes_written()) {
            self.total += e.saturating_sub(s);
        }
    }
    pub fn total(&self) -> Option<u64> {
        self.available.then_some(self.total)
    }
}

pub struct FileSet {
    pub disk: Rc<Ext4Disk>,
    pub dir: PathBuf,
    pub files: Vec<File>,
    pub file_size: u64,
}

pub fn file_name(index: u32) -> String {
    format!("f{index:05}")
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| BenchError::io("open dir", dir, e))?;
    d.sync_all()
        .map_err(|e| BenchError::io("fsync dir", dir, e))
}

impl FileSet {
    /// Creates `dir_name` on the disk with `files` zero-filled files (written, not sparse, so
    /// that overwrites are overwrites), all durable.
    pub fn create(disk: Rc<Ext4Disk>, dir_name: &str, files: u32, file_size: u64) -> Result<Self> {
        let dir = disk.root().join(dir_name);
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("mkdir", &dir, e))?;
        let zeros = vec![0u8; file_size.min(1 << 20) as usize];
        let mut handles = Vec::with_capacity(files as usize);
        for i in 0..files {
            let path = dir.join(file_name(i));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|e| BenchError::io("create", &path, e))?;
            let mut off = 0;
            while off < file_size {
                let n = (file_size - off).min(zeros.len() as u64) as usize;
                f.write_all_at(&zeros[..n], off)
                    .map_err(|e| BenchError::io("write", &path, e))?;
                off += n as u64;
            }
            f.sync_all()
                .map_err(|e| BenchError::io("fsync", &path, e))?;
            handles.push(f);
        }
        // persist: the new directory entries are durable only after the directory's fsync.
        sync_dir(&dir)?;
        Ok(FileSet {
            disk,
            dir,
            files: handles,
            file_size,
        })
    }

    pub fn path(&self, index: u32) -> PathBuf {
        self.dir.join(file_name(index))
    }

    pub fn file(&self, index: u32) -> Result<&File> {
        self.files
            .get(index as usize)
            .ok_or_else(|| BenchError::Invalid(format!("file {index} out of range")))
    }

    pub fn check(&self, index: u32, off: u64, len: u64) -> Result<()> {
        if index as usize >= self.files.len()
            || off.checked_add(len).is_none_or(|e| e > self.file_size)
        {
            return Err(BenchError::Invalid(format!(
                "range {index}:{off}+{len} outside files"
            )));
        }
        Ok(())
    }

    pub fn pwrite(&self, index: u32, off: u64, data: &[u8]) -> Result<()> {
        self.check(index, off, data.len() as u64)?;
        self.file(index)?
            .write_all_at(data, off)
            .map_err(|e| BenchError::io("pwrite", self.path(index), e))
    }

    pub fn pread(&self, index: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.check(index, off, buf.len() as u64)?;
        self.file(index)?
            .read_exact_at(buf, off)
            .map_err(|e| BenchError::io("pread", self.path(index), e))
    }

    pub fn fdatasync(&self, index: u32) -> Result<()> {
        self.file(index)?
            .sync_data()
            .map_err(|e| BenchError::io("fdatasync", self.path(index), e))
    }

    /// Re-open file `index` by path (after a rename replaced it).
    pub fn reopen(&mut self, index: u32) -> Result<()> {
        let path = self.path(index);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| BenchError::io("open", &path, e))?;
        let slot = self
            .files
            .get_mut(index as usize)
            .ok_or_else(|| BenchError::Invalid(format!("file {index} out of range")))?;
        *slot = f;
        Ok(())
    }
}
