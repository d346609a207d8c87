//! First level of the TLVI (seed §III-D, Fig. 4): per file, a radix tree from logical block
//! number to the block's pending list.
//!
//! ```text
//! height 2 (64^2 = 4096 blocks, files up to 16 MB):
//!   root [64 child pointers] -> leaf [64 x u32] -> slot index + 1 (0 = no pending list)
//!                                                  -> slots[i] = (lbn, pending list)
//! ```
//!
//! The tree holds 6 bits of the block number per level (64-way nodes: a leaf is 256 bytes,
//! four cache lines, so neighbouring blocks share lines) and grows in height with the file,
//! like the block-pointer tree. A node's array is part of the node's own allocation, so a
//! lookup follows one pointer per level (a cache miss each on a cold file: root, leaf,
//! slot), not two. The pending lists themselves live in a slab, so that a leaf entry is 4
//! bytes and iteration over all lists (checkpoint, fsck) does not walk the tree. The slab
//! grows by chunks that never move: growing it copies nothing and frees nothing that the
//! next growth would have to fault in again. Nodes are kept when their entries empty (files
//! shrink rarely); `clear` drops everything.
//!
//! The first `FLAT_MAX` blocks of a file (its first 16 MB) skip the tree: their lists sit in
//! a flat array indexed by block number, grown by doubling to cover the highest such block
//! that ever had a list. A lookup there is one dependent access instead of three (root,
//! leaf, slot), and in the steady state of random writes over many files each of those was
//! a cache and TLB miss (the checkpoint empties lists all the time, so a write usually makes
//! a fresh one). The cost is DRAM: a list is 120 bytes, so up to 3 % of the size of a file
//! that has pending versions, at most 480 KB per file. A bitmap of the used entries keeps
//! iteration proportional to the array's size / 64, not to its entries.

use crate::data::tlvi::PendingList;

/// Blocks below this have their lists in the flat array (files up to 16 MB need no tree).
const FLAT_MAX: u64 = 4096;

/// The flat array's first size.
const FLAT_MIN: usize = 4;

const FANOUT_BITS: u32 = 6;
const FANOUT: usize = 1 << FANOUT_BITS;

/// Slots per slab chunk.
const CHUNK_BITS: u32 = 5;
const CHUNK: usize = 1 << CHUNK_BITS;

// A leaf takes the inner node's size (520 bytes, one leaf per 64 blocks): boxing the arrays
// to save that would put a second dependent load on every level of every lookup.
#[allow(clippy::large_enum_variant)]
enum Node {
    Inner([Option<Box<Node>>; FANOUT]),
    Leaf([u32; FANOUT]),
}

impl Node {
    fn new(level: u32) -> Box<Node> {
        Box::new(if level == 1 {
            Node::Leaf([0; FANOUT])
        } else {
            Node::Inner(std::array::from_fn(|_| None))
        })
    }
}

/// Blocks a tree of `height` levels addresses.
fn capacity(height: u32) -> u64 {
    1u64.checked_shl(FANOUT_BITS * height).unwrap_or(u64::MAX)
}

/// The digit of `lbn` at `level` (1 = leaf).
fn digit(lbn: u64, level: u32) -> usize {
    ((lbn >> (FANOUT_BITS * (level - 1))) as usize) & (FANOUT - 1)
}

type Slot = Option<(u64, PendingList)>;

/// Slots in chunks of `CHUNK` that stay where they are when the slab grows.
#[derive(Default)]
struct Slab {
    // Boxed so that growing the vector moves pointers, never the slots.
    #[allow(clippy::vec_box)]
    chunks: Vec<Box<[Slot; CHUNK]>>,
    /// Slots handed out so far (used or on the free list).
    len: usize,
}

impl Slab {
    fn get(&self, i: usize) -> &Slot {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }

    fn get_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }

    /// A new slot at the end (empty).
    fn push(&mut self) -> usize {
        if self.len == self.chunks.len() * CHUNK {
            self.chunks.push(Box::new(std::array::from_fn(|_| None)));
        }
        self.len += 1;
        self.len - 1
    }

    fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        let len = self.len;
        self.chunks.iter_mut().flat_map(|c| c.iter_mut()).take(len)
    }
}

/// Per-file map: logical block -> pending list.
#[derive(Default)]
pub(crate) struct PendingIndex {
    /// Lists of blocks `< FLAT_MAX`, indexed by block number; an entry not in `flat_used`
    /// is an empty list.
    flat: Vec<PendingList>,
    /// Bit `i % 64` of word `i / 64`: `flat[i]` holds a list.
    flat_used: Vec<u64>,
    /// Entries set in `flat_used`.
    flat_count: usize,
    root: Option<Box<Node>>,
    height: u32,
    /// Slab of (lbn, list); `None` = free slot (its index is on `free`).
    slots: Slab,
    free: Vec<u32>,
}

impl PendingIndex {
    /// `flat[lbn]` holds a list.
    fn flat_has(&self, lbn: usize) -> bool {
        self.flat_used
            .get(lbn / 64)
            .is_some_and(|w| w & (1 << (lbn % 64)) != 0)
    }

