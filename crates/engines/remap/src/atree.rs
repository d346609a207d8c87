//! The A-tree of ACCFS (§4): per file, an ordered map from home block to where its newest
//! version lives. A pair is either committed (in the journal, waiting for the checkpoint that
//! remaps the home block onto it) or pending (written but not committed: the A-flagged pairs
//! of an O_ATOMIC file or of an open transaction, kept out of checkpoints and dropped by a
//! crash, an abort or `abortv`). A later write of the same block replaces the earlier pair.
//! A punched block (fallocate PUNCH_HOLE) is a hole pair, pending or committed: it reads as
//! zeros, carries no data, and its checkpoint punches the home file's block.

use crate::format::BLOCK_USIZE;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One block of file data.
pub type Block = [u8; BLOCK_USIZE];

/// Where a home block's newest version is.
#[derive(Clone, Debug)]
pub enum Pair {
    /// Committed: journal block number (journal offset / BLOCK).
    Committed(u64),
    /// Not committed yet (A-flagged): the data.
    Pending(Arc<Block>),
    /// A punched block, committed: zeros, no storage.
    CommittedHole,
    /// A punched block, not committed yet.
    PendingHole,
}

impl Pair {
    fn is_pending(&self) -> bool {
        matches!(self, Pair::Pending(_) | Pair::PendingHole)
    }
    fn is_hole(&self) -> bool {
        matches!(self, Pair::CommittedHole | Pair::PendingHole)
    }
}

/// The pairs of one file, ordered by home block.
#[derive(Clone, Debug, Default)]
pub struct ATree {
    pairs: BTreeMap<u64, Pair>,
    /// How many of `pairs` are pending.
    pending: u64,
    /// How many of `pairs` are holes.
    holes: u64,
}

impl ATree {
    pub fn get(&self, file_block: u64) -> Option<&Pair> {
        self.pairs.get(&file_block)
    }
    /// Insert a pair, replacing the earlier one of the same home block.
    pub fn insert(&mut self, file_block: u64, pair: Pair) {
        let (new_pending, new_hole) = (u64::from(pair.is_pending()), u64::from(pair.is_hole()));
        let (old_pending, old_hole) = match self.pairs.insert(file_block, pair) {
            Some(p) => (u64::from(p.is_pending()), u64::from(p.is_hole())),
            None => (0, 0),
        };
        self.pending = self.pending + new_pending - old_pending;
        self.holes = self.holes + new_hole - old_hole;
    }
    /// Drop every pair at or past `file_block` (a truncate).
    pub fn cut(&mut self, file_block: u64) {
        let dropped = self.pairs.split_off(&file_block);
        self.pending -= dropped.values().filter(|p| p.is_pending()).count() as u64;
        self.holes -= dropped.values().filter(|p| p.is_hole()).count() as u64;
    }
    /// The pairs of blocks in `blocks`, in order (none when the range is empty or reversed).
    pub fn range(&self, blocks: std::ops::Range<u64>) -> impl Iterator<Item = (u64, &Pair)> {
        let end = blocks.end.max(blocks.start);
        self.pairs.range(blocks.start..end).map(|(&b, p)| (b, p))
    }
    /// How many pairs are holes (O(1)).
    pub fn hole_count(&self) -> u64 {
        self.holes
    }
    /// The hole pairs' blocks, in order (O(pairs): only when [`hole_count`] is not 0).
    pub fn holes(&self) -> impl Iterator<Item = u64> + '_ {
        self.pairs
            .iter()
            .filter(|(_, p)| p.is_hole())
            .map(|(&b, _)| b)
    }
    /// The pending hole pairs' blocks, in order.
    pub fn pending_holes(&self) -> impl Iterator<Item = u64> + '_ {
        self.pairs
            .iter()
            .filter(|(_, p)| matches!(p, Pair::PendingHole))
            .map(|(&b, _)| b)
    }
    /// The committed hole pairs grouped into runs (first block, blocks).
    pub fn committed_hole_runs(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (&b, p) in &self.pairs {
            if !matches!(p, Pair::CommittedHole) {
                continue;
            }
            match runs.last_mut() {
                Some((first, n)) if *first + *n == b => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        runs
    }
    /// How many pairs are pending (O(1)).
    pub fn pending_count(&self) -> u64 {
        debug_assert_eq!(
            self.pending,
            self.pairs.values().filter(|p| p.is_pending()).count() as u64
        );
        self.pending
    }
    /// Whether block `file_block` has a pending pair.
    pub fn is_pending(&self, file_block: u64) -> bool {
        self.pairs.get(&file_block).is_some_and(Pair::is_pending)
    }
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
    pub fn len(&self) -> usize {
        self.pairs.len()
    }
    /// The pending (A-flagged) pairs, by home block.
    pub fn pending(&self) -> impl Iterator<Item = (u64, &Arc<Block>)> {
        self.pairs.iter().filter_map(|(&b, p)| match p {
            Pair::Pending(d) => Some((b, d)),
            _ => None,
        })
    }
    /// The committed pairs (home block, journal block), by home block.
    pub fn committed(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.pairs.iter().filter_map(|(&b, p)| match p {
            Pair::Committed(j) => Some((b, *j)),
            _ => None,
        })
    }
    /// Committed pairs grouped into runs contiguous in both the file and the journal:
    /// (home block, journal block, blocks). One remap call per run.
    pub fn committed_runs(&self) -> Vec<(u64, u64, u64)> {
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        for (b, j) in self.committed() {
            match runs.last_mut() {
                Some((rb, rj, n)) if *rb + *n == b && *rj + *n == j => *n += 1,
                _ => runs.push((b, j, 1)),
            }
        }
        runs
    }
    pub fn clear(&mut self) {
        self.pairs.clear();
        self.pending = 0;
        self.holes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_pair_replaces_earlier_and_runs_batch_contiguous_pairs() {
        let mut t = ATree::default();
        t.insert(0, Pair::Committed(10));
        t.insert(1, Pair::Committed(11));
        t.insert(2, Pair::Committed(12));
        t.insert(1, Pair::Committed(20));
        t.insert(5, Pair::Pending(Arc::new([7; BLOCK_USIZE])));
        assert_eq!(t.committed_runs(), vec![(0, 10, 1), (1, 20, 1), (2, 12, 1)]);
        t.insert(1, Pair::Committed(11));
        assert_eq!(t.committed_runs(), vec![(0, 10, 3)]);
        assert_eq!((t.pending().count(), t.pending_count()), (1, 1));
        t.cut(2);
        assert_eq!(t.len(), 2);
        assert_eq!((t.pending().count(), t.pending_count()), (0, 0));
    }

    #[test]
    fn holes_are_counted_and_run_apart_from_data() {
        let mut t = ATree::default();
        t.insert(3, Pair::PendingHole);
        t.insert(4, Pair::CommittedHole);
        t.insert(5, Pair::CommittedHole);
        t.insert(6, Pair::Committed(9));
        assert_eq!((t.hole_count(), t.pending_count()), (3, 1));
        assert_eq!(t.committed_hole_runs(), vec![(4, 2)]);
        assert_eq!(t.committed_runs(), vec![(6, 9, 1)]);
        assert_eq!(t.pending_holes().collect::<Vec<_>>(), vec![3]);
        t.insert(3, Pair::Pending(Arc::new([1; BLOCK_USIZE])));
        assert_eq!((t.hole_count(), t.pending_count()), (2, 1));
        t.cut(5);
        assert_eq!(t.holes().collect::<Vec<_>>(), vec![4]);
        assert_eq!(t.hole_count(), 1);
    }
}
