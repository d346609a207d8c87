//! The DRAM index: a lock-free, fixed-depth radix tree from 4 KB file block numbers to log
//! entry ids, 9 bits a level, with a skip pointer (the root is the deepest node that covers the
//! file, so a file below 2 MB is indexed by a single leaf table, as in Libnvmmio's Figure 3).
//!
//! Buckets are updated with compare-and-swap only; interior nodes are created lazily with a CAS
//! (the loser frees its node) and are freed only when the tree is dropped, so a reader never
//! sees freed memory. Growing the height (adjusting the skip pointer) needs the file's
//! exclusive lock (every tree user holds the file's shared lock).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

pub(crate) const FANOUT_BITS: u32 = 9;
const FANOUT: usize = 1 << FANOUT_BITS;
/// Levels needed for 48-bit file offsets with 4 KB blocks (36 bits of block number).
pub(crate) const HEIGHT_MAX: u32 = 4;

struct Node {
    /// Leaf: entry id + 1 (0 = empty). Interior: `*mut Node` as u64 (0 = empty).
    slots: Box<[AtomicU64]>,
}

impl Node {
    fn new() -> *mut Node {
        let slots = (0..FANOUT).map(|_| AtomicU64::new(0)).collect();
        Box::into_raw(Box::new(Node { slots }))
    }
}

/// See the module documentation.
pub(crate) struct RadixTree {
    root: AtomicPtr<Node>,
    height: AtomicU32,
}

impl Default for RadixTree {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixTree {
    pub(crate) fn new() -> Self {
        RadixTree {
            root: AtomicPtr::new(Node::new()),
            height: AtomicU32::new(1),
        }
    }

    /// Make the tree cover block numbers below `blocks`. Caller holds the file's exclusive
    /// lock (no concurrent tree user).
    pub(crate) fn cover(&self, blocks: u64) {
        loop {
            let h = self.height.load(Ordering::Acquire);
            if h >= HEIGHT_MAX || blocks <= 1u64 << (FANOUT_BITS * h) {
                return;
            }
            let new_root = Node::new();
            let old = self.root.load(Ordering::Acquire);
            // SAFETY: new_root was just allocated and is not shared yet.
            unsafe { (*new_root).slots[0].store(old as u64, Ordering::Release) };
            self.root.store(new_root, Ordering::Release);
            self.height.store(h + 1, Ordering::Release);
        }
    }

    /// The leaf bucket of `block`, creating interior nodes when `create`.
    fn bucket(&self, block: u64, create: bool) -> Option<&AtomicU64> {
        let h = self.height.load(Ordering::Acquire);
        if block >> (FANOUT_BITS * h) != 0 {
            return None;
        }
        let mut node = self.root.load(Ordering::Acquire);
        for level in (1..h).rev() {
            let idx = ((block >> (FANOUT_BITS * level)) as usize) & (FANOUT - 1);
            // SAFETY: nodes are freed only in Drop (&mut self), so `node` is live.
            let slot = unsafe { &(*node).slots[idx] };
            let mut child = slot.load(Ordering::Acquire) as *mut Node;
            if child.is_null() {
                if !create {
                    return None;
                }
                let fresh = Node::new();
                match slot.compare_exchange(0, fresh as u64, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => child = fresh,
                    Err(existing) => {
                        // SAFETY: `fresh` lost the race and was never shared.
                        drop(unsafe { Box::from_raw(fresh) });
                        child = existing as *mut Node;
                    }
                }
            }
            node = child;
        }
        // SAFETY: as above.
        Some(unsafe { &(*node).slots[(block as usize) & (FANOUT - 1)] })
    }

    /// The entry id indexed at `block`.
    pub(crate) fn get(&self, block: u64) -> Option<u32> {
        Self::id_in(self.bucket(block, false)?)
    }

    /// The leaf bucket of `block` (creating its interior nodes), so that a writer can look it
    /// up and then claim it ([`claim`](Self::claim)) with one walk of the tree. `None` beyond
    /// the covered blocks.
    pub(crate) fn slot(&self, block: u64) -> Option<&AtomicU64> {
        self.bucket(block, true)
    }

    /// The entry id a bucket holds.
    pub(crate) fn id_in(slot: &AtomicU64) -> Option<u32> {
        let v = slot.load(Ordering::Acquire);
        (v != 0).then(|| (v - 1) as u32)
    }

