//! The store's files in its home directory: the journal (`remap.journal`), the home files
//! (one per inode, `files/<ino>`), the snapshot (`remap.meta`), and block reads of them. Every byte the engine writes goes through [`hostfs::HostFs`].

use crate::atree::Block;
use crate::format::{BLOCK, BLOCK_USIZE};
use crate::host_err;
use hostfs::{HostFs, OpenOptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use store::{Ino, Result};

/// The journal file in the home directory.
pub const JOURNAL_NAME: &str = "remap.journal";
/// The snapshot (checkpoint mark) in the home directory.
pub const SNAPSHOT_NAME: &str = "remap.meta";
/// The directory of home files, one per inode, named by inode number.
pub const FILES_DIR_NAME: &str = "files";

/// Home files kept open at most (each holds a descriptor).
pub const HOME_FILES_OPEN_MAX: usize = 256;

/// Suffix of a staging file (`files/<ino>.stage`), removed by the checkpoint after the one
/// that retired its exchange record.
pub const STAGE_SUFFIX: &str = ".stage";

/// Paths of a store's files inside its home directory.
#[derive(Clone, Debug)]
pub struct Names {
    pub journal: PathBuf,
    pub snapshot: PathBuf,
    pub snapshot_tmp: PathBuf,
    pub files_dir: PathBuf,
}

impl Default for Names {
    fn default() -> Self {
        Self::new()
    }
}

impl Names {
    /// The fixed names inside a home directory.
    pub fn new() -> Names {
        Names {
            journal: PathBuf::from(JOURNAL_NAME),
            snapshot: PathBuf::from(SNAPSHOT_NAME),
            snapshot_tmp: PathBuf::from(format!("{SNAPSHOT_NAME}.tmp")),
            files_dir: PathBuf::from(FILES_DIR_NAME),
        }
    }
    pub fn home(&self, ino: Ino) -> PathBuf {
        self.files_dir.join(ino.to_string())
    }
    /// The staging file of an exchange commit of `ino`.
    pub fn stage(&self, ino: Ino) -> PathBuf {
        self.files_dir.join(format!("{ino}{STAGE_SUFFIX}"))
    }
}

/// The open files of a store.
pub struct Media<H: HostFs> {
    pub fs: H,
    pub names: Names,
    pub journal: H::File,
    homes: HashMap<Ino, Arc<H::File>>,
    /// A home file may have been created since the last `sync_dir` of the files directory.
    files_dir_dirty: bool,
}

impl<H: HostFs> Media<H> {
    pub fn new(fs: H, names: Names, journal: H::File) -> Self {
        Media {
            fs,
            names,
            journal,
            homes: HashMap::new(),
            files_dir_dirty: false,
        }
    }

    /// Give back the file system (closing every file).
    pub fn into_fs(self) -> H {
        self.fs
    }

    /// The home file of `ino`, opened once; `create`: create it when missing. `None` when it
    /// does not exist and `create` is false.
    pub fn home(&mut self, ino: Ino, create: bool) -> Result<Option<Arc<H::File>>> {
        if !self.homes.contains_key(&ino) {
            let path = self.names.home(ino);
            let opts = if create {
                OpenOptions::create()
            } else {
                OpenOptions::read_write()
            };
            if self.homes.len() >= HOME_FILES_OPEN_MAX {
                // Keep the descriptors bounded: a store of many files must not run into the
                // process's open-file limit (files are reopened by name when needed again).
                self.homes.clear();
            }
            match self.fs.open(&path, &opts) {
                Ok(f) => {
                    self.files_dir_dirty |= create;
                    self.homes.insert(ino, Arc::new(f));
                }
                Err(e) if e.is_not_found() && !create => return Ok(None),
                Err(e) => return Err(host_err(e)),
            }
        }
        Ok(self.homes.get(&ino).cloned())
    }

    /// Make the names of the home files created since the last call durable.
    pub fn sync_files_dir(&mut self) -> Result<()> {
        if self.files_dir_dirty {
            // persist: the home files' names are durable (their data was synced by the
            // checkpoint; without their names a crash would lose it).
            self.fs.sync_dir(&self.names.files_dir).map_err(host_err)?;
            self.files_dir_dirty = false;
        }
        Ok(())
    }

    /// Mark the files directory as changed (a staging file was created).
    pub fn files_dir_changed(&mut self) {
        self.files_dir_dirty = true;
    }

    /// Forget (close) the home file of an inode that is gone.
    pub fn forget_home(&mut self, ino: Ino) {
        self.homes.remove(&ino);
    }

    /// Journal block `jblock`.
    pub fn read_journal_block(&self, jblock: u64) -> Result<Box<Block>> {
        let mut b = Box::new([0u8; BLOCK_USIZE]);
        self.fs
            .read_full_at(&self.journal, jblock * BLOCK, &mut b[..])
            .map_err(host_err)?;
        Ok(b)
    }

    /// Home block `file_block` of `ino` (zeros where the home file has none).
    pub fn read_home_block(&mut self, ino: Ino, file_block: u64) -> Result<Box<Block>> {
        let mut b = Box::new([0u8; BLOCK_USIZE]);
        if let Some(f) = self.home(ino, false)? {
            self.fs
                .read_full_at(&f, file_block * BLOCK, &mut b[..])
                .map_err(host_err)?;
        }
        Ok(b)
    }
}
