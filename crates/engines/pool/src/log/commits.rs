//! What committed transactions still owe the log (ordering property 2, seed §III-E): a
//! record per transaction with data entries left, counted down by the checkpoint as it
//! frees them; the last one hands the record back so that its undo, member and commit
//! entries can be freed.
//!
//! A commit pushes its record to an incoming list (one short lock, never a wait for a
//! checkpoint thread's walk of the table); the checkpoint moves the list into the table
//! when it counts down.

use crate::sharing::Padded;
use parking_lot::Mutex;
use smallvec::SmallVec;

/// The committed-transaction records of a pool.
#[derive(Default)]
pub(crate) struct Commits {
    /// Records by txid: taken by the checkpoint threads only (and recovery).
    committed: Padded<Mutex<Committed>>,
    /// Records a commit just made, waiting to move into `committed` (the next checkpoint
    /// batch moves them).
    incoming: Padded<Mutex<Vec<(u64, CommitRecord)>>>,
}

impl Commits {
    /// A commit's record (transaction `txid` has data entries left).
    pub(crate) fn push(&self, txid: u64, record: CommitRecord) {
        assert!(record.data_remaining > 0, "record of {txid} owes nothing");
        self.incoming.lock().push((txid, record));
    }

    /// One data entry of committed transaction `txid` has been freed durably; returns its
    /// record when that was the last one (the caller retires it).
    pub(crate) fn entry_done(&self, txid: u64) -> Option<CommitRecord> {
        let mut committed = self.committed.lock();
        committed.take_in(&self.incoming);
        committed.table.entry_done(txid)
    }

    /// Data entries of the committed transactions `txids` (one per entry) have been freed
    /// durably; returns the records of the transactions whose last entry that was.
    pub(crate) fn entries_done(&self, txids: &[u64]) -> Vec<CommitRecord> {
        let mut done = Vec::new();
        let mut committed = self.committed.lock();
        committed.take_in(&self.incoming);
        for &txid in txids {
            done.extend(committed.table.entry_done(txid));
        }
        done
    }

    /// No record waiting (every committed transaction's data entries are gone)?
    pub(crate) fn is_empty(&self) -> bool {
        self.committed.lock().table.is_empty() && self.incoming.lock().is_empty()
    }

    /// Records waiting (recovery, which owns the pool alone).
    pub(crate) fn len_mut(&mut self) -> usize {
        self.committed.get_mut().table.len() + self.incoming.get_mut().len()
    }

    /// Recovery: the records of the committed transactions it kept, in txid order.
    pub(crate) fn load(&mut self, records: Vec<(u64, CommitRecord)>) {
        let table = &mut self.committed.get_mut().table;
        assert!(
            table.is_empty(),
            "records are loaded once, into an empty table"
        );
        for (txid, record) in records {
            assert!(record.data_remaining > 0, "record of {txid} owes nothing");
            table.insert(txid, record);
        }
    }
}

/// What a transaction still owes the log after its commit point (ordering property 2): its
/// undo, member and commit entries are freed once its last data entry has been checkpointed.
pub(crate) struct CommitRecord {
    pub(crate) data_remaining: u64,
    pub(crate) commit_slot: u64,
    /// Inline for the few undo entries of an ordinary transaction (no allocation).
    pub(crate) undo_slots: SmallVec<[u64; 4]>,
    pub(crate) member_slots: SmallVec<[u64; 2]>,
}

/// The committed-transaction records and a spare vector that is swapped with
/// `Commits::incoming` (so that neither side allocates on the way).
#[derive(Default)]
struct Committed {
    table: CommitTable,
    spare: Vec<(u64, CommitRecord)>,
}

impl Committed {
    /// Move the records waiting in `incoming` into the table.
    pub(crate) fn take_in(&mut self, incoming: &Mutex<Vec<(u64, CommitRecord)>>) {
        std::mem::swap(&mut self.spare, &mut *incoming.lock());
        for (txid, record) in self.spare.drain(..) {
            self.table.insert(txid, record);
        }
    }
}

/// Largest gap of unused ids a record's insertion may open at the end of the window (a
/// record further out goes to `CommitTable::far`, so that sparse ids, e.g. after a
/// recovery, never size the window).
const WINDOW_GAP_MAX: u64 = 1 << 16;

