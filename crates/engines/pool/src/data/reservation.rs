//! What a write reserved before it changed anything (`Core::reserve`, data/write_plan.rs),
//! and what an operation does when the free lists fall short.
//!
//! A write takes the blocks and log slots it may need in one batch before its first change;
//! its allocations draw from the reservation first, and what is left goes back to the free
//! lists when the write ends. Empty between operations.

use crate::alloc::FreeList;
use crate::data::write_plan::Needs;
use store::{Error, Result};

/// What an operation does when it finds too few free blocks or log slots before it has
/// changed anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Shortage {
    /// Doom the transaction, as a full pool does.
    #[default]
    Dooms,
    /// Fail and record it: the caller makes room and runs the operation again (another
    /// thread may have taken the room the caller had made).
    MayRetry,
    /// The operation failed short of room (recorded under `MayRetry`).
    FellShort,
}

/// Numbers a write took for itself before it changed anything.
#[derive(Default)]
pub(crate) struct Reservation {
    blocks: Vec<u64>,
    slots: Vec<u64>,
    /// Metadata-log slots for the write's undo entries (an upper bound: what it does not
    /// take goes back).
    meta: Vec<u64>,
    shortage: Shortage,
}

impl Reservation {
    /// Nothing reserved.
    pub(crate) fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.slots.is_empty() && self.meta.is_empty()
    }

    /// The blocks and data-log slots are all taken (what a write that succeeded leaves).
    pub(crate) fn data_taken(&self) -> bool {
        self.blocks.is_empty() && self.slots.is_empty()
    }

    pub(crate) fn pop_block(&mut self) -> Option<u64> {
        self.blocks.pop()
    }

    pub(crate) fn pop_slot(&mut self) -> Option<u64> {
        self.slots.pop()
    }

    pub(crate) fn pop_meta(&mut self) -> Option<u64> {
        self.meta.pop()
    }

    /// The next `n` blocks `pop_block` hands out, in that order.
    pub(crate) fn next_blocks(&self, n: usize) -> impl Iterator<Item = &u64> {
        self.blocks.iter().rev().take(n)
    }

    /// Take `needs` from the free lists in one batch; short of any of it, nothing is kept.
    pub(crate) fn take(
        &mut self,
        needs: Needs,
        blocks: &FreeList,
        data_slots: &FreeList,
        meta_slots: &FreeList,
    ) -> Result<()> {
        assert!(
            self.is_empty(),
            "a write reserves once, before it changes anything"
        );
        let Needs {
            blocks: b,
            slots: s,
            meta: m,
        } = needs;
        let error = if s > 0 && !data_slots.alloc_many(s, &mut self.slots) {
            Error::LogFull(format!("data log ({s} entries wanted by a write)"))
        } else if m > 0 && !meta_slots.alloc_many(m, &mut self.meta) {
            Error::LogFull(format!("metadata log ({m} entries wanted by a write)"))
        } else if b > 0 && !blocks.alloc_many(b, &mut self.blocks) {
            Error::NoSpace(format!("{b} free blocks wanted by a write"))
        } else {
            return Ok(());
        };
        self.give_back(blocks, data_slots, meta_slots);
        Err(error)
    }

    /// Give back to the free lists what is left (nothing was written to it).
    pub(crate) fn give_back(&mut self, blocks: &FreeList, data_slots: &FreeList, meta: &FreeList) {
        blocks.free_many(&self.blocks);
        self.blocks.clear();
        data_slots.free_many(&self.slots);
        self.slots.clear();
        meta.free_many(&self.meta);
        self.meta.clear();
    }

    /// Whether the running operation may fail short of room and be run again.
    pub(crate) fn allow_retry(&mut self, may_retry: bool) {
        self.shortage = if may_retry {
            Shortage::MayRetry
        } else {
            Shortage::Dooms
        };
    }

    /// The operation found too few free numbers before it changed anything: true when it
    /// may be retried (recorded for `take_shortage`), false when the caller must doom the
    /// transaction.
    pub(crate) fn fell_short(&mut self) -> bool {
        if self.shortage == Shortage::Dooms {
            return false;
        }
        self.shortage = Shortage::FellShort;
        true
    }

    /// End of the operation: whether it fell short; retries are off again.
    pub(crate) fn take_shortage(&mut self) -> bool {
        std::mem::take(&mut self.shortage) == Shortage::FellShort
    }
}

#[cfg(test)]
mod tests {
    use super::Reservation;
    use crate::alloc::FreeList;
    use crate::data::write_plan::Needs;

    #[test]
    fn a_reservation_is_all_or_nothing() {
        let (blocks, slots, meta) = (
            FreeList::new(8, |_| true),
            FreeList::new(8, |_| true),
            FreeList::new(8, |_| true),
        );
        let mut r = Reservation::default();
        let needs = Needs {
            blocks: 9,
            slots: 2,
            meta: 1,
        };
        assert!(r.take(needs, &blocks, &slots, &meta).is_err());
        assert!(r.is_empty());
        assert_eq!((slots.free_count(), meta.free_count()), (8, 8));
        let needs = Needs { blocks: 3, ..needs };
        r.take(needs, &blocks, &slots, &meta).expect("room");
        assert_eq!(blocks.free_count(), 5);
        assert!(r.pop_block().is_some() && !r.data_taken());
        r.give_back(&blocks, &slots, &meta);
        assert!(r.is_empty());
        assert_eq!(blocks.free_count(), 7, "the popped block stays taken");
    }

    #[test]
    fn a_shortage_is_retried_only_when_allowed() {
        let mut r = Reservation::default();
        assert!(!r.fell_short(), "by default a shortage dooms");
        r.allow_retry(true);
        assert!(r.fell_short());
        assert!(r.take_shortage());
        assert!(!r.take_shortage() && !r.fell_short());
    }
}
