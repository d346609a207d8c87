//! A write's plan: reserve, then act. Before `Core::write_data` changes anything it resolves
//! the blocks it covers with a read-only walk of the block-pointer tree, counts every block
//! and data-log slot it will allocate (new tree roots, missing index blocks, hole and
//! extension blocks, and per overwritten block what its mode takes), and reserves them in
//! one batch. A shortage found there has changed nothing, so the caller can make room and
//! run the write again (`Reservation::allow_retry`). The write's allocations then draw from
//! the reservation (`Tx::reservation`, data/reservation.rs); what is left goes back to the free lists on every exit path. The metadata-log slots are an upper
//! bound (`meta_needs`), so on a log within a few entries of full a write can fail with
//! LogFull where the entries it really takes would still have fitted.
//!
//! A pure overwrite in a redo mode (FCFS, SOC, SYNC) reserves nothing here: it allocates
//! only its pending versions, which `claim_versions` takes in one batch of its own before
//! it changes anything (the benchmarked path: no second pass over the pending lists).

use crate::config::Mode;
use crate::core::{capacity, Core, InodeState};
use crate::data::block_map::REBUILD_AFTER;
use crate::data::write::FILE_SIZE_MAX;
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::modes::fg_wal::lines_of;
use pmem::Region;
use smallvec::SmallVec;
use store::{Error, Result};

/// Metadata-log slots any non-NC write may take besides its block pointers: the inode's
/// size, block count and times (32 bytes, maybe split around a range already logged), the
/// tree's root and height, and the times' own entry.
const META_NEEDS_BASE: usize = 6;

/// What a write will allocate (`Core::write_needs`): blocks, data-log slots, and at most how
/// many metadata-log slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Needs {
    pub(crate) blocks: usize,
    pub(crate) slots: usize,
    pub(crate) meta: usize,
}

/// Metadata-log slots the undo entries of the write of `plan` may take: `META_NEEDS_BASE`
/// for the inode's fields, one per new index block (its pointer in its parent), and for
/// the hole pieces' pointers, which are logged as runs of neighbouring pointers (one index
/// block each) of at most `UNDO_DATA_MAX` bytes an entry, one more per run for a split
/// around a range the transaction logged before.
fn meta_needs(plan: &WritePlan) -> usize {
    let mut needs = META_NEEDS_BASE + plan.index_blocks;
    let mut run = 0u64;
    let mut last: Option<u64> = None;
    let per_entry = crate::log::entry::UNDO_DATA_MAX as u64;
    for p in plan.pieces.iter().filter(|p| p.pbn == 0) {
        let joins = last.is_some_and(|l| l + 1 == p.lbn && p.lbn % POINTERS_PER_BLOCK != 0);
        if !joins && run > 0 {
            needs += ((run * 8).div_ceil(per_entry) + 1) as usize;
            run = 0;
        }
        run += 1;
        last = Some(p.lbn);
    }
    if run > 0 {
        needs += ((run * 8).div_ceil(per_entry) + 1) as usize;
    }
    needs
}

/// One block's part of a write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub(crate) lbn: u64,
    /// Address of the block pointer (0 while an index block on its path is missing: the
    /// write creates the path, `Core::create_paths`).
    pub(crate) ptr: u64,
    /// Permanent block (0 = hole).
    pub(crate) pbn: u64,
    /// Offset in the block and length.
    pub(crate) boff: u64,
    pub(crate) len: usize,
    /// Offset in the caller's data.
    pub(crate) at: usize,
    /// Index of the transaction's own version in the block's pending list (redo modes).
    pub(crate) version: usize,
}

/// The blocks a write covers, resolved without changing anything.
pub(crate) struct WritePlan {
    /// The byte range written.
    pub(crate) off: u64,
    pub(crate) end: u64,
    /// In ascending lbn order.
    pub(crate) pieces: SmallVec<[Piece; 8]>,
    /// Index blocks the write will create: new roots (the tree grows) and the missing index
    /// blocks on the pieces' paths, each counted once.
    pub(crate) index_blocks: usize,
}

impl WritePlan {
    /// An empty plan for `[off, end)`.
    fn new(off: u64, end: u64) -> WritePlan {
        WritePlan {
            off,
            end,
            pieces: SmallVec::new(),
            index_blocks: 0,
        }
    }

