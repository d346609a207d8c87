//! `ext4` in the `engines` suite: the reference every engine is compared with — plain files
//! on the ext4 RAM disk, made durable the way a careful program does without atomfs:
//! `pwrite` + `fdatasync` for data, `fsync` of the directory after create, rename and
//! unlink. Durable, not atomic: a two-file update can be torn, a write torn inside itself.

use super::engine_mix::NS_DATA_MAX;
use super::fileset::{sync_dir, FileSet};
use super::mix::{ns_name, MixShape, MixSystem, NsOp};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::workload::Write;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::rc::Rc;

/// Name of the reference system in tables and JSON.
pub const EXT4: &str = "ext4";

/// The files a set-up [`Ext4Mix`] works on.
struct Files {
    tx: FileSet,
    overwrite: File,
    append: File,
    ns_dir: PathBuf,
}

pub struct Ext4Mix {
    disk: Rc<Ext4Disk>,
    dir: PathBuf,
    files: Option<Files>,
    shape: Option<MixShape>,
    append_len: u64,
    ns_data: Vec<u8>,
}

fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> BenchError {
    BenchError::io(what, path, e)
}

/// Create (truncating) `path` for reading and writing, `len` zero bytes written, durable.
fn create_written(path: &std::path::Path, len: u64) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| io("create", path, e))?;
    let zeros = vec![0u8; len.min(1 << 20) as usize];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], off)
            .map_err(|e| io("write", path, e))?;
        off += n as u64;
    }
    f.sync_all().map_err(|e| io("fsync", path, e))?;
    Ok(f)
}

impl Ext4Mix {
    pub fn new(disk: Rc<Ext4Disk>) -> Self {
        let dir = disk.root().join("engines-ext4");
        let mut ns_data = vec![0u8; NS_DATA_MAX];
        let mut rng = crate::workload::Rng::new(0x4E53);
        ns_data.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        Ext4Mix {
            disk,
            dir,
            files: None,
            shape: None,
            append_len: 0,
            ns_data,
        }
    }

    fn files(&self) -> Result<&Files> {
        self.files
            .as_ref()
            .ok_or_else(|| BenchError::Invalid("ext4: no setup".into()))
    }

    fn create_file(&self, dir: &std::path::Path, name: u64, len: u64) -> Result<()> {
        let path = dir.join(ns_name(name));
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io("create", &path, e))?;
        let len = (len as usize).min(self.ns_data.len());
        f.write_all_at(&self.ns_data[..len], 0)
            .map_err(|e| io("write", &path, e))?;
        // persist: the data (and size) first, then the directory entry.
        f.sync_data().map_err(|e| io("fdatasync", &path, e))?;
        sync_dir(dir)
    }
}

impl MixSystem for Ext4Mix {
    fn name(&self) -> String {
        EXT4.into()
    }

    fn guarantee(&self) -> &'static str {
        "durable, not atomic (pwrite + fdatasync; fsync of the directory after namespace calls)"
    }

    fn medium(&self) -> String {
        format!("files in {} on {}", self.dir.display(), self.disk.label())
    }

    fn setup(&mut self, shape: MixShape) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io("mkdir", &self.dir, e))?;
        let tx = FileSet::create(
            self.disk.clone(),
            "engines-ext4/tx",
            shape.tx_files,
            shape.tx_file_len,
        )?;
        let overwrite = create_written(&self.dir.join("overwrite.dat"), shape.overwrite_len)?;
        let append = create_written(&self.dir.join("append.log"), 0)?;
        let ns_dir = self.dir.join("ns");
        std::fs::create_dir_all(&ns_dir).map_err(|e| io("mkdir", &ns_dir, e))?;
        // persist: the new files' and directories' entries.
        sync_dir(&self.dir)?;
        sync_dir(self.disk.root())?;
        self.files = Some(Files {
            tx,
            overwrite,
            append,
            ns_dir,
        });
        self.shape = Some(shape);
        Ok(())
    }

    fn two_file_tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let set = &self.files()?.tx;
        set.pwrite(a.file, a.off, a.data)?;
        set.pwrite(b.file, b.off, b.data)?;
        // persist: each file's bytes are durable after its fdatasync; nothing ties the two.
        set.fdatasync(a.file)?;
        set.fdatasync(b.file)
    }

    fn overwrite(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let f = &self.files()?.overwrite;
        let path = self.dir.join("overwrite.dat");
        f.write_all_at(data, off)
            .map_err(|e| io("pwrite", &path, e))?;
        f.sync_data().map_err(|e| io("fdatasync", &path, e))
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let max = self.shape.map_or(0, |s| s.append_len_max);
        let path = self.dir.join("append.log");
        let mut len = self.append_len;
        let f = &self.files()?.append;
        if len + data.len() as u64 > max {
            f.set_len(0).map_err(|e| io("truncate", &path, e))?;
            f.sync_all().map_err(|e| io("fsync", &path, e))?;
            len = 0;
        }
        f.write_all_at(data, len)
            .map_err(|e| io("pwrite", &path, e))?;
        // persist: fdatasync also writes the new size (needed to read the data back).
        f.sync_data().map_err(|e| io("fdatasync", &path, e))?;
        self.append_len = len + data.len() as u64;
        Ok(())
    }

    fn namespace(&mut self, op: NsOp) -> Result<()> {
        let dir = self.files()?.ns_dir.clone();
        match op {
            NsOp::Create { name, len } => self.create_file(&dir, name, len),
            NsOp::Rename { from, to } => {
                let (from, to) = (dir.join(ns_name(from)), dir.join(ns_name(to)));
                std::fs::rename(&from, &to).map_err(|e| io("rename", &from, e))?;
                // persist: the rename is durable after the directory's fsync.
                sync_dir(&dir)
            }
            NsOp::Unlink { name } => {
                let path = dir.join(ns_name(name));
                std::fs::remove_file(&path).map_err(|e| io("unlink", &path, e))?;
                // persist: the removal is durable after the directory's fsync.
                sync_dir(&dir)
            }
        }
    }

    fn namespace_clear(&mut self) -> Result<()> {
        let dir = self.files()?.ns_dir.clone();
        let entries = std::fs::read_dir(&dir).map_err(|e| io("read_dir", &dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| io("read_dir", &dir, e))?.path();
            std::fs::remove_file(&path).map_err(|e| io("unlink", &path, e))?;
        }
        sync_dir(&dir)
    }

    fn read_tx_file(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.files()?.tx.pread(file, off, buf)
    }
}

impl Drop for Ext4Mix {
    fn drop(&mut self) {
        self.files = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
