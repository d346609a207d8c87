//! A free list of fixed slots (index entries, per-file metadata slots, transaction records,
//! intent records) with a shadow set of which slots are free, so that giving back a slot
//! that is already free, or taking one the list does not own, trips an assertion at once
//! instead of handing one slot to two owners later. One bit a slot; every check is O(1), so
//! the assertions stay on in release.

/// See the module documentation.
pub(crate) struct FreeSlots {
    /// Free slots, the next one to hand out last.
    stack: Vec<u32>,
    /// `free[i]`: slot `i` is on `stack`.
    free: Vec<bool>,
}

impl FreeSlots {
    /// Slots `0..count`, all free; `pop` hands out the lowest first.
    pub(crate) fn all_free(count: u32) -> Self {
        FreeSlots {
            stack: (0..count).rev().collect(),
            free: vec![true; count as usize],
        }
    }

    /// Take a free slot (`None` when none is left).
    pub(crate) fn pop(&mut self) -> Option<u32> {
        let slot = self.stack.pop()?;
        let was_free = self.free.get_mut(slot as usize).map(std::mem::take);
        assert_eq!(was_free, Some(true), "free list held slot {slot}, not free");
        Some(slot)
    }

    /// Give slot `slot` back. Panics if it is already free or out of range (a double free).
    pub(crate) fn push(&mut self, slot: u32) {
        let was_free = self
            .free
            .get_mut(slot as usize)
            .map(|f| std::mem::replace(f, true));
        assert_eq!(
            was_free,
            Some(false),
            "slot {slot} freed twice (or out of range)"
        );
        self.stack.push(slot);
    }

    /// Free slots left.
    pub(crate) fn len(&self) -> usize {
        self.stack.len()
    }
}

impl Extend<u32> for FreeSlots {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, slots: I) {
        for slot in slots {
            self.push(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FreeSlots;

    #[test]
    fn hands_out_each_slot_once_lowest_first() {
        let mut s = FreeSlots::all_free(3);
        assert_eq!(
            (s.pop(), s.pop(), s.pop(), s.pop()),
            (Some(0), Some(1), Some(2), None)
        );
        s.push(1);
        assert_eq!((s.len(), s.pop()), (1, Some(1)));
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn a_double_free_trips() {
        let mut s = FreeSlots::all_free(2);
        let a = s.pop();
        assert_eq!(a, Some(0));
        s.push(0);
        s.push(0);
    }

    #[test]
    #[should_panic(expected = "freed twice (or out of range)")]
    fn freeing_a_slot_never_handed_out_trips() {
        let mut s = FreeSlots::all_free(2);
        s.push(1);
    }
}
