//! Directories: blocks of fixed-size entries (media/layout.rs) reached through the directory
//! inode's block-pointer tree, and a volatile hash index per directory built on first use.
//!
//! Entry changes are undo-logged metadata: a new entry's name is written into a free slot
//! without logging (a slot with ino 0 is free whatever its other bytes hold), then its 8-byte
//! ino field is set under the undo log. Removing an entry undo-logs and clears the ino field;
//! the slot is not reused before that transaction commits. Growing a directory by a block is
//! its own small transaction, committed at once, so that an abort of the transaction that
//! needed the room never takes away a block other transactions have put entries in.

use crate::core::{Core, InodeState};
use crate::data::write::InodeDelta;
use crate::log::transaction::Tx;
use crate::media::layout::*;
use pmem::Region;
use std::collections::HashMap;
use store::{Error, FileKind, Result};

/// Where a name lives and what it names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) slot: u64,
    pub(crate) ino: u64,
    pub(crate) kind: u8,
}

/// Volatile index of one directory.
#[derive(Default)]
pub(crate) struct DirIndex {
    pub(crate) names: HashMap<Box<[u8]>, Slot>,
    pub(crate) free: Vec<u64>,
    pub(crate) subdirs: u32,
}

/// The kind an inode or entry kind byte names (checked by `Core::kind_known` where it was
/// read).
pub(crate) fn kind_of(kind: u8) -> FileKind {
    FileKind::from_code(kind).unwrap_or(FileKind::File)
}

impl<R: Region> Core<R> {
    /// Region address of directory slot `slot` of `dir`.
    pub(crate) fn slot_addr(&self, dir: u64, slot: u64) -> Result<u64> {
        let lbn = slot / DIRENTS_PER_BLOCK;
        let (pbn, _) = self.permanent_block(dir, lbn)?;
        if pbn == 0 {
            return Err(Error::corrupt(
                format!("directory {dir} has a hole at block {lbn}"),
                self.geo.inode(dir),
            ));
        }
        Ok(self.geo.block(pbn) + (slot % DIRENTS_PER_BLOCK) * DIRENT_SIZE)
    }

    /// Build the index of a directory from media (validating every entry).
    pub(crate) fn build_dir_index(&self, st: &InodeState) -> Result<DirIndex> {
        let dir = st.ino;
        let size = self.inode_size(dir)?;
        let mut index = DirIndex::default();
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        for lbn in 0..size / BLOCK_SIZE {
            let (pbn, _) = self.permanent_block(dir, lbn)?;
            if pbn == 0 {
                return Err(Error::corrupt(
                    format!("directory {dir} has a hole at block {lbn}"),
                    self.geo.inode(dir),
                ));
            }
            self.region.read(self.geo.block(pbn), &mut block);
            for i in 0..DIRENTS_PER_BLOCK {
                let slot = lbn * DIRENTS_PER_BLOCK + i;
                let at = (i * DIRENT_SIZE) as usize;
                let raw = &block[at..at + DIRENT_SIZE as usize];
                let ino = u64::from_le_bytes(raw[..8].try_into().unwrap_or([0; 8]));
                if ino == 0 {
                    if !st.dir_reserved.contains(&slot) {
                        index.free.push(slot);
                    }
                    continue;
                }
                let addr = self.geo.block(pbn) + at as u64;
                let (kind, len) = (raw[D_KIND as usize], raw[D_NAME_LEN as usize] as usize);
                if ino >= self.geo.inode_count || len == 0 || !self.kind_known(kind) {
                    return Err(Error::corrupt(
                        format!("directory {dir} entry {slot}"),
                        addr,
                    ));
                }
                let name: Box<[u8]> = raw[D_NAME as usize..D_NAME as usize + len].into();
                if kind == KIND_DIR {
                    index.subdirs += 1;
                }
                if index.names.insert(name, Slot { slot, ino, kind }).is_some() {
                    return Err(Error::corrupt(
                        format!("directory {dir} has a name twice"),
                        addr,
                    ));
                }
            }
        }
        index.free.reverse();
        Ok(index)
    }