    /// Slot index of `lbn` (`>= FLAT_MAX`), if it has a pending list.
    fn find(&self, lbn: u64) -> Option<usize> {
        if lbn >= capacity(self.height) {
            return None;
        }
        let mut node = self.root.as_deref()?;
        let mut level = self.height;
        loop {
            match node {
                Node::Inner(children) => node = children[digit(lbn, level)].as_deref()?,
                Node::Leaf(entries) => {
                    return match entries[digit(lbn, level)] {
                        0 => None,
                        i => Some(i as usize - 1),
                    }
                }
            }
            level -= 1;
        }
    }

    /// The leaf entry of `lbn`, the tree grown and nodes created as needed.
    fn entry_mut(&mut self, lbn: u64) -> &mut u32 {
        while self.root.is_none() || lbn >= capacity(self.height) {
            let old = self.root.take();
            self.height += 1;
            let mut root = Node::new(self.height);
            if let (Some(old), Node::Inner(children)) = (old, root.as_mut()) {
                children[0] = Some(old);
            }
            self.root = Some(root);
        }
        let mut level = self.height;
        let Some(mut current) = self.root.as_deref_mut() else {
            unreachable!("the root was created above");
        };
        loop {
            match current {
                Node::Inner(children) => {
                    current = children[digit(lbn, level)]
                        .get_or_insert_with(|| Node::new(level - 1))
                        .as_mut();
                }
                Node::Leaf(entries) => return &mut entries[digit(lbn, level)],
            }
            level -= 1;
        }
    }

    /// The pending list of `lbn`.
    pub(crate) fn get(&self, lbn: &u64) -> Option<&PendingList> {
        if *lbn < FLAT_MAX {
            let i = *lbn as usize;
            return self.flat_has(i).then(|| &self.flat[i]);
        }
        let i = self.find(*lbn)?;
        self.slots.get(i).as_ref().map(|(_, list)| list)
    }

    /// The pending list of `lbn`, mutable.
    pub(crate) fn get_mut(&mut self, lbn: &u64) -> Option<&mut PendingList> {
        if *lbn < FLAT_MAX {
            let i = *lbn as usize;
            return self.flat_has(i).then(|| &mut self.flat[i]);
        }
        let i = self.find(*lbn)?;
        self.slots.get_mut(i).as_mut().map(|(_, list)| list)
    }

    /// The pending list of `lbn`, created empty if missing.
    pub(crate) fn list_mut(&mut self, lbn: u64) -> &mut PendingList {
        if lbn < FLAT_MAX {
            return self.flat_list_mut(lbn as usize);
        }
        let i = match self.find(lbn) {
            Some(i) => i,
            None => {
                let i = match self.free.pop() {
                    Some(i) => i as usize,
                    None => self.slots.push(),
                };
                *self.slots.get_mut(i) = Some((lbn, PendingList::new()));
                *self.entry_mut(lbn) = i as u32 + 1;
                i
            }
        };
        match self.slots.get_mut(i) {
            Some((_, list)) => list,
            None => unreachable!("a leaf entry names a used slot"),
        }
    }

    /// `list_mut` for a block `< FLAT_MAX`: the array grown by doubling to cover it.
    fn flat_list_mut(&mut self, i: usize) -> &mut PendingList {
        if i >= self.flat.len() {
            let len = (i + 1).next_power_of_two().max(FLAT_MIN);
            self.flat.resize_with(len, PendingList::new);
            self.flat_used.resize(len.div_ceil(64), 0);
        }
        let (word, bit) = (&mut self.flat_used[i / 64], 1u64 << (i % 64));
        if *word & bit == 0 {
            *word |= bit;
            self.flat_count += 1;
        }
        &mut self.flat[i]
    }

    /// The leaf entry of `lbn` if its path exists (no node is created).
    fn existing_entry_mut(&mut self, lbn: u64) -> Option<&mut u32> {
        if lbn >= capacity(self.height) {
            return None;
        }
        let mut node = self.root.as_deref_mut()?;
        let mut level = self.height;
        loop {
            match node {
                Node::Inner(children) => node = children[digit(lbn, level)].as_deref_mut()?,
                Node::Leaf(entries) => return Some(&mut entries[digit(lbn, level)]),
            }
            level -= 1;
        }
    }

    /// Drop the pending list of `lbn`, returning it.
    pub(crate) fn remove(&mut self, lbn: &u64) -> Option<PendingList> {
        if *lbn < FLAT_MAX {
            let i = *lbn as usize;
            if !self.flat_has(i) {
                return None;
            }
            self.flat_used[i / 64] &= !(1 << (i % 64));
            self.flat_count -= 1;
            return Some(std::mem::take(&mut self.flat[i]));
        }
        let entry = self.existing_entry_mut(*lbn)?;
        let i = match std::mem::take(entry) {
            0 => return None,
            i => i as usize - 1,
        };
        self.free.push(i as u32);
        self.slots.get_mut(i).take().map(|(_, list)| list)
    }

