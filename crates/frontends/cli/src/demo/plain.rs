//! The demo's baseline for an engine that keeps its files on a host file system: the same
//! transactions on plain files, written in place and fsynced (durable at each commit, but not
//! atomic: a crash may leave a transaction's writes in one file and not the other).

use crate::workload::{fill_stamp, Workload};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The workload's files as plain files in a directory.
pub struct PlainFiles {
    files: Vec<File>,
}

fn path(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("file{i:04}"))
}

impl PlainFiles {
    /// Create `dir` (which must not exist; `created` is told once it does) and the files in
    /// it, each filled with the stamp of transaction 0 and fsynced, and the directory fsynced.
    pub fn create(dir: &Path, work: &Workload, created: &dyn Fn(&Path)) -> io::Result<Self> {
        std::fs::create_dir(dir)?;
        created(dir);
        let mut buf = vec![0u8; work.file_size as usize];
        let mut files = Vec::with_capacity(work.files as usize);
        for i in 0..work.files {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path(dir, i))?;
            fill_stamp(&mut buf, 0, 0, i);
            file.write_all_at(&buf, 0)?;
            // persist: the initial contents, before any transaction overwrites them.
            file.sync_all()?;
            files.push(file);
        }
        // persist: the new directory entries.
        File::open(dir)?.sync_all()?;
        Ok(PlainFiles { files })
    }

    /// Transaction `txn`: both writes in place, then an fdatasync of each file (what an
    /// application without a transaction protocol does); `buf` is scratch space.
    pub fn run_tx(&self, work: &Workload, txn: u64, buf: &mut Vec<u8>) -> io::Result<()> {
        let writes = work.writes(txn);
        for w in &writes {
            buf.resize(w.len as usize, 0);
            fill_stamp(buf, w.offset, txn, w.file);
            self.file(w.file)?.write_all_at(buf, w.offset)?;
        }
        for w in &writes {
            // persist: this file's write (the two files are not made durable together).
            self.file(w.file)?.sync_data()?;
        }
        Ok(())
    }

    fn file(&self, i: u32) -> io::Result<&File> {
        self.files
            .get(i as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no file {i}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Model;

    #[test]
    fn plain_files_hold_the_model_after_a_run() -> io::Result<()> {
        let dir = std::env::temp_dir().join(format!("atomfs-plain-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let work = Workload {
            files: 3,
            file_size: 16 << 10,
            seed: 5,
        };
        let plain = PlainFiles::create(&dir, &work, &|_| {})?;
        let mut buf = Vec::new();
        for txn in 1..=40 {
            plain.run_tx(&work, txn, &mut buf)?;
        }
        let mut model = Model::new(work);
        model.advance_to(40);
        for i in 0..work.files {
            assert_eq!(
                std::fs::read(path(&dir, i))?,
                model.files[i as usize],
                "file {i}"
            );
        }
        std::fs::remove_dir_all(&dir)
    }
}
