//! The DRAM index: a lock-free, fixed-depth radix tree from 4 KB file block numbers to log
//! entry ids, 9 bits a level, with a skip pointer (the root is the deepest node that covers the
//! file, so a file below 2 MB is indexed by a single leaf table, as in Libnvmmio's Figure 3).
//!
//! Buckets are updated with compare-and-swap only; interior nodes are created lazily with a CAS
//! (the loser frees its node) and are freed only when the tree is dropped, so a reader never
//! sees freed memory. Growing the height (adjusting the skip pointer) needs the file's
//! exclusive lock (every tree user holds the file's shared lock).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

pub const FANOUT_BITS: u32 = 9;
const FANOUT: usize = 1 << FANOUT_BITS;
/// Levels needed for 48-bit file offsets with 4 KB blocks (36 bits of block number).
pub const HEIGHT_MAX: u32 = 4;

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
pub struct RadixTree {
    root: AtomicPtr<Node>,
    height: AtomicU32,
}

impl Default for RadixTree {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixTree {
    pub fn new() -> Self {
        RadixTree {
            root: AtomicPtr::new(Node::new()),
            height: AtomicU32::new(1),
        }
    }

    /// Make the tree cover block numbers below `blocks`. Caller holds the file's exclusive
    /// lock (no concurrent tree user).
    pub fn cover(&self, blocks: u64) {
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
    pub fn get(&self, block: u64) -> Option<u32> {
        let v = self.bucket(block, false)?.load(Ordering::Acquire);
        (v != 0).then(|| (v - 1) as u32)
    }

    /// Index `id` at every block of `[first, first + count)` if all are empty; all or nothing.
    pub fn insert_range(&self, first: u64, count: u64, id: u32) -> bool {
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
    pub fn range_empty(&self, first: u64, count: u64) -> bool {
        (first..first + count).all(|b| self.get(b).is_none())
    }

    /// Remove `id` from `[first, first + count)` (blocks holding another id are left alone).
    pub fn remove_range(&self, first: u64, count: u64, id: u32) {
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

/// Buddy allocator of the log area: entries of `BLOCK_SIZE << order`, order 0..=order_max,
/// each aligned to its size. DRAM only: at mount recovery empties the log, so it starts free.
pub struct Buddy {
    block: u64,
    order_max: u8,
    free: Vec<std::collections::BTreeSet<u64>>,
    free_bytes: u64,
}

impl Buddy {
    /// `len` bytes from `base` (both multiples of the largest entry).
    pub fn new(base: u64, len: u64, block: u64, order_max: u8) -> Self {
        let mut free = vec![std::collections::BTreeSet::new(); order_max as usize + 1];
        let top = block << order_max;
        let mut at = base;
        while at + top <= base + len {
            free[order_max as usize].insert(at);
            at += top;
        }
        Buddy {
            block,
            order_max,
            free,
            free_bytes: at - base,
        }
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    pub fn alloc(&mut self, order: u8) -> Option<u64> {
        let from = (order..=self.order_max).find(|&o| !self.free[o as usize].is_empty())?;
        let at = self.free[from as usize].pop_first()?;
        for o in (order..from).rev() {
            self.free[o as usize].insert(at + (self.block << o));
        }
        self.free_bytes -= self.block << order;
        Some(at)
    }

    pub fn release(&mut self, mut at: u64, mut order: u8) {
        self.free_bytes += self.block << order;
        while order < self.order_max {
            let size = self.block << order;
            // Buddies are relative to the area's top-level alignment (base is a multiple of
            // the largest entry, so xor works on absolute offsets).
            let buddy = at ^ size;
            if self.free[order as usize].remove(&buddy) {
                at = at.min(buddy);
                order += 1;
            } else {
                break;
            }
        }
        self.free[order as usize].insert(at);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tree_insert_get_remove_and_grow() {
        let t = RadixTree::new();
        assert!(t.insert_range(3, 4, 7));
        assert_eq!(t.get(5), Some(7));
        assert!(!t.insert_range(6, 2, 8), "block 6 is taken");
        assert_eq!(t.get(7), None, "failed insert rolled back");
        assert_eq!(t.get(600), None, "beyond the skip-pointer root");
        t.cover(1 << 20);
        assert_eq!(t.get(5), Some(7), "old root kept under the new one");
        assert!(t.insert_range(1 << 19, 1, 9));
        assert_eq!(t.get(1 << 19), Some(9));
        t.remove_range(3, 4, 7);
        assert!(t.range_empty(0, 512));
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
        assert_eq!(b.free[3].len() as u64, total / (4096 << 3), "fully merged");
    }
}