    /// Add the pieces of `[self.off, self.end)`, block by block, with the pointer address and
    /// permanent block `resolve` gives each block. False (pieces incomplete) as soon as it
    /// gives None.
    fn add_pieces(
        &mut self,
        mut resolve: impl FnMut(u64) -> Result<Option<(u64, u64)>>,
    ) -> Result<bool> {
        let mut pos = self.off;
        while pos < self.end {
            let lbn = pos / BLOCK_SIZE;
            let boff = pos % BLOCK_SIZE;
            let len = (BLOCK_SIZE - boff).min(self.end - pos);
            let Some((ptr, pbn)) = resolve(lbn)? else {
                return Ok(false);
            };
            self.pieces.push(Piece {
                lbn,
                ptr,
                pbn,
                boff,
                len: len as usize,
                at: (pos - self.off) as usize,
                version: 0,
            });
            pos += len;
        }
        Ok(true)
    }
}

/// Per tree level, the index (lbn / capacity(level)) of the last missing node counted:
/// the pieces come in ascending lbn order, so a node shared by several is counted once.
type Counted = [u64; TREE_HEIGHT_MAX as usize + 1];

impl<R: Region> Core<R> {
    /// The pieces of the write `[off, end)` of `ino` with their block pointers and permanent
    /// blocks as the tree stands, and the index blocks the write will create. Read-only.
    pub(crate) fn plan_write(&self, ino: u64, off: u64, end: u64) -> Result<WritePlan> {
        let mut plan = WritePlan::new(off, end);
        if off >= end {
            return Ok(plan);
        }
        let last = (end - 1) / BLOCK_SIZE;
        if last >= capacity(TREE_HEIGHT_MAX) || last * BLOCK_SIZE >= FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("block {last} of inode {ino}")));
        }
        let (root, height) = self.tree_root(ino)?;
        let mut top = height;
        while top == 0 || last >= capacity(top) {
            top += 1;
        }
        plan.index_blocks = (top - height) as usize;
        let mut counted: Counted = [u64::MAX; TREE_HEIGHT_MAX as usize + 1];
        let tree = (root, height, top);
        let mut index_blocks = plan.index_blocks;
        plan.add_pieces(|lbn| {
            let ptr = self.plan_path(tree, lbn, &mut counted, &mut index_blocks)?;
            let pbn = if ptr == 0 {
                0
            } else {
                self.geo.leaf_pbn(self.read_u64(ptr), ptr)?
            };
            Ok(Some((ptr, pbn)))
        })?;
        plan.index_blocks = index_blocks;
        Ok(plan)
    }

    /// `plan_write` from the copy of the file's block map (`InodeState::map`), when every
    /// block of `[off, end)` exists and is in it: an overwrite's plan without reading the
    /// tree. None when a block is a hole or past the copy, or in SCSP (the caller walks the
    /// tree). The copy is built once `REBUILD_AFTER` plans have found none.
    pub(crate) fn plan_cached(
        &self,
        st: &mut InodeState,
        off: u64,
        end: u64,
    ) -> Result<Option<WritePlan>> {
        if off >= end || self.mode() == Mode::Scsp {
            return Ok(None);
        }
        if st.map.is_none() {
            st.map_misses += 1;
            if st.map_misses < REBUILD_AFTER {
                return Ok(None);
            }
            st.map_misses = 0;
            let blocks = self.inode_size(st.ino)?.div_ceil(BLOCK_SIZE);
            st.map = self.read_block_map(st.ino, blocks)?.map(Box::new);
        }
        let Some(map) = st.map.as_deref() else {
            return Ok(None);
        };
        let mut plan = WritePlan::new(off, end);
        let found = plan.add_pieces(|lbn| {
            let Some(m) = map.lookup(lbn) else {
                return Ok(None);
            };
            #[cfg(debug_assertions)]
            {
                let tree = self.permanent_block(st.ino, lbn);
                debug_assert!(
                    matches!(tree, Ok((pbn, Some(ptr))) if pbn == m.pbn && ptr == m.ptr),
                    "inode {} block {lbn}: block map copy {m:?}, tree {tree:?}",
                    st.ino
                );
            }
            Ok(Some((m.ptr, m.pbn)))
        })?;
        if !found {
            return Ok(None);
        }
        Ok(Some(plan))
    }

    /// The block pointer of `lbn` in the tree `(root, height)` as it stands (0 when an
    /// index block on its path is missing), adding to `missing` the index blocks its path
    /// lacks once the tree is `top` levels high and an earlier piece has not counted. The
    /// tree grows as `pointer_addr_create` grows it: each new root holds the old one at
    /// index 0, so above the old root's level only the nodes at index 0 exist (the new
    /// roots, counted by the caller). Every pointer followed is validated.
    fn plan_path(
        &self,
        (root, height, top): (u64, u32, u32),
        lbn: u64,
        counted: &mut Counted,
        missing: &mut usize,
    ) -> Result<u64> {
        let mut node = 0;
        for level in (1..=top).rev() {
            let which = lbn / capacity(level);
            let present = if level >= height {
                node = if level == height && which == 0 {
                    root
                } else {
                    0
                };
                which == 0
            } else if node == 0 {
                false
            } else {
                let addr = self.geo.block(node) + (which % POINTERS_PER_BLOCK) * 8;
                let child = self.read_u64(addr);
                node = if child == 0 {
                    0
                } else {
                    self.geo.check_pbn(child, addr)?
                };
                child != 0
            };
            if !present && counted[level as usize] != which {
                counted[level as usize] = which;
                *missing += 1;
            }
        }
        Ok(match node {
            0 => 0,
            leaf => self.geo.block(leaf) + (lbn % POINTERS_PER_BLOCK) * 8,
        })
    }

    /// Blocks and data-log slots the write of `plan` will allocate in `tx`: its index
    /// blocks, one block per hole piece, and per overwritten piece what the mode takes —
    /// FCFS, SOC, SYNC: a pending block and a slot unless the transaction has its own
    /// uncommitted version of the block; SCSP: a shadow unless the block is one already;
    /// FG-WAL: a slot for a line undo entry if lines are left to save, and an undo block if
    /// the block has none yet; NC: nothing. And how many metadata-log slots its undo
    /// entries may take (`meta_needs`, and in SCSP one per new shadow's block pointer).
    pub(crate) fn write_needs(&self, st: &InodeState, tx: &Tx, plan: &WritePlan) -> Needs {
        let (mut blocks, mut slots) = (plan.index_blocks, 0);
        let mut meta = if self.mode() == Mode::Nc {
            0
        } else {
            meta_needs(plan)
        };
        for p in &plan.pieces {
            if p.pbn == 0 {
                blocks += 1;
                continue;
            }
            let (b, s) = match self.mode() {
                Mode::Nc => (false, false),
                Mode::Scsp => (!tx.shadows.contains(&p.pbn), false),
                Mode::FgWal => tx.modes.lines.needs(p.pbn, lines_of(p.boff, p.len as u64)),
                Mode::Fcfs | Mode::Soc | Mode::Sync => {
                    let list = st.pending.get(&p.lbn);
                    let last = list.and_then(|l| l.last());
                    let own = last.is_some_and(|v| !v.committed && v.txid == tx.id);
                    (!own, !own)
                }
            };
            blocks += usize::from(b);
            slots += usize::from(s);
            if b && self.mode() == Mode::Scsp {
                // The new shadow's block pointer.
                meta += 1;
            }
            if self.geo.data_checksums && self.mode() == Mode::FgWal {
                // The block pointer, whose crc the in-place write changes.
                meta += 1;
            }
        }
        Needs {
            blocks,
            slots,
            meta,
        }
    }

    /// Take what a write needs (`write_needs`) for `tx` in one batch, before the write
    /// changes anything. Short of any of it, nothing is kept and the write fails: with
    /// a retry allowed (`Reservation::allow_retry`) it records the shortage (its caller makes room and runs it
    /// again), else it dooms the transaction, as a full pool does.
    pub(crate) fn reserve(&self, tx: &mut Tx, needs: Needs) -> Result<()> {
        let taken = (tx.reservation).take(needs, &self.blocks, &self.data_slots, &self.meta_slots);
        if taken.is_err() && !tx.reservation.fell_short() {
            tx.state.doom();
        }
        taken
    }

    /// Give back to the free lists what is left of `tx`'s reservation (nothing was written
    /// to it).
    pub(crate) fn release_reserved(&self, tx: &mut Tx) {
        (tx.reservation).give_back(&self.blocks, &self.data_slots, &self.meta_slots);
    }
}