/// Most ids the window spans (64 MB): a transaction whose entries stay long behind every
/// later one's cannot make it grow without bound; ids past this go to `CommitTable::far`.
const WINDOW_LEN_MAX: u64 = 1 << 22;

/// One id of the window (8 bytes): the data entries its transaction still owes, and its
/// record: `EMPTY` (no committed transaction with that id is waiting), a slab index with
/// `IN_SLAB` set, or else the commit entry's slot itself, for the common record that has
/// nothing but a commit slot (no undo or member entries), which then needs no slab access.
#[derive(Clone, Copy)]
struct WindowSlot {
    remaining: u32,
    record: u32,
}

const EMPTY: u32 = u32::MAX;
const IN_SLAB: u32 = 1 << 31;

/// The committed transactions waiting for their data entries to be checkpointed, by id.
///
/// The checkpoint counts down a transaction's data entries for every entry it frees, so the
/// lookup by id is on its hot path. Ids are handed out in increasing order and transactions
/// commit in about that order, so the table is a window over the ids from the oldest one
/// still waiting: one array step per lookup and the count in the window itself (a B-tree
/// took a cache miss per level, 16 % of the checkpoint thread's time at 0-4 KB values). A
/// record with undo or member entries sits in a slab, touched only when its transaction is
/// done; one with only a commit entry lives in its window slot. A record whose id is below
/// the window (its transaction committed after the window had moved past it) or far beyond
/// its end, or whose counts do not fit, goes to a small ordered map instead.
#[derive(Default)]
struct CommitTable {
    /// Id of `window[0]`.
    base: u64,
    window: std::collections::VecDeque<WindowSlot>,
    slab: Vec<Option<CommitRecord>>,
    free: Vec<u32>,
    far: std::collections::BTreeMap<u64, CommitRecord>,
    len: usize,
}

impl CommitTable {
    /// No record waiting?
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Add the record of committed transaction `txid` (an id not in the table).
    pub(crate) fn insert(&mut self, txid: u64, record: CommitRecord) {
        self.len += 1;
        if self.window.is_empty() {
            self.base = txid;
        }
        let at = txid.checked_sub(self.base).filter(|&at| {
            at < self.window.len() as u64 + WINDOW_GAP_MAX
                && at < WINDOW_LEN_MAX
                && record.data_remaining < u64::from(EMPTY)
                && self.slab.len() < IN_SLAB as usize - 1
        });
        let Some(at) = at else {
            self.far.insert(txid, record);
            return;
        };
        let at = at as usize;
        if at >= self.window.len() {
            self.window.resize(
                at + 1,
                WindowSlot {
                    remaining: 0,
                    record: EMPTY,
                },
            );
        }
        assert!(
            self.window[at].record == EMPTY,
            "transaction {txid} committed twice"
        );
        let remaining = record.data_remaining as u32;
        let inline = record.undo_slots.is_empty()
            && record.member_slots.is_empty()
            && record.commit_slot < u64::from(IN_SLAB);
        let tag = if inline {
            record.commit_slot as u32
        } else {
            let index = match self.free.pop() {
                Some(i) => {
                    self.slab[i as usize] = Some(record);
                    i
                }
                None => {
                    self.slab.push(Some(record));
                    (self.slab.len() - 1) as u32
                }
            };
            index | IN_SLAB
        };
        self.window[at] = WindowSlot {
            remaining,
            record: tag,
        };
    }

