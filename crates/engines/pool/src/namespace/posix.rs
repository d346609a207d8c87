//! Symbolic links, special files, unnamed files (O_TMPFILE) and RENAME_EXCHANGE inside a
//! transaction, on pools of format 3 or 4 (docs/format.md "Inode"). Each is made of the same steps
//! as create, link and rename: fresh inode bytes written directly (unreachable until the
//! logged kind byte makes them live), every other change undo-logged.

use crate::core::Core;
use crate::data::write::InodeDelta;
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::namespace::dir::Slot;
use pmem::Region;
use store::{path::check_name, Error, FileKind, Result};

impl<R: Region> Core<R> {
    /// A symbolic link `name` in `parent` holding `target` (checked by the caller): inline
    /// in the inode when it fits, else in data block 0 of the link's tree.
    pub(crate) fn symlink_node(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        target: &[u8],
    ) -> Result<u64> {
        let len = target.len() as u64;
        assert!(len > 0 && len < BLOCK_SIZE, "a checked symlink target");
        let size = len.to_le_bytes();
        if len <= INLINE_TARGET_MAX {
            let fields: [(u64, &[u8]); 2] = [(I_SIZE, &size), (I_INLINE, target)];
            return self.create_node_with(tx, parent, name, KIND_SYMLINK, 0o777, &fields);
        }
        let ino = self.create_node_with(tx, parent, name, KIND_SYMLINK, 0o777, &[])?;
        self.store_long_target(tx, ino, target)?;
        Ok(ino)
    }

    /// Data block 0 of the fresh link `ino` holds `target`: a new block written whole, then
    /// its pointer, the size and the block count under the undo log.
    fn store_long_target(&self, tx: &mut Tx, ino: u64, target: &[u8]) -> Result<()> {
        let ioff = self.geo.inode(ino);
        let mut delta = InodeDelta {
            size: target.len() as u64,
            blocks: 0,
            pointer_writes: Vec::new(),
            time: self.now(),
        };
        let ptr = self.pointer_addr_create(tx, ino, 0, &mut delta)?;
        let pbn = self.alloc_block(tx)?;
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        block[..target.len()].copy_from_slice(target);
        self.region.write(self.geo.block(pbn), &block);
        // persist: the target block is durable at the fence `meta_update` puts before the
        // pointer store below (a fresh block: reachable only through that pointer).
        self.region.flush(self.geo.block(pbn), BLOCK_SIZE);
        let word = self
            .geo
            .leaf_word(pbn, crate::data::checksum::block_crc(&block));
        self.meta_update(
            tx,
            &[
                (ptr, &word.to_le_bytes()),
                (ioff + I_SIZE, &delta.size.to_le_bytes()),
                (ioff + I_BLOCKS, &(delta.blocks + 1).to_le_bytes()),
            ],
        )
    }

