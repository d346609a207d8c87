//! The wear-aware free list (seed §3.3): free header slots ordered by the write count of the
//! journal block each one matches (the seed's red-black tree; here a `BTreeSet`).

use std::collections::BTreeSet;

/// Free slots keyed by (write count, slot).
#[derive(Debug, Default)]
pub struct WearList {
    by_wear: BTreeSet<(u32, u32)>,
}

impl WearList {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a free slot whose block has `write_count` writes. The slot must not be listed.
    pub fn insert(&mut self, slot: u32, write_count: u32) {
        assert!(
            self.by_wear.insert((write_count, slot)),
            "free slot {slot} listed twice"
        );
    }

    /// Remove a listed free slot.
    pub fn remove(&mut self, slot: u32, write_count: u32) {
        assert!(
            self.by_wear.remove(&(write_count, slot)),
            "free slot {slot} (write count {write_count}) not listed"
        );
    }

    /// The least-worn free slot and its write count.
    pub fn least_worn(&self) -> Option<(u32, u32)> {
        self.by_wear.first().map(|&(wc, slot)| (slot, wc))
    }

    pub fn len(&self) -> usize {
        self.by_wear.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_wear.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_wear.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_worn_first() {
        let mut w = WearList::new();
        w.insert(0, 6);
        w.insert(1, 2);
        w.insert(2, 9);
        assert_eq!(w.least_worn(), Some((1, 2)));
        w.remove(1, 2);
        assert_eq!(w.least_worn(), Some((0, 6)));
        assert_eq!(w.len(), 2);
    }
}
