//! fallocate(2) on the data path: each mode is made of the write path's own steps, in the
//! transaction the file's writes belong to (`PoolStore::data_op`), so it is atomic and
//! durable like a write in every mode.
//!
//! - Allocate: every hole of the range gets a block of zeros (a write of zeros into a hole
//!   is a fresh block written directly, its pointer undo-logged); existing blocks are not
//!   touched. The size grows to the range's end unless KEEP_SIZE.
//! - ZeroRange: a write of zeros over the range (holes get zeroed blocks, existing blocks
//!   are overwritten through the mode's redo or undo path).
//! - PunchHole: the partial blocks at the edges are zeroed by a write (only where a block
//!   exists); every whole block inside loses its pointer (undo-logged, as a truncate drops
//!   the blocks past its end) and is freed after the commit point. Committed versions of
//!   those blocks are checkpointed first and the transaction's own are dropped, as a
//!   truncate does.
//!
//! Storage past the end of file is never kept: a KEEP_SIZE range is cut at the size.

use crate::core::{Core, InodeState};
use crate::data::write::{InodeDelta, FILE_SIZE_MAX};
use crate::log::transaction::Tx;
use crate::media::layout::*;
use pmem::Region;
use store::{Error, Fallocate, Result};

/// Largest run of zeros one write of a fallocate stores at once.
const ZERO_RUN_MAX: u64 = 1 << 20;

impl<R: Region> Core<R> {
    /// fallocate `op` over `[off, off + len)` of file `st.ino` inside `tx` (`len` > 0).
    pub(crate) fn fallocate_data(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        op: Fallocate,
        off: u64,
        len: u64,
    ) -> Result<()> {
        let ino = st.ino;
        let end = off
            .checked_add(len)
            .filter(|&e| e <= FILE_SIZE_MAX)
            .ok_or_else(|| {
                Error::FileTooLarge(format!("fallocate to {off}+{len} of inode {ino}"))
            })?;
        let size = self.inode_size(ino)?;
        let (keep, grows) = match op {
            Fallocate::Allocate { keep_size } | Fallocate::ZeroRange { keep_size } => {
                (keep_size, !keep_size && end > size)
            }
            Fallocate::PunchHole => (true, false),
        };
        let limit = if keep { end.min(size) } else { end };
        if grows {
            self.set_len_data(st, tx, end)?;
        }
        if limit > off {
            match op {
                Fallocate::Allocate { .. } => self.allocate_holes(st, tx, off, limit)?,
                Fallocate::ZeroRange { .. } => self.write_zeros(st, tx, off, limit)?,
                Fallocate::PunchHole => self.punch_hole(st, tx, off, limit)?,
            }
        }
        // The times change even when no byte did (as the model and Linux do).
        let delta = InodeDelta {
            size: self.inode_size(ino)?,
            blocks: self.inode_blocks(ino)?,
            pointer_writes: Vec::new(),
            time: self.now(),
        };
        self.finish_data_op(tx, ino, &delta)
    }

    /// Zeros over `[off, end)` through the write path, a run of at most `ZERO_RUN_MAX` at a
    /// time.
    fn write_zeros(&self, st: &mut InodeState, tx: &mut Tx, off: u64, end: u64) -> Result<()> {
        let zeros = vec![0u8; (end - off).min(ZERO_RUN_MAX) as usize];
        let mut at = off;
        while at < end {
            let n = (end - at).min(ZERO_RUN_MAX);
            self.write_data(st, tx, at, &zeros[..n as usize])?;
            at += n;
        }
        Ok(())
    }

    /// Give every hole among the blocks `[off, end)` touches a block of zeros (up to the
    /// size: `end` is at most the size here).
    fn allocate_holes(&self, st: &mut InodeState, tx: &mut Tx, off: u64, end: u64) -> Result<()> {
        let size = self.inode_size(st.ino)?;
        let mut run: Option<(u64, u64)> = None;
        for lbn in off / BLOCK_SIZE..end.div_ceil(BLOCK_SIZE) {
            let hole = self.permanent_block(st.ino, lbn)?.0 == 0;
            match (hole, run) {
                (true, Some((first, _))) => run = Some((first, lbn + 1)),
                (true, None) => run = Some((lbn, lbn + 1)),
                (false, Some((first, last))) => {
                    self.zero_blocks(st, tx, first, last, size)?;
                    run = None;
                }
                (false, None) => {}
            }
        }
        if let Some((first, last)) = run {
            self.zero_blocks(st, tx, first, last, size)?;
        }
        Ok(())
    }

    /// Zeros over the blocks `[first, last)` (holes: the writes allocate them), cut at `size`.
    fn zero_blocks(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        first: u64,
        last: u64,
        size: u64,
    ) -> Result<()> {
        let (from, to) = (first * BLOCK_SIZE, (last * BLOCK_SIZE).min(size));
        if to > from {
            self.write_zeros(st, tx, from, to)?;
        }
        Ok(())
    }

    /// Free the whole blocks inside `[off, end)` and zero the partial ones at its edges.
    fn punch_hole(&self, st: &mut InodeState, tx: &mut Tx, off: u64, end: u64) -> Result<()> {
        let ino = st.ino;
        let first_whole = off.div_ceil(BLOCK_SIZE);
        let end_whole = end / BLOCK_SIZE;
        // No whole block inside: the range lies in one block, or straddles one boundary (a
        // partial block on each side of it). Else the partial head and tail around the whole
        // blocks.
        let edges = if first_whole >= end_whole {
            if off / BLOCK_SIZE == (end - 1) / BLOCK_SIZE {
                vec![(off, end)]
            } else {
                let boundary = first_whole * BLOCK_SIZE;
                vec![(off, boundary), (boundary, end)]
            }
        } else {
            vec![
                (off, first_whole * BLOCK_SIZE),
                (end_whole * BLOCK_SIZE, end),
            ]
        };
        for (from, to) in edges.into_iter().filter(|(f, t)| t > f) {
            assert_eq!(
                from / BLOCK_SIZE,
                (to - 1) / BLOCK_SIZE,
                "a punch edge is in one block"
            );
            if self.permanent_block(ino, from / BLOCK_SIZE)?.0 != 0 {
                self.write_zeros(st, tx, from, to)?;
            }
        }
        if first_whole >= end_whole {
            return Ok(());
        }
        st.drop_map();
        let whole = first_whole..end_whole;
        // Committed versions of the blocks that go are checkpointed first (no committed
        // redo entry is lost); the transaction's own are dropped.
        let lbns: Vec<u64> = st.pending.keys().filter(|l| whole.contains(l)).collect();
        for lbn in lbns {
            self.checkpoint_block(st, lbn)?;
        }
        self.drop_own_versions(st, tx, whole.clone());
        let mut gone = Vec::new();
        self.walk_tree(ino, &mut |_, index, lbn| {
            if !index && whole.contains(&lbn) {
                gone.push(lbn);
            }
            Ok(())
        })?;
        let mut delta = InodeDelta {
            size: self.inode_size(ino)?,
            blocks: self.inode_blocks(ino)?,
            pointer_writes: Vec::new(),
            time: self.now(),
        };
        for lbn in gone {
            let (pbn, ptr) = self.permanent_block(ino, lbn)?;
            if let (true, Some(ptr)) = (pbn != 0, ptr) {
                delta.pointer_writes.push((ptr, 0));
                // Unreachable once the commit point has passed.
                tx.deferred_blocks.push(pbn);
                delta.blocks = delta.blocks.saturating_sub(1);
            }
        }
        self.finish_data_op(tx, ino, &delta)
    }
}