    /// The target of symbolic link `ino` (InvalidArgument for any other kind).
    pub(crate) fn read_target(&self, ino: u64) -> Result<Vec<u8>> {
        if self.inode_kind(ino)? != KIND_SYMLINK {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symbolic link"
            )));
        }
        let off = self.geo.inode(ino);
        let size = self.inode_size(ino)?;
        let (_, height) = self.tree_root(ino)?;
        let bad = || Error::corrupt(format!("symlink {ino} of {size} bytes"), off + I_SIZE);
        if size == 0 || size >= BLOCK_SIZE {
            return Err(bad());
        }
        let mut target = vec![0u8; size as usize];
        if height == 0 {
            if size > INLINE_TARGET_MAX {
                return Err(bad());
            }
            self.region.read(off + I_INLINE, &mut target);
            return Ok(target);
        }
        let (pbn, ptr) = self.permanent_block(ino, 0)?;
        let Some(ptr) = ptr.filter(|_| pbn != 0) else {
            return Err(bad());
        };
        if self.geo.data_checksums {
            self.verify_block(ino, 0, pbn, ptr)?;
        }
        self.region.read(self.geo.block(pbn), &mut target);
        Ok(target)
    }

    /// A FIFO, socket or device node `name` in `parent`.
    pub(crate) fn special_node(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
    ) -> Result<u64> {
        assert!(kind.is_special(), "mknod of a checked kind");
        let rdev = if kind.is_device() { rdev } else { 0 };
        let fields: [(u64, &[u8]); 1] = [(I_RDEV, &rdev.to_le_bytes())];
        self.create_node_with(tx, parent, name, kind.code(), perm, &fields)
    }

    /// An unnamed regular file (O_TMPFILE) made in directory `parent`: a live inode with
    /// nlink 0, which recovery frees like any unlinked file left open at a crash.
    pub(crate) fn unnamed_node(&self, tx: &mut Tx, parent: u64, perm: u32) -> Result<u64> {
        self.check_dir(parent)?;
        let ino = self
            .inodes_free
            .alloc()
            .ok_or_else(|| Error::NoSpace("no free inode".into()))?;
        tx.allocated_inodes.push(ino);
        self.creates.record(ino, tx.id);
        let off = self.geo.inode(ino);
        let now = self.now().to_le_bytes();
        let mut inode = [0u8; INODE_SIZE as usize];
        inode[I_PERM as usize..I_PERM as usize + 4].copy_from_slice(&(perm & 0o7777).to_le_bytes());
        for f in [I_MTIME, I_CTIME, I_ATIME, I_BTIME] {
            inode[f as usize..f as usize + 8].copy_from_slice(&now);
        }
        // The slot is free (kind 0): its other bytes need no undo entry.
        self.region.write(off + 1, &inode[1..]);
        // persist: the fresh bytes are durable at the fence of the kind's undo entry,
        // before the kind makes them live.
        self.region.flush(off, INODE_SIZE);
        self.meta_update(tx, &[(off + I_KIND, &[KIND_FILE])])?;
        self.touch(tx, ino);
        Ok(ino)
    }

    /// RENAME_EXCHANGE: the entries `parent/name` and `new_parent/new_name` swap the inodes
    /// they name (each entry's ino and kind bytes under the undo log); a directory that
    /// changes parent gets its parent field changed too.
    pub(crate) fn exchange_entries(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
    ) -> Result<()> {
        check_name(new_name)?;
        let a = self.lookup_slot(parent, name)?;
        let b = self.lookup_slot(new_parent, new_name)?;
        if a.slot == u64::MAX || b.slot == u64::MAX {
            return Err(Error::InvalidArgument("cannot exchange . or ..".into()));
        }
        if a.ino == b.ino {
            return Ok(());
        }
        if (a.kind == KIND_DIR && self.is_ancestor(a.ino, new_parent)?)
            || (b.kind == KIND_DIR && self.is_ancestor(b.ino, parent)?)
        {
            return Err(Error::InvalidArgument(format!(
                "cannot exchange {} with a directory inside it",
                String::from_utf8_lossy(name)
            )));
        }
        self.creates
            .check_all(&[parent, new_parent, a.ino, b.ino], tx.id)?;
        self.point_entry(tx, parent, name, a, b)?;
        self.point_entry(tx, new_parent, new_name, b, a)?;
        if parent != new_parent {
            for (moved, to) in [(a, new_parent), (b, parent)] {
                if moved.kind == KIND_DIR {
                    self.meta_u64(tx, self.geo.inode(moved.ino) + I_PARENT, to)?;
                }
            }
        }
        let now = self.now().to_le_bytes();
        self.meta_update(
            tx,
            &[
                (self.geo.inode(a.ino) + I_CTIME, &now),
                (self.geo.inode(b.ino) + I_CTIME, &now),
            ],
        )
    }

    /// Make entry `name` of `dir` (now `at`) name what `to` names.
    fn point_entry(&self, tx: &mut Tx, dir: u64, name: &[u8], at: Slot, to: Slot) -> Result<()> {
        let cell = self.cell(dir);
        let mut st = cell.lock();
        let addr = self.slot_addr(dir, at.slot)?;
        let mut bytes = [0u8; (D_KIND + 1) as usize];
        bytes[..8].copy_from_slice(&to.ino.to_le_bytes());
        bytes[D_KIND as usize] = to.kind;
        const _: () = assert!(D_KIND == D_INO + 8);
        self.meta_update(tx, &[(addr + D_INO, &bytes)])?;
        let index = self.dir_index(&mut st)?;
        let subdirs = i64::from(index.subdirs) - i64::from(at.kind == KIND_DIR)
            + i64::from(to.kind == KIND_DIR);
        index.subdirs = u32::try_from(subdirs.max(0)).unwrap_or(u32::MAX);
        index.names.insert(
            name.into(),
            Slot {
                slot: at.slot,
                ino: to.ino,
                kind: to.kind,
            },
        );
        self.touch(tx, dir);
        self.touch_dir_times(tx, dir)
    }
}
