//! The DRAM version table (seed §3.5): for each journaled home block, the positions of its
//! latest and old versions in the checkpoint area. Rebuilt from the headers at recovery.

use crate::layout::BlockKey;
use std::collections::HashMap;

/// The versions of one home block (positions in the journal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Versions {
    pub latest: u64,
    pub old: Option<u64>,
}

/// Home block -> versions.
#[derive(Debug, Default)]
pub struct VersionTable {
    map: HashMap<BlockKey, Versions>,
}

impl VersionTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &BlockKey) -> Option<Versions> {
        self.map.get(key).copied()
    }

    /// A new committed version at `pos`: the latest becomes the old one. Returns the version
    /// that dropped out (the previous old one), which is no longer needed.
    pub fn push(&mut self, key: BlockKey, pos: u64) -> Option<u64> {
        match self.map.get_mut(&key) {
            None => {
                self.map.insert(
                    key,
                    Versions {
                        latest: pos,
                        old: None,
                    },
                );
                None
            }
            Some(v) => {
                assert!(
                    pos > v.latest,
                    "version of {key:?} at {pos} not after {}",
                    v.latest
                );
                let dropped = v.old;
                v.old = Some(v.latest);
                v.latest = pos;
                dropped
            }
        }
    }

    /// Forget the old version of `key` (its block left the checkpoint area).
    pub fn drop_old(&mut self, key: &BlockKey) {
        if let Some(v) = self.map.get_mut(key) {
            v.old = None;
        }
    }

    /// Forget every version before position `first`.
    pub fn retain_from(&mut self, first: u64) {
        self.map.retain(|_, v| {
            if v.old.is_some_and(|o| o < first) {
                v.old = None;
            }
            v.latest >= first
        });
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every home block with a version and the position of its newest one.
    pub fn iter(&self) -> impl Iterator<Item = (&BlockKey, &Versions)> {
        self.map.iter()
    }

    /// Every (home block, latest position), sorted by home block.
    pub fn latest_sorted(&self) -> Vec<(BlockKey, u64)> {
        let mut v: Vec<_> = self.map.iter().map(|(k, v)| (*k, v.latest)).collect();
        v.sort_unstable();
        v
    }
}