    /// The index of a directory, built on first use.
    pub(crate) fn dir_index<'a>(&self, st: &'a mut InodeState) -> Result<&'a mut DirIndex> {
        if st.dir.is_none() {
            let index = self.build_dir_index(st)?;
            st.dir = Some(index);
        }
        st.dir.as_mut().ok_or(Error::Closed)
    }

    /// Add `name -> ino` to directory `st` inside `tx`.
    pub(crate) fn dir_add(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        name: &[u8],
        ino: u64,
        kind: u8,
    ) -> Result<()> {
        if self.dir_index(st)?.free.is_empty() {
            self.dir_grow(st)?;
        }
        let dir = st.ino;
        let index = self.dir_index(st)?;
        let slot = index
            .free
            .pop()
            .ok_or_else(|| Error::NoSpace("directory slot".into()))?;
        let addr = match self.slot_addr(dir, slot) {
            Ok(a) => a,
            Err(e) => {
                index.free.push(slot);
                return Err(e);
            }
        };
        let mut head = [0u8; (D_NAME as usize) + 255];
        head[D_KIND as usize] = kind;
        head[D_NAME_LEN as usize] = name.len() as u8;
        head[D_NAME as usize..D_NAME as usize + name.len()].copy_from_slice(name);
        // The slot is free (ino 0): its name bytes need no undo entry.
        self.region.write(
            addr + D_KIND,
            &head[D_KIND as usize..D_NAME as usize + name.len()],
        );
        self.region
            .flush(addr + D_KIND, D_NAME - D_KIND + name.len() as u64);
        if let Err(e) = self.meta_u64(tx, addr + D_INO, ino) {
            index.free.push(slot);
            return Err(e);
        }
        if kind == KIND_DIR {
            index.subdirs += 1;
        }
        index.names.insert(name.into(), Slot { slot, ino, kind });
        self.touch(tx, dir);
        self.touch_dir_times(tx, dir)
    }

    /// Remove `name` from directory `st` inside `tx`; the slot stays reserved until commit.
    pub(crate) fn dir_remove(&self, st: &mut InodeState, tx: &mut Tx, name: &[u8]) -> Result<Slot> {
        let dir = st.ino;
        let found = *self
            .dir_index(st)?
            .names
            .get(name)
            .ok_or_else(|| Error::NotFound(String::from_utf8_lossy(name).into_owned()))?;
        let addr = self.slot_addr(dir, found.slot)?;
        self.meta_u64(tx, addr + D_INO, 0)?;
        st.dir_reserved.insert(found.slot);
        tx.deferred_slots.push((dir, found.slot));
        let index = self.dir_index(st)?;
        index.names.remove(name);
        if found.kind == KIND_DIR {
            index.subdirs = index.subdirs.saturating_sub(1);
        }
        self.touch(tx, dir);
        self.touch_dir_times(tx, dir)?;
        Ok(found)
    }

    /// Update a directory's mtime and ctime (only those bytes: its size and block count
    /// change only in the growth transactions).
    pub(crate) fn touch_dir_times(&self, tx: &mut Tx, dir: u64) -> Result<()> {
        let now = self.now().to_le_bytes();
        let mut times = [0u8; 16];
        times[..8].copy_from_slice(&now);
        times[8..].copy_from_slice(&now);
        self.meta_update(tx, &[(self.geo.inode(dir) + I_MTIME, &times)])
    }

    /// Blocks of the directories among `inos` (inodes a transaction created, read before its
    /// abort frees them): their growth committed on its own (`dir_grow`), so the abort's
    /// undo does not free them; the caller does, once the inodes are free on the media. A
    /// tree that does not walk keeps its blocks (leaked until reopen, never freed twice).
    pub(crate) fn grown_dir_blocks(&self, inos: &[u64]) -> Vec<u64> {
        let mut blocks = Vec::new();
        for &ino in inos {
            if self.read_u8(self.geo.inode(ino) + I_KIND) != KIND_DIR {
                continue;
            }
            let mut tree = Vec::new();
            let walked = self.walk_tree(ino, &mut |pbn, _, _| {
                tree.push(pbn);
                Ok(())
            });
            if walked.is_ok() {
                blocks.extend(tree);
            }
        }
        blocks
    }

    /// Add one zeroed block of free slots to a directory, in its own committed transaction.
    fn dir_grow(&self, st: &mut InodeState) -> Result<()> {
        let dir = st.ino;
        let ioff = self.geo.inode(dir);
        let size = self.inode_size(dir)?;
        let lbn = size / BLOCK_SIZE;
        let mut tx = self.tx_new()?;
        let result = (|| {
            let mut delta = InodeDelta {
                size: size + BLOCK_SIZE,
                blocks: self.inode_blocks(dir)?,
                pointer_writes: Vec::new(),
                time: self.now(),
            };
            let ptr = self.pointer_addr_create(&mut tx, dir, lbn, &mut delta)?;
            let pbn = self.new_zero_block(&mut tx)?;
            delta.blocks += 1;
            let mut attrs = [0u8; 8];
            attrs.copy_from_slice(&delta.size.to_le_bytes());
            self.meta_update(
                &mut tx,
                &[
                    (ptr, &pbn.to_le_bytes()),
                    (ioff + I_SIZE, &attrs),
                    (ioff + I_BLOCKS, &delta.blocks.to_le_bytes()),
                ],
            )
        })();
        match result {
            Ok(()) => {
                self.commit_persist(&mut tx)?;
                // An index built before the growth gets the new slots; one built later reads them.
                if let Some(index) = st.dir.as_mut() {
                    index
                        .free
                        .extend((lbn * DIRENTS_PER_BLOCK..(lbn + 1) * DIRENTS_PER_BLOCK).rev());
                }
                Ok(())
            }
            Err(e) => {
                self.abort_persist(&mut tx)?;
                Err(e)
            }
        }
    }
}
