//! The A-tree of ACCFS (§4): per file, an ordered map from home block to where its newest
//! version lives. A pair is either committed (in the journal, waiting for the checkpoint that
//! remaps the home block onto it) or pending (written but not committed: the A-flagged pairs
//! of an O_ATOMIC file or of an open transaction, kept out of checkpoints and dropped by a
//! crash, an abort or `abortv`). A later write of the same block replaces the earlier pair.

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
}

/// The pairs of one file, ordered by home block.
#[derive(Clone, Debug, Default)]
pub struct ATree {
    pairs: BTreeMap<u64, Pair>,
    /// How many of `pairs` are pending.
    pending: u64,
}

impl ATree {
    pub fn get(&self, file_block: u64) -> Option<&Pair> {
        self.pairs.get(&file_block)
    }
    /// Insert a pair, replacing the earlier one of the same home block.
    pub fn insert(&mut self, file_block: u64, pair: Pair) {
        let new = u64::from(matches!(pair, Pair::Pending(_)));
        let old = match self.pairs.insert(file_block, pair) {
            Some(Pair::Pending(_)) => 1,
            _ => 0,
        };
        self.pending = self.pending + new - old;
    }
    /// Drop every pair at or past `file_block` (a truncate).
    pub fn cut(&mut self, file_block: u64) {
        let dropped = self.pairs.split_off(&file_block);
        let gone = dropped
            .values()
            .filter(|p| matches!(p, Pair::Pending(_)))
            .count() as u64;
        self.pending -= gone;
    }
    /// How many pairs are pending (O(1)).
    pub fn pending_count(&self) -> u64 {
        debug_assert_eq!(self.pending, self.pending().count() as u64);
        self.pending
    }
    /// Whether block `file_block` has a pending pair.
    pub fn is_pending(&self, file_block: u64) -> bool {
        matches!(self.pairs.get(&file_block), Some(Pair::Pending(_)))
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
            Pair::Committed(_) => None,
        })
    }
    /// The committed pairs (home block, journal block), by home block.
    pub fn committed(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.pairs.iter().filter_map(|(&b, p)| match p {
            Pair::Committed(j) => Some((b, *j)),
            Pair::Pending(_) => None,
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
}
