//! An inode in memory: attributes, directory entries, and for a file its A-tree over the
//! home file. A block's newest version is its A-tree pair (pending data, or a committed
//! journal block); without a pair it is the home file's block when below `home_blocks`,
//! else a hole (zeros).

use crate::atree::{ATree, Block, Pair};
use crate::format::{BLOCK, BLOCK_USIZE};
use crate::journal::media::Media;
use hostfs::HostFs;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use store::{now_ns, FileKind, Ino, Metadata, Result};

#[derive(Clone, Debug)]
pub struct Inode {
    pub meta: Metadata,
    /// File data not yet remapped home.
    pub atree: ATree,
    /// Directory entries.
    pub entries: BTreeMap<Vec<u8>, Ino>,
    /// Parent directory (directories only).
    pub parent: Ino,
    /// Blocks of the home file that hold file data (past them: holes, whatever the home
    /// file still has until a checkpoint truncates it).
    pub home_blocks: u64,
    /// Smallest block a truncate dropped since the last commit of this inode.
    pub cut: Option<u64>,
    /// Committed changes not yet checkpointed into the home file.
    pub dirty: bool,
    /// A symlink's target (empty for every other kind).
    pub target: Vec<u8>,
    /// Extended attributes, by name.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Whether `xattrs` changed since the inode's last commit (the commit then logs them).
    pub xattrs_changed: XattrsState,
    /// An unnamed file (O_TMPFILE) that `link` may still give its first name.
    pub naming: Naming,
    /// Blocks below `home_blocks` a checkpoint punched out of the home file (holes: they
    /// read as zeros and take no storage).
    pub home_holes: BTreeSet<u64>,
}

/// Whether an inode's extended attributes must be logged by its next commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrsState {
    Logged,
    Changed,
}

/// Whether `link` may name an inode whose link count is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// A file made by `tmpfile`, not named yet.
    Unnamed,
    /// Any other: once its last name is gone, it gets no new one (linkat(2)).
    Ordinary,
}

impl Inode {
    pub fn new(ino: Ino, kind: FileKind, perm: u32, parent: Ino) -> Self {
        let now = now_ns();
        Inode {
            meta: Metadata {
                ino,
                kind,
                size: 0,
                perm: perm & 0o7777,
                nlink: if kind == FileKind::Dir { 2 } else { 1 },
                uid: 0,
                gid: 0,
                allocated: 0,
                atime: now,
                mtime: now,
                ctime: now,
                rdev: 0,
            },
            atree: ATree::default(),
            entries: BTreeMap::new(),
            parent,
            home_blocks: 0,
            cut: None,
            dirty: false,
            target: Vec::new(),
            xattrs: BTreeMap::new(),
            xattrs_changed: XattrsState::Logged,
            naming: Naming::Ordinary,
            home_holes: BTreeSet::new(),
        }
    }

    /// A copy for a transaction's undo: everything but a directory's entries (a transaction
    /// undoes its entry changes one by one, `State::set_entry`).
    pub fn pre_image(&self) -> Inode {
        Inode {
            meta: self.meta,
            atree: self.atree.clone(),
            entries: BTreeMap::new(),
            parent: self.parent,
            home_blocks: self.home_blocks,
            cut: self.cut,
            dirty: self.dirty,
            target: self.target.clone(),
            xattrs: self.xattrs.clone(),
            xattrs_changed: self.xattrs_changed,
            naming: self.naming,
            home_holes: self.home_holes.clone(),
        }
    }

    /// Bytes of the extended attributes (names and values).
    pub fn xattr_bytes(&self) -> u64 {
        self.xattrs
            .iter()
            .map(|(n, v)| (n.len() + v.len()) as u64)
            .sum()
    }