    /// One data entry of transaction `txid` is gone: its record, taken out of the table,
    /// when that was its last one (None as well for an id not in the table).
    pub(crate) fn entry_done(&mut self, txid: u64) -> Option<CommitRecord> {
        let at = txid.wrapping_sub(self.base);
        match self.window.get_mut(at as usize) {
            Some(slot) if txid >= self.base && slot.record != EMPTY => {
                slot.remaining = slot.remaining.saturating_sub(1);
                if slot.remaining > 0 {
                    return None;
                }
                let tag = std::mem::replace(&mut slot.record, EMPTY);
                while self.window.front().is_some_and(|s| s.record == EMPTY) {
                    self.window.pop_front();
                    self.base += 1;
                }
                self.len -= 1;
                if tag & IN_SLAB == 0 {
                    return Some(CommitRecord {
                        data_remaining: 0,
                        commit_slot: u64::from(tag),
                        undo_slots: Default::default(),
                        member_slots: Default::default(),
                    });
                }
                let index = tag & !IN_SLAB;
                self.free.push(index);
                self.slab[index as usize].take()
            }
            _ => {
                let record = self.far.get_mut(&txid)?;
                record.data_remaining = record.data_remaining.saturating_sub(1);
                if record.data_remaining > 0 {
                    return None;
                }
                self.len -= 1;
                self.far.remove(&txid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CommitRecord, CommitTable, WINDOW_GAP_MAX};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A record of `n` data entries; every third id also has an undo entry (kept in the
    /// slab), the others only their commit slot (kept in the window).
    fn record(n: u64, slot: u64) -> CommitRecord {
        CommitRecord {
            data_remaining: n,
            commit_slot: slot,
            undo_slots: slot
                .is_multiple_of(3)
                .then_some(slot + 1)
                .into_iter()
                .collect(),
            member_slots: Default::default(),
        }
    }

    /// The commit and undo slots of a record the table gave back.
    fn slots(r: Option<CommitRecord>) -> Option<(u64, Vec<u64>)> {
        r.map(|r| (r.commit_slot, r.undo_slots.to_vec()))
    }

    #[test]
    fn late_far_and_in_window_records_all_count_down() {
        let mut table = CommitTable::default();
        table.insert(10, record(2, 10));
        table.insert(12, record(1, 12));
        assert_eq!(table.entry_done(12).map(|r| r.commit_slot), Some(12));
        assert!(table.entry_done(10).is_none());
        assert_eq!(table.entry_done(10).map(|r| r.commit_slot), Some(10));
        assert!(table.is_empty());
        // The window moved past 11 while it had not committed: it goes below the window.
        table.insert(13, record(1, 13));
        table.insert(11, record(1, 11));
        let far = 13 + 2 * WINDOW_GAP_MAX;
        table.insert(far, record(1, far));
        assert!(table.entry_done(7).is_none(), "unknown id");
        assert_eq!(table.entry_done(11).map(|r| r.commit_slot), Some(11));
        assert_eq!(table.entry_done(far).map(|r| r.commit_slot), Some(far));
        assert!(!table.is_empty());
        assert_eq!(table.entry_done(13).map(|r| r.commit_slot), Some(13));
        assert!(table.is_empty());
    }

    proptest! {
        /// Against a BTreeMap model: commits of increasing ids (some out of order, some far
        /// ahead) and entry completions in any order free the same records at the same time.
        #[test]
        fn matches_an_ordered_map(ops in proptest::collection::vec((0u8..4, 1u64..4, 0u64..40), 1..300)) {
            let mut table = CommitTable::default();
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            let mut next = 1u64;
            let mut held: Vec<u64> = Vec::new();
            for (op, n, pick) in ops {
                match op {
                    // Commit the next id, or hold it back to commit after later ones.
                    0 | 1 => {
                        let id = next;
                        next += 1;
                        if op == 1 && pick % 3 == 0 {
                            held.push(id);
                        } else {
                            table.insert(id, record(n, id));
                            model.insert(id, n);
                        }
                    }
                    // A held-back id commits now (below the window or inside it), or an id
                    // far beyond the window's end.
                    2 => {
                        let id = match held.pop() {
                            Some(id) => id,
                            None => {
                                next += WINDOW_GAP_MAX + pick;
                                next - 1
                            }
                        };
                        table.insert(id, record(n, id));
                        model.insert(id, n);
                    }
                    // One data entry of a committed (or unknown) transaction is freed.
                    _ => {
                        let id = model
                            .keys()
                            .nth(pick as usize % model.len().max(1))
                            .copied()
                            .unwrap_or(next + 1);
                        let expect = match model.get_mut(&id) {
                            Some(left) => {
                                *left -= 1;
                                *left == 0
                            }
                            None => false,
                        };
                        if expect {
                            model.remove(&id);
                        }
                        let got = slots(table.entry_done(id));
                        prop_assert_eq!(got, expect.then(|| slots(Some(record(1, id)))).flatten());
                    }
                }
                prop_assert_eq!(table.is_empty(), model.is_empty());
            }
            // Draining everything frees each record exactly once.
            for (id, left) in model {
                for k in 1..=left {
                    let got = table.entry_done(id);
                    prop_assert_eq!(got.is_some(), k == left);
                }
            }
            prop_assert!(table.is_empty());
        }
    }
}