    /// Index `id` in an empty bucket (as `insert_range` of one block); false if taken.
    pub(crate) fn claim(slot: &AtomicU64, id: u32) -> bool {
        assert!(id < u32::MAX);
        slot.compare_exchange(0, id as u64 + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Index `id` at every block of `[first, first + count)` if all are empty; all or nothing.
    pub(crate) fn insert_range(&self, first: u64, count: u64, id: u32) -> bool {
        // Log entries are a power of two blocks, aligned to their size; ids fit a bucket.
        assert!(count.is_power_of_two() && first & (count - 1) == 0 && id < u32::MAX);
        for (i, block) in (first..first + count).enumerate() {
            let ok = self
                .bucket(block, true)
                .map(|b| {
                    b.compare_exchange(0, id as u64 + 1, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                })
                .unwrap_or(false);
            if !ok {
                self.remove_range(first, i as u64, id);
                return false;
            }
        }
        true
    }

    /// True when every block of `[first, first + count)` is empty (a hint: racy by nature).
    pub(crate) fn range_empty(&self, first: u64, count: u64) -> bool {
        (first..first + count).all(|b| self.get(b).is_none())
    }

    /// Remove `id` from `[first, first + count)` (blocks holding another id are left alone).
    pub(crate) fn remove_range(&self, first: u64, count: u64, id: u32) {
        for block in first..first + count {
            if let Some(b) = self.bucket(block, false) {
                let _ = b.compare_exchange(id as u64 + 1, 0, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }
}

fn free_node(node: *mut Node, level: u32) {
    if node.is_null() {
        return;
    }
    if level > 0 {
        // SAFETY: exclusive access in Drop; children of interior nodes are node pointers.
        let slots = unsafe { &(*node).slots };
        for s in slots.iter() {
            free_node(s.load(Ordering::Relaxed) as *mut Node, level - 1);
        }
    }
    // SAFETY: allocated by Node::new, freed once.
    drop(unsafe { Box::from_raw(node) });
}

impl Drop for RadixTree {
    fn drop(&mut self) {
        let h = *self.height.get_mut();
        free_node(*self.root.get_mut(), h - 1);
    }
}

/// "No block": end of a free list.
const NIL: u32 = u32::MAX;

/// Buddy allocator of the log area: entries of `BLOCK_SIZE << order`, order 0..=order_max,
/// each aligned to its size. DRAM only: at mount recovery empties the log, so it starts free.
///
/// Free chunks of each order form a doubly linked list threaded through per-block arrays (the
/// chunk's first block holds its links), so that allocating, freeing and merging with a buddy
/// are O(1) and never allocate memory; lists are LIFO, so a freed entry is the next one used
/// (its log pages are warm).
pub(crate) struct Buddy {
    base: u64,
    block: u64,
    order_max: u8,
    /// Per order: the first free chunk (block index), or NIL.
    heads: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Per block: 0, or 1 + the order of the free chunk that starts at it.
    free_order: Vec<u8>,
    free_bytes: u64,
}

impl Buddy {
    /// `len` bytes from `base` (both multiples of the largest entry).
    pub(crate) fn new(base: u64, len: u64, block: u64, order_max: u8) -> Self {
        let blocks = (len / block) as usize;
        let mut b = Buddy {
            base,
            block,
            order_max,
            heads: vec![NIL; order_max as usize + 1],
            next: vec![NIL; blocks],
            prev: vec![NIL; blocks],
            free_order: vec![0; blocks],
            free_bytes: 0,
        };
        let top = 1u64 << order_max;
        let mut at = 0u64;
        while at + top <= blocks as u64 {
            b.push(at as u32, order_max);
            at += top;
        }
        b.free_bytes = at * block;
        b
    }

    pub(crate) fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    fn push(&mut self, idx: u32, order: u8) {
        let head = self.heads[order as usize];
        self.next[idx as usize] = head;
        self.prev[idx as usize] = NIL;
        if head != NIL {
            self.prev[head as usize] = idx;
        }
        self.heads[order as usize] = idx;
        self.free_order[idx as usize] = order + 1;
    }

    fn unlink(&mut self, idx: u32, order: u8) {
        let (p, n) = (self.prev[idx as usize], self.next[idx as usize]);
        if p == NIL {
            self.heads[order as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.free_order[idx as usize] = 0;
    }

    /// A free entry of `order` (pool offset), `None` when none is left.
    pub(crate) fn alloc(&mut self, order: u8) -> Option<u64> {
        let from = (order..=self.order_max).find(|&o| self.heads[o as usize] != NIL)?;
        let idx = self.heads[from as usize];
        self.unlink(idx, from);
        for o in (order..from).rev() {
            self.push(idx + (1u32 << o), o);
        }
        self.free_bytes -= self.block << order;
        assert_eq!(self.free_order[idx as usize], 0);
        Some(self.base + idx as u64 * self.block)
    }

    /// Give back the entry of `order` at pool offset `at` (merging it with free buddies).
    pub(crate) fn release(&mut self, at: u64, mut order: u8) {
        let size = self.block << order;
        let off = at.wrapping_sub(self.base);
        assert!(
            at >= self.base && order <= self.order_max && off & (size - 1) == 0,
            "log entry {at:#x} of order {order}: not one this allocator hands out"
        );
        let mut idx = (off / self.block) as u32;
        assert!(
            (idx as usize) < self.free_order.len() && self.free_order[idx as usize] == 0,
            "log entry {at:#x} released twice"
        );
        self.free_bytes += size;
        while order < self.order_max {
            // Chunks are aligned to their size relative to `base` (a multiple of the largest
            // entry), so the buddy's index differs in one bit.
            let buddy = idx ^ (1u32 << order);
            if self.free_order.get(buddy as usize) != Some(&(order + 1)) {
                break;
            }
            self.unlink(buddy, order);
            idx = idx.min(buddy);
            order += 1;
        }
        self.push(idx, order);
    }

    /// Free chunks of `order` (tests).
    #[cfg(test)]
    fn free_count(&self, order: u8) -> usize {
        let mut n = 0;
        let mut at = self.heads[order as usize];
        while at != NIL {
            n += 1;
            at = self.next[at as usize];
        }
        n
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tree_insert_get_remove_and_grow() {
        let t = RadixTree::new();
        assert!(t.insert_range(4, 4, 7));
        assert_eq!(t.get(5), Some(7));
        assert!(!t.insert_range(0, 8, 8), "blocks 4..8 are taken");
        assert_eq!(t.get(0), None, "failed insert rolled back");
        assert_eq!(t.get(600), None, "beyond the skip-pointer root");
        t.cover(1 << 20);
        assert_eq!(t.get(5), Some(7), "old root kept under the new one");
        assert!(t.insert_range(1 << 19, 1, 9));
        assert_eq!(t.get(1 << 19), Some(9));
        t.remove_range(4, 4, 7);
        assert!(t.range_empty(0, 512));
    }

    #[test]
    #[should_panic(expected = "released twice")]
    fn buddy_double_release_trips() {
        let mut b = Buddy::new(1 << 20, 1 << 20, 4096, 3);
        let a = b.alloc(0).unwrap();
        let _keep_the_buddy_busy = b.alloc(0).unwrap();
        b.release(a, 0);
        b.release(a, 0);
    }

    #[test]
    #[should_panic(expected = "not one this allocator hands out")]
    fn buddy_release_of_a_misaligned_entry_trips() {
        let mut b = Buddy::new(1 << 20, 1 << 20, 4096, 3);
        b.release((1 << 20) + 4096, 1);
    }

    #[test]
    #[should_panic]
    fn tree_insert_of_an_unaligned_range_trips() {
        RadixTree::new().insert_range(3, 4, 7);
    }

    #[test]
    fn buddy_splits_and_merges() {
        let mut b = Buddy::new(1 << 20, 1 << 20, 4096, 3);
        let total = b.free_bytes();
        let a = b.alloc(0).unwrap();
        let c = b.alloc(2).unwrap();
        assert_eq!(a % 4096, 0);
        assert_eq!(c % (4096 << 2), 0);
        assert_ne!(a, c);
        b.release(a, 0);
        b.release(c, 2);
        assert_eq!(b.free_bytes(), total);
        assert_eq!(b.free_count(3) as u64, total / (4096 << 3), "fully merged");
        for o in 0..3 {
            assert_eq!(b.free_count(o), 0, "order {o} left over");
        }
    }

    #[test]
    fn buddy_hands_out_disjoint_entries_until_full_and_merges_back() {
        let (base, len) = (8u64 << 20, 1u64 << 20);
        let mut b = Buddy::new(base, len, 4096, 4);
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut held: Vec<(u64, u8)> = Vec::new();
        for round in 0..2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let order = (rng % 5) as u8;
            if !rng.is_multiple_of(3) || held.is_empty() {
                if let Some(at) = b.alloc(order) {
                    let size = 4096u64 << order;
                    assert_eq!((at - base) % size, 0, "round {round}: misaligned");
                    assert!(at >= base && at + size <= base + len);
                    for &(o, ord) in &held {
                        let s2 = 4096u64 << ord;
                        assert!(at + size <= o || o + s2 <= at, "round {round}: overlap");
                    }
                    held.push((at, order));
                }
            } else {
                let (at, ord) = held.swap_remove((rng as usize / 7) % held.len());
                b.release(at, ord);
            }
            let used: u64 = held.iter().map(|&(_, o)| 4096u64 << o).sum();
            assert_eq!(b.free_bytes() + used, len, "round {round}: bytes lost");
        }
        for (at, ord) in held.drain(..) {
            b.release(at, ord);
        }
        assert_eq!(
            b.free_count(4),
            (len / (4096 << 4)) as usize,
            "fully merged again"
        );
    }
}