    /// Storage of the file: every block below the size but the punched ones (a hole made
    /// by extending the size counts as storage: the engine does not track those).
    pub fn set_allocated(&mut self) {
        if self.meta.kind != FileKind::File {
            self.meta.allocated = 0; // a symlink's target lives in the metadata
            return;
        }
        let blocks = self.meta.size.div_ceil(BLOCK);
        let mut holes = 0u64;
        if self.atree.hole_count() > 0 {
            holes += self.atree.holes().filter(|&b| b < blocks).count() as u64;
        }
        for &b in self.home_holes.range(..blocks) {
            if self.atree.get(b).is_none() {
                holes += 1;
            }
        }
        self.meta.allocated = (blocks - holes.min(blocks)) * BLOCK;
    }

    /// The newest version of block `b`.
    pub fn read_block<H: HostFs>(&self, media: &mut Media<H>, b: u64) -> Result<Box<Block>> {
        match self.atree.get(b) {
            Some(Pair::Pending(d)) => Ok(Box::new(**d)),
            Some(Pair::Committed(j)) => media.read_journal_block(*j),
            Some(Pair::CommittedHole | Pair::PendingHole) => Ok(Box::new([0; BLOCK_USIZE])),
            None if b < self.home_blocks && !self.home_holes.contains(&b) => {
                media.read_home_block(self.meta.ino, b)
            }
            None => Ok(Box::new([0; BLOCK_USIZE])),
        }
    }

    /// Read at `off` (up to the size); returns the bytes read.
    pub fn read<H: HostFs>(&self, media: &mut Media<H>, off: u64, buf: &mut [u8]) -> Result<usize> {
        if off >= self.meta.size {
            return Ok(0);
        }
        let n = (self.meta.size - off).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let (b, within) = (pos / BLOCK, (pos % BLOCK) as usize);
            let take = (BLOCK_USIZE - within).min(n - done);
            let block = self.read_block(media, b)?;
            let dst = buf.get_mut(done..done + take).unwrap_or_default();
            dst.copy_from_slice(block.get(within..within + take).unwrap_or_default());
            done += take;
        }
        Ok(n)
    }

    /// Write at `off`: each touched block becomes a pending pair (partial blocks are merged
    /// with their newest version first).
    pub fn write<H: HostFs>(&mut self, media: &mut Media<H>, off: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        while done < data.len() {
            let pos = off + done as u64;
            let (b, within) = (pos / BLOCK, (pos % BLOCK) as usize);
            let take = (BLOCK_USIZE - within).min(data.len() - done);
            let src = data.get(done..done + take).unwrap_or_default();
            let mut block = match self.atree.get(b) {
                Some(Pair::Pending(d)) => d.clone(),
                _ if take == BLOCK_USIZE => Arc::new([0; BLOCK_USIZE]),
                _ => Arc::new(*self.read_block(media, b)?),
            };
            Arc::make_mut(&mut block)
                .get_mut(within..within + take)
                .unwrap_or_default()
                .copy_from_slice(src);
            self.atree.insert(b, Pair::Pending(block));
            done += take;
        }
        self.meta.size = self.meta.size.max(off + data.len() as u64);
        self.set_allocated();
        Ok(())
    }

    /// Truncate or extend to `len` (growth reads as zeros).
    pub fn set_len<H: HostFs>(&mut self, media: &mut Media<H>, len: u64) -> Result<()> {
        if len < self.meta.size {
            let (keep, tail) = (len / BLOCK, (len % BLOCK) as usize);
            let partial = if tail > 0 {
                let mut b = self.read_block(media, keep)?;
                b.get_mut(tail..).unwrap_or_default().fill(0);
                Some(b)
            } else {
                None
            };
            self.atree.cut(keep);
            self.home_holes.split_off(&keep);
            self.home_blocks = self.home_blocks.min(keep);
            self.cut = Some(self.cut.map_or(keep, |c| c.min(keep)));
            if let Some(b) = partial {
                self.atree.insert(keep, Pair::Pending(Arc::new(*b)));
            }
        }
        self.meta.size = len;
        self.set_allocated();
        Ok(())
    }

    pub fn touch_data(&mut self) {
        let now = now_ns();
        self.meta.mtime = now;
        self.meta.ctime = now;
    }
}
