//! The stride table (§5.2.3): <file size, file count> pairs; a new file's key advances the
//! global key by the next larger size class than the most common one.
//!
//! Size classes are powers of two in chunks (1, 2, 4, … 2^CLASSES-1 chunks). A file counts in
//! the smallest class at least its size; `update` moves a file between classes when its
//! size changes, `remove` when it is deleted. The table lives in DRAM and is rebuilt from the
//! file records at open (32 counters: far below the seed's 32 KB).

use crate::format::CHUNK_SIZE;

/// Number of size classes (class c holds files of at most 2^c chunks).
pub const CLASSES: usize = 32;

/// The stride table.
#[derive(Clone, Debug, Default)]
pub struct StrideTable {
    counts: [u64; CLASSES],
    /// A fixed stride (tests force collisions with 1), else `None`.
    fixed: Option<u64>,
    /// The smallest stride given.
    min: u64,
}

/// The class of a file of `size` bytes.
pub fn class_of(size: u64) -> usize {
    let chunks = size.div_ceil(CHUNK_SIZE).max(1);
    let class = 64 - (chunks - 1).leading_zeros() as usize;
    class.min(CLASSES - 1)
}

impl StrideTable {
    pub fn new(fixed: Option<u64>) -> Self {
        Self::with_min(fixed, 1)
    }
    pub fn with_min(fixed: Option<u64>, min: u64) -> Self {
        StrideTable {
            counts: [0; CLASSES],
            fixed,
            min: min.max(1),
        }
    }
    pub fn add(&mut self, size: u64) {
        self.counts[class_of(size)] += 1;
    }
    pub fn remove(&mut self, size: u64) {
        let c = class_of(size);
        assert!(
            self.counts[c] > 0,
            "cache: stride table class {c} underflow"
        );
        self.counts[c] -= 1;
    }
    pub fn update(&mut self, old: u64, new: u64) {
        if class_of(old) != class_of(new) {
            self.remove(old);
            self.add(new);
        }
    }
    /// The stride in slots for the next file: the size of the class after the most common
    /// one (ties: the larger class), at most `slots`.
    pub fn stride(&self, slots: u64) -> u64 {
        if let Some(f) = self.fixed {
            return f.clamp(1, slots.max(1));
        }
        let (mut best, mut best_count) = (0usize, 0u64);
        for (c, &n) in self.counts.iter().enumerate() {
            if n >= best_count && n > 0 {
                best = c;
                best_count = n;
            }
        }
        let next = (best + 1).min(CLASSES - 1);
        (1u64 << next).max(self.min).clamp(1, slots.max(1))
    }
    pub fn count(&self, class: usize) -> u64 {
        self.counts.get(class).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stride_is_the_class_above_the_most_common_size() {
        let mut t = StrideTable::new(None);
        assert_eq!(
            t.stride(1 << 20),
            2,
            "empty table: one-chunk class, next is 2"
        );
        for _ in 0..5 {
            t.add(20 << 10); // 5 chunks: class 3 (8 chunks)
        }
        t.add(1 << 20);
        assert_eq!(t.stride(1 << 20), 16);
        t.update(20 << 10, 3 << 20);
        t.update(20 << 10, 3 << 20);
        t.update(20 << 10, 3 << 20);
        assert_eq!(
            t.stride(1 << 20),
            2048,
            "3 MiB files now dominate: class 10 → 2^11"
        );
        assert_eq!(t.stride(100), 100, "never more than the slots");
        assert_eq!(StrideTable::new(Some(1)).stride(64), 1);
    }
}
