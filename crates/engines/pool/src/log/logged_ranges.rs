//! The metadata bytes a transaction has undo-logged, so that each byte is logged at most once
//! per transaction, holding its value from before the transaction.
//!
//! Why bytes and not ranges: two overlapping ranges logged under different extents (a
//! file's times inside its 32 attribute bytes, a run of two block pointers over one pointer
//! logged alone) would give the later undo entry an *intermediate* value: a value the
//! transaction itself wrote. Applying every entry in reverse order still restores the
//! original, but the entries are freed by an abort without a fence between them, so a crash
//! can leave the later entry valid and the earlier one freed; recovery would then "restore"
//! the transaction's own value (regression: `tests/regressions/overlapping_undo_ranges.rs`).
//! Logging only the bytes not yet logged makes every entry hold original bytes, so the
//! entries can be applied and freed in any order.

use smallvec::SmallVec;

/// Disjoint, non-adjacent byte ranges `[start, end)`, sorted by start. A transaction logs a
/// handful of ranges (an inode's attributes, a few pointers, directory entries), so a small
/// sorted vector, inline up to eight ranges, beats a tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct LoggedRanges {
    ranges: SmallVec<[(u64, u64); 8]>,
}

impl LoggedRanges {
    /// Index of the first range that ends after `start`.
    fn first_after(&self, start: u64) -> usize {
        self.ranges.partition_point(|&(_, e)| e <= start)
    }

    /// The parts of `[start, end)` not logged yet, in address order.
    pub(crate) fn uncovered(&self, start: u64, end: u64) -> SmallVec<[(u64, u64); 4]> {
        let mut parts = SmallVec::new();
        let mut pos = start;
        for &(s, e) in &self.ranges[self.first_after(start)..] {
            if s >= end {
                break;
            }
            if s > pos {
                parts.push((pos, s));
            }
            pos = pos.max(e);
        }
        if pos < end {
            parts.push((pos, end));
        }
        parts
    }

    /// Record `[start, end)` as logged (merged with the ranges it overlaps or touches).
    pub(crate) fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // Ranges touching [start, end) (ending at or after start, starting at or before end).
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let mut last = first;
        let (mut lo, mut hi) = (start, end);
        while last < self.ranges.len() && self.ranges[last].0 <= end {
            lo = lo.min(self.ranges[last].0);
            hi = hi.max(self.ranges[last].1);
            last += 1;
        }
        self.ranges.drain(first..last);
        self.ranges.insert(first, (lo, hi));
    }

    /// Number of disjoint ranges.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Nothing logged.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Add every range of `other` (syncv merges member transactions).
    pub(crate) fn extend(&mut self, other: &LoggedRanges) {
        for &(s, e) in &other.ranges {
            self.insert(s, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overlaps_are_logged_once() {
        let mut r = LoggedRanges::default();
        assert_eq!(r.uncovered(40, 56).as_slice(), &[(40, 56)]);
        r.insert(40, 56);
        // The 32 attribute bytes around the 16 bytes of times: only both ends are new.
        assert_eq!(r.uncovered(32, 64).as_slice(), &[(32, 40), (56, 64)]);
        r.insert(32, 64);
        assert_eq!(r.len(), 1);
        assert!(r.uncovered(36, 60).is_empty());
        // A run of two pointers over one logged pointer.
        r.insert(0x1010, 0x1018);
        assert_eq!(r.uncovered(0x1008, 0x1018).as_slice(), &[(0x1008, 0x1010)]);
        r.insert(0x1008, 0x1018);
        assert_eq!(r.len(), 2);
        assert!(!r.is_empty());
    }

    proptest! {
        /// Against a byte-set model: `uncovered` returns exactly the bytes not inserted
        /// before, as disjoint ordered ranges, and the ranges stay disjoint and merged.
        #[test]
        fn matches_a_byte_set(ops in proptest::collection::vec((0u64..200, 1u64..40), 1..40)) {
            let mut r = LoggedRanges::default();
            let mut model = std::collections::BTreeSet::new();
            for (start, len) in ops {
                let end = start + len;
                let parts = r.uncovered(start, end);
                let mut got = std::collections::BTreeSet::new();
                let mut last_end = 0;
                for &(s, e) in &parts {
                    prop_assert!(s < e && s >= start && e <= end && s >= last_end);
                    last_end = e;
                    got.extend(s..e);
                }
                let want: std::collections::BTreeSet<u64> =
                    (start..end).filter(|b| !model.contains(b)).collect();
                prop_assert_eq!(got, want);
                r.insert(start, end);
                model.extend(start..end);
                let mut prev_end = None;
                for &(s, e) in &r.ranges {
                    prop_assert!(s < e);
                    if let Some(p) = prev_end {
                        prop_assert!(s > p, "ranges must be disjoint and not adjacent");
                    }
                    prev_end = Some(e);
                }
            }
        }
    }
}
