//! fallocate on an inode: which blocks a call changes (planned first, so that the store can
//! check its room for uncommitted blocks before anything changes), then the change as
//! pending pairs — zero blocks (shared, one allocation), hole pairs, or partial blocks
//! zeroed through `write`. Committed and checkpointed like any write ("logged zeros"; a hole
//! pair is logged without data and punched out of the home file by the checkpoint).

use super::inode::Inode;
use crate::atree::{Block, Pair};
use crate::format::{BLOCK, BLOCK_USIZE};
use crate::journal::media::Media;
use hostfs::HostFs;
use std::sync::{Arc, OnceLock};
use store::Result;

/// What fallocate does to one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockChange {
    /// The whole block becomes allocated zeros.
    Zero,
    /// The whole block becomes a hole.
    Hole,
    /// Bytes `from..to` of the block become zeros.
    Partial { from: usize, to: usize },
}

/// What a fallocate call does to the blocks of `[off, end)` (already cut at the size where
/// the call keeps it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparseOp {
    /// Holes become allocated zeros.
    Allocate,
    /// Holes (`holes`: the store's format has hole pairs; else logged zero blocks).
    Punch { holes: bool },
    /// Every byte becomes an allocated zero.
    Zero,
}

fn zero_block() -> Arc<Block> {
    static ZERO: OnceLock<Arc<Block>> = OnceLock::new();
    ZERO.get_or_init(|| Arc::new([0; BLOCK_USIZE])).clone()
}

impl Inode {
    /// Whether block `b` holds data (a data pair, or a home block not punched).
    fn holds_data(&self, b: u64) -> bool {
        match self.atree.get(b) {
            Some(Pair::Pending(_) | Pair::Committed(_)) => true,
            Some(Pair::PendingHole | Pair::CommittedHole) => false,
            None => b < self.home_blocks && !self.home_holes.contains(&b),
        }
    }

    /// The blocks `op` changes in `[off, end)`, in order; at most `max + 1` of them (a
    /// longer plan is refused by the caller: its memory stays bounded by the limit).
    pub fn plan(&self, op: SparseOp, off: u64, end: u64, max: u64) -> Vec<(u64, BlockChange)> {
        if end <= off {
            return Vec::new();
        }
        let take = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
        let (first, last) = (off / BLOCK, end.div_ceil(BLOCK));
        let partial = |b: u64| {
            let start = b * BLOCK;
            let from = (off.max(start) - start) as usize;
            let to = (end.min(start + BLOCK) - start) as usize;
            (from > 0 || to < BLOCK_USIZE).then_some(BlockChange::Partial { from, to })
        };
        match op {
            SparseOp::Zero => (first..last)
                .map(|b| (b, partial(b).unwrap_or(BlockChange::Zero)))
                .take(take)
                .collect(),
            SparseOp::Allocate => {
                let mut holes: Vec<u64> = self
                    .atree
                    .range(first..last)
                    .filter(|(_, p)| matches!(p, Pair::PendingHole | Pair::CommittedHole))
                    .map(|(b, _)| b)
                    .collect();
                holes.extend(
                    self.home_holes
                        .range(first..last.max(first))
                        .filter(|&&b| self.atree.get(b).is_none()),
                );
                holes.sort_unstable();
                holes
                    .into_iter()
                    .map(|b| (b, BlockChange::Zero))
                    .take(take)
                    .collect()
            }
            SparseOp::Punch { holes } => {
                let home = (first..last.min(self.home_blocks)).filter(|&b| self.holds_data(b));
                let past = self
                    .atree
                    .range(self.home_blocks.clamp(first, last)..last)
                    .filter(|(_, p)| matches!(p, Pair::Pending(_) | Pair::Committed(_)))
                    .map(|(b, _)| b);
                let whole = if holes {
                    BlockChange::Hole
                } else {
                    BlockChange::Zero
                };
                home.chain(past)
                    .map(|b| (b, partial(b).unwrap_or(whole)))
                    .take(take)
                    .collect()
            }
        }
    }

    /// Blocks of `plan` that are not pending yet (what the call adds to the uncommitted ones).
    pub fn pending_adds(&self, plan: &[(u64, BlockChange)]) -> u64 {
        plan.iter()
            .filter(|(b, _)| !self.atree.is_pending(*b))
            .count() as u64
    }

    /// Apply a plan (the size is already what the call leaves).
    pub fn apply_plan<H: HostFs>(
        &mut self,
        media: &mut Media<H>,
        plan: &[(u64, BlockChange)],
    ) -> Result<()> {
        let size = self.meta.size;
        for &(b, change) in plan {
            match change {
                BlockChange::Zero => self.atree.insert(b, Pair::Pending(zero_block())),
                BlockChange::Hole => self.atree.insert(b, Pair::PendingHole),
                BlockChange::Partial { from, to } => {
                    let zeros = [0u8; BLOCK_USIZE];
                    let len = to.saturating_sub(from);
                    self.write(
                        media,
                        b * BLOCK + from as u64,
                        zeros.get(..len).unwrap_or(&[]),
                    )?;
                }
            }
        }
        assert_eq!(
            self.meta.size, size,
            "fallocate changes no size by its blocks"
        );
        self.set_allocated();
        Ok(())
    }
}
