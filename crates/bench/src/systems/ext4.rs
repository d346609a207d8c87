//! The ext4 baselines (on the RAM disk): plain `pwrite` + `fdatasync` (`ext4-fsync`, no
//! consistency) and write-temp + fsync + rename (`ext4-rename`, per-file atomic only). The
//! undo-journal protocol is in `undo.rs`. All use `fdatasync` for file data (the cheapest call
//! that gives the protocol its durability; sizes never change in place) and `fsync` on the
//! directory after renames.

use super::fileset::{sync_dir, DeviceCounter, FileSet};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::system::TwoFileUpdate;
use crate::workload::Write;
use std::os::unix::fs::FileExt;
use std::rc::Rc;

fn not_set_up() -> BenchError {
    BenchError::Invalid("ext4 system used before setup".into())
}

/// `ext4-fsync`: pwrite both ranges, fdatasync both files. Durable, not atomic: a crash
/// between the two writes (or inside one) leaves a torn update. The no-consistency reference.
pub struct Ext4Fsync {
    disk: Rc<Ext4Disk>,
    set: Option<FileSet>,
    counter: DeviceCounter,
}

impl Ext4Fsync {
    pub fn new(disk: Rc<Ext4Disk>) -> Self {
        Ext4Fsync {
            disk,
            set: None,
            counter: DeviceCounter::default(),
        }
    }
}

impl TwoFileUpdate for Ext4Fsync {
    fn name(&self) -> String {
        "ext4-fsync".into()
    }
    fn guarantee(&self) -> &'static str {
        "none (durable, not atomic)"
    }
    fn medium(&self) -> String {
        self.disk.label()
    }
    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        self.set = Some(FileSet::create(
            self.disk.clone(),
            "fsync",
            files,
            file_size,
        )?);
        Ok(())
    }
    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let set = self.set.as_ref().ok_or_else(not_set_up)?;
        set.pwrite(a.file, a.off, a.data)?;
        set.pwrite(b.file, b.off, b.data)?;
        // persist: each file's new bytes are durable after its fdatasync; nothing orders or
        // ties the two files together.
        set.fdatasync(a.file)?;
        set.fdatasync(b.file)
    }
    fn bytes_written(&self) -> Option<u64> {
        self.counter.total()
    }
    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.set
            .as_ref()
            .ok_or_else(not_set_up)?
            .pread(file, off, buf)
    }
    fn run_start(&mut self) {
        self.counter.start(&self.disk);
    }
    fn run_end(&mut self) {
        self.counter.end(&self.disk);
    }
}

/// `ext4-rename`: the write-temp + fsync + rename dance, done for two files the way a
/// careful user would: write both complete new versions to temp files, fdatasync both,
/// rename both over the originals, fsync the directory. Each file is replaced atomically,
/// but the PAIR IS NOT ATOMIC: a crash between the two renames (or before the directory
/// fsync makes both durable) can leave the first file new and the second old.
pub struct Ext4Rename {
    disk: Rc<Ext4Disk>,
    set: Option<FileSet>,
    counter: DeviceCounter,
    buf_a: Vec<u8>,
    buf_b: Vec<u8>,
}

impl Ext4Rename {
    pub fn new(disk: Rc<Ext4Disk>) -> Self {
        Ext4Rename {
            disk,
            set: None,
            counter: DeviceCounter::default(),
            buf_a: Vec::new(),
            buf_b: Vec::new(),
        }
    }
}

/// Read the whole current file, patch `w` into it, write it to `tmp`, fdatasync `tmp`.
fn write_temp(set: &FileSet, w: &Write<'_>, buf: &mut Vec<u8>) -> Result<std::path::PathBuf> {
    set.check(w.file, w.off, w.data.len() as u64)?;
    buf.resize(set.file_size as usize, 0);
    set.pread(w.file, 0, buf)?;
    let start = w.off as usize;
    buf[start..start + w.data.len()].copy_from_slice(w.data);
    let tmp = set
        .dir
        .join(format!("{}.tmp", super::fileset::file_name(w.file)));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| BenchError::io("create", &tmp, e))?;
    f.write_all_at(buf, 0)
        .map_err(|e| BenchError::io("write", &tmp, e))?;
    // persist: the temp file's data and size are durable before it may replace the original.
    f.sync_data()
        .map_err(|e| BenchError::io("fdatasync", &tmp, e))?;
    Ok(tmp)
}

impl TwoFileUpdate for Ext4Rename {
    fn name(&self) -> String {
        "ext4-rename".into()
    }
    fn guarantee(&self) -> &'static str {
        "per-file atomic (not across the two renames)"
    }
    fn medium(&self) -> String {
        self.disk.label()
    }
    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        self.set = Some(FileSet::create(
            self.disk.clone(),
            "rename",
            files,
            file_size,
        )?);
        Ok(())
    }
    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let set = self.set.as_mut().ok_or_else(not_set_up)?;
        let tmp_a = write_temp(set, &a, &mut self.buf_a)?;
        let tmp_b = write_temp(set, &b, &mut self.buf_b)?;
        for (tmp, file) in [(&tmp_a, a.file), (&tmp_b, b.file)] {
            let dst = set.path(file);
            std::fs::rename(tmp, &dst).map_err(|e| BenchError::io("rename", &dst, e))?;
        }
        // persist: both renames are durable after the directory fsync; until then a crash
        // may keep either, both or neither (this is why the pair is not atomic).
        sync_dir(&set.dir)?;
        set.reopen(a.file)?;
        set.reopen(b.file)
    }
    fn bytes_written(&self) -> Option<u64> {
        self.counter.total()
    }
    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.set
            .as_ref()
            .ok_or_else(not_set_up)?
            .pread(file, off, buf)
    }
    fn run_start(&mut self) {
        self.counter.start(&self.disk);
    }
    fn run_end(&mut self) {
        self.counter.end(&self.disk);
    }
}