    /// Indexes of the used flat entries.
    fn flat_indexes(used: &[u64]) -> impl Iterator<Item = usize> + '_ {
        used.iter().enumerate().flat_map(|(w, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(w * 64 + bit)
            })
        })
    }

    /// Every (lbn, pending list), in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &PendingList)> {
        let flat = Self::flat_indexes(&self.flat_used).map(|i| (i as u64, &self.flat[i]));
        flat.chain(self.slots.iter().flatten().map(|(lbn, list)| (*lbn, list)))
    }

    /// Every (lbn, pending list), mutable.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut PendingList)> {
        let used = &self.flat_used;
        let flat = self
            .flat
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| used[i / 64] & (1 << (i % 64)) != 0)
            .map(|(i, list)| (i as u64, list));
        let tree = self
            .slots
            .iter_mut()
            .flatten()
            .map(|(lbn, list)| (*lbn, list));
        flat.chain(tree)
    }

    /// Every pending list.
    pub(crate) fn values(&self) -> impl Iterator<Item = &PendingList> {
        self.iter().map(|(_, list)| list)
    }

    /// Every pending list, mutable.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut PendingList> {
        self.iter_mut().map(|(_, list)| list)
    }

    /// Every block with a pending list.
    pub(crate) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(lbn, _)| lbn)
    }

    /// Keep only the lists for which `keep` is true.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, &mut PendingList) -> bool) {
        let gone: Vec<u64> = self
            .iter_mut()
            .filter_map(|(lbn, list)| (!keep(lbn, list)).then_some(lbn))
            .collect();
        for lbn in gone {
            self.remove(&lbn);
        }
    }

    /// Take every (lbn, list) out, leaving the index empty.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (u64, PendingList)> {
        let mut index = std::mem::take(self);
        let flat: Vec<(u64, PendingList)> = Self::flat_indexes(&index.flat_used)
            .map(|i| (i as u64, std::mem::take(&mut index.flat[i])))
            .collect();
        let slots = std::mem::take(&mut index.slots);
        let len = slots.len;
        flat.into_iter().chain(
            slots
                .chunks
                .into_iter()
                .flat_map(|c| c.into_iter())
                .take(len)
                .flatten(),
        )
    }

    /// Number of blocks with a pending list (the tests' view of the index).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.flat_count + self.slots.len - self.free.len()
    }

    /// No block has a pending list.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> IntoIterator for &'a PendingIndex {
    type Item = (u64, &'a PendingList);
    type IntoIter = Box<dyn Iterator<Item = (u64, &'a PendingList)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tlvi::Version;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn version(pbn: u64) -> Version {
        Version {
            pbn,
            bitmap: 1,
            txid: 1,
            committed: true,
            slot: pbn,
            ptr_addr: 0,
            time: 0,
            from_permanent: false,
        }
    }

    #[test]
    fn grows_with_the_file_and_finds_every_block() {
        let mut index = PendingIndex::default();
        for lbn in [0u64, 63, 64, 4095, 4096, 1 << 30, (1 << 34) - 1] {
            index.list_mut(lbn).push(version(lbn + 1));
        }
        assert_eq!(index.len(), 7);
        for lbn in [0u64, 63, 64, 4095, 4096, 1 << 30, (1 << 34) - 1] {
            assert_eq!(index.get(&lbn).map(|l| l[0].pbn), Some(lbn + 1));
        }
        assert!(index.get(&1).is_none() && index.get(&(1 << 40)).is_none());
        assert_eq!(index.remove(&64).map(|l| l.len()), Some(1));
        assert!(index.get(&64).is_none());
        index.list_mut(65).push(version(9));
        assert_eq!(index.len(), 7, "the freed slot is reused");
        let drained: Vec<_> = index.drain().collect();
        assert_eq!(drained.len(), 7);
        assert!(index.is_empty() && index.get(&0).is_none());
    }

    proptest! {
        /// Against a HashMap model: inserts, pushes, removes and retains give the same map.
        #[test]
        fn matches_a_hash_map(ops in proptest::collection::vec((0u8..4, 0u64..300, 0u8..3), 1..200)) {
            let mut index = PendingIndex::default();
            let mut model: HashMap<u64, Vec<u64>> = HashMap::new();
            for (op, lbn, part) in ops {
                // The flat array, both sides of its end, the tree.
                let lbn = match part {
                    0 => lbn,
                    1 => FLAT_MAX - 150 + lbn,
                    _ => lbn << 20,
                };
                match op {
                    0 | 1 => {
                        index.list_mut(lbn).push(version(lbn));
                        model.entry(lbn).or_default().push(lbn);
                    }
                    2 => {
                        prop_assert_eq!(index.remove(&lbn).is_some(), model.remove(&lbn).is_some());
                    }
                    _ => {
                        index.retain(|l, _| l % 3 != lbn % 3);
                        model.retain(|l, _| l % 3 != lbn % 3);
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                for (l, v) in &model {
                    prop_assert_eq!(index.get(l).map(|x| x.len()), Some(v.len()));
                }
                let mut keys: Vec<u64> = index.keys().collect();
                keys.sort_unstable();
                let mut want: Vec<u64> = model.keys().copied().collect();
                want.sort_unstable();
                prop_assert_eq!(keys, want);
            }
        }
    }
}
