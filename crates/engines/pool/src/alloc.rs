//! Volatile allocators (seed §III-C "Allocator"): free lists of blocks, log slots and inodes
//! live in DRAM only and are rebuilt at mount by walking the metadata (recovery.rs).
//!
//! A free list is split in a few shards, each behind its own lock, so that threads running
//! transactions on different files rarely meet on one lock.

use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SHARDS: usize = 8;

/// A sharded set of free numbers (block numbers, log slots, inode numbers).
pub struct FreeList {
    shards: Vec<Mutex<Vec<u64>>>,
    free: AtomicU64,
    total: u64,
}

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static THREAD_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn home_shard() -> usize {
    THREAD_SHARD.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % SHARDS);
        }
        s.get()
    })
}

impl FreeList {
    /// A free list over numbers `0..total` where `is_free(n)` says which start free.
    /// Numbers are handed out lowest first within a shard.
    pub fn new(total: u64, is_free: impl Fn(u64) -> bool) -> FreeList {
        let mut lists: Vec<Vec<u64>> = (0..SHARDS).map(|_| Vec::new()).collect();
        let mut free = 0;
        // Contiguous runs per shard keep neighbouring numbers together (fewer lock switches).
        let run = total.div_ceil(SHARDS as u64).max(1);
        for n in (0..total).rev() {
            if is_free(n) {
                lists[((n / run) as usize).min(SHARDS - 1)].push(n);
                free += 1;
            }
        }
        FreeList {
            shards: lists.into_iter().map(Mutex::new).collect(),
            free: AtomicU64::new(free),
            total,
        }
    }

    /// Take one free number, or None when all are in use.
    pub fn alloc(&self) -> Option<u64> {
        let home = home_shard();
        if let Some(n) = self.shards[home].lock().pop() {
            self.free.fetch_sub(1, Ordering::Relaxed);
            return Some(n);
        }
        // Home is empty: steal half of the first other shard that has numbers (one lock
        // switch for many later allocations). Never two shard locks at once.
        for i in 1..SHARDS {
            let stolen: Vec<u64> = {
                let mut other = self.shards[(home + i) % SHARDS].lock();
                let keep = other.len() / 2;
                other.drain(keep..).collect()
            };
            if stolen.is_empty() {
                continue;
            }
            let mut mine = self.shards[home].lock();
            mine.extend(stolen);
            let n = mine.pop();
            if n.is_some() {
                self.free.fetch_sub(1, Ordering::Relaxed);
            }
            return n;
        }
        None
    }

    /// Give a number back.
    pub fn free(&self, n: u64) {
        debug_assert!(n < self.total);
        let run = self.total.div_ceil(SHARDS as u64).max(1);
        self.shards[((n / run) as usize).min(SHARDS - 1)]
            .lock()
            .push(n);
        self.free.fetch_add(1, Ordering::Relaxed);
    }

    /// Numbers currently free.
    pub fn free_count(&self) -> u64 {
        self.free.load(Ordering::Relaxed)
    }

    /// Every number free now, in no particular order (for fsck; a concurrent alloc or free
    /// may or may not be seen).
    pub fn free_numbers(&self) -> Vec<u64> {
        let mut all = Vec::with_capacity(self.free_count() as usize);
        for shard in &self.shards {
            all.extend_from_slice(&shard.lock());
        }
        all
    }

    /// Size of the number space.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// Hasher for maps keyed by a u64 the engine chose (block, inode, transaction and handle
/// numbers): one multiply, no SipHash (keys never come from outside in a way that matters for
/// hash flooding: they are dense numbers the engine hands out or validated block numbers).
#[derive(Default, Clone, Copy)]
pub struct U64Hasher(u64);

impl std::hash::Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

/// A HashMap keyed by engine-chosen u64 numbers.
pub type U64Map<V> = std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<U64Hasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_hands_out_each_number_once() {
        let list = FreeList::new(100, |n| n % 3 != 0);
        let mut seen = std::collections::HashSet::new();
        while let Some(n) = list.alloc() {
            assert!(n % 3 != 0 && seen.insert(n));
        }
        assert_eq!(seen.len(), 66);
        assert_eq!(list.free_count(), 0);
        list.free(4);
        assert_eq!(list.alloc(), Some(4));
    }
}
