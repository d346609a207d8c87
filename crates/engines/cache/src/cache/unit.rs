//! Transactions: a multi-chunk write across files and calls (§5.2.4 extended).
//!
//! A transaction is a unit with its own stamp and a unit word in the pool holding that stamp
//! while it is open (the commit record). Its chunks carry the stamp, keep their old copies
//! valid (C(1,0)) and pin their slots: another writer of those slots gets ENOSPC, the flusher
//! and Case 3 leave them alone. Its length changes record `prev_size`/`size_stamp`.
//!
//! Commit: clear the unit word (the commit point), then invalidate the old copies, then the
//! effects of a shrink (home file truncated, chunks past the length invalidated).
//! Abort: invalidate the unit's chunks, restore the lengths, then clear the unit word.
//! Recovery treats an open unit word's stamp like a not-complete bit: rolled back.

use super::files::FileState;
use super::write::{Mode, Written};
use super::Cache;
use crate::backing::Backing;
use crate::format::{record, Status, Tag, CHUNK_SIZE};
use pmem::Region;
use store::{Error, Result};

/// Where a transaction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitState {
    Open,
    Committed,
    Aborted,
}

/// An open transaction of the cache.
#[derive(Debug)]
pub struct Unit {
    stamp: u64,
    word: u64,
    state: UnitState,
    chunks: Vec<(u64, Option<u64>)>,
    /// Files the unit changed: (key, length before the unit, largest length it reached).
    files: Vec<(u64, u64, u64)>,
}

impl Unit {
    pub fn stamp(&self) -> u64 {
        self.stamp
    }
    pub fn state(&self) -> UnitState {
        self.state
    }
}

impl<R: Region, B: Backing> Cache<R, B> {
    /// Begin a transaction: its unit word holds its stamp (durable) from now on.
    pub fn begin(&self) -> Result<Unit> {
        let word = self.free_units.lock().pop().ok_or(Error::TooMany {
            what: "open cache transactions",
            max: self.geometry().units_max(),
        })?;
        let stamp = self.take_stamp();
        self.open_units.lock().insert(stamp);
        let at = self.geometry().unit_at(word);
        assert_eq!(
            self.region.load_u64(at),
            0,
            "cache: unit word {word} in use"
        );
        self.region.store_u64(at, stamp);
        // persist: the transaction is open before any of its chunks exists.
        self.region.persist(at, 8);
        Ok(Unit {
            stamp,
            word,
            state: UnitState::Open,
            chunks: Vec::new(),
            files: Vec::new(),
        })
    }

    fn note_file(&self, unit: &mut Unit, key: u64, old: u64) {
        if !unit.files.iter().any(|(k, _, _)| *k == key) {
            unit.files.push((key, old, old));
        }
    }

    /// Write `data` at `off` of file `key` as part of `unit`.
    pub fn write_in(&self, unit: &mut Unit, key: u64, off: u64, data: &[u8]) -> Result<()> {
        assert_eq!(
            unit.state,
            UnitState::Open,
            "cache: write in a finished unit"
        );
        if data.is_empty() {
            return Ok(());
        }
        off.checked_add(data.len() as u64)
            .filter(|&e| e <= super::recovery::SIZE_MAX)
            .ok_or_else(|| Error::FileTooLarge(format!("write at {off}")))?;
        let f = self.file(key)?;
        let _op = f.op.lock();
        let cur = self.record(&f).size;
        self.note_file(unit, key, cur);
        if off > cur {
            self.zero_gap_in(unit, &f, key, cur, off)?;
        }
        let cur = self.record(&f).size;
        let mut done = Vec::new();
        let result = self.write_locked(&f, key, off, data, unit.stamp, Mode::Unit, cur, &mut done);
        // Chunks written before a failure belong to the unit: its abort removes them.
        self.remember(unit, done);
        Self::reached(unit, key, self.record(&f).size);
        result
    }

    /// The file `key` now has length `len`: the largest length the unit reached grows.
    fn reached(unit: &mut Unit, key: u64, len: u64) {
        for (k, _, max) in unit.files.iter_mut() {
            if *k == key {
                *max = (*max).max(len);
            }
        }
    }

    fn remember(&self, unit: &mut Unit, done: Vec<Written>) {
        for w in done {
            if !unit.chunks.iter().any(|(c, _)| *c == w.chunk) {
                unit.chunks.push((w.chunk, w.superseded));
            }
        }
    }

    /// Zero `[cur, new)` where stale bytes may lie: the rest of `cur`'s chunk, and, after a
    /// shrink by this unit, everything up to the largest length the file had (before or in
    /// the unit: old chunks, the unit's own chunks and home bytes stay until the commit).
    fn zero_gap_in(
        &self,
        unit: &mut Unit,
        f: &FileState,
        key: u64,
        cur: u64,
        new: u64,
    ) -> Result<()> {
        let rec = self.record(f);
        let mut stale_end = cur.div_ceil(CHUNK_SIZE) * CHUNK_SIZE;
        if rec.size_stamp == unit.stamp {
            let reach = unit
                .files
                .iter()
                .filter(|(k, _, _)| *k == key)
                .map(|(_, before, max)| (*before).max(*max))
                .max()
                .unwrap_or(0);
            let reach = reach.max(rec.prev_size);
            stale_end = stale_end.max(reach.div_ceil(CHUNK_SIZE) * CHUNK_SIZE);
        }
        let mut pos = cur;
        let stop = new.min(stale_end);
        while pos < stop {
            let hi = stop.min((pos / CHUNK_SIZE + 1) * CHUNK_SIZE);
            let zeros = vec![0u8; (hi - pos) as usize];
            let size = self.record(f).size;
            let mut done = Vec::new();
            let result =
                self.write_locked(f, key, pos, &zeros, unit.stamp, Mode::Unit, size, &mut done);
            self.remember(unit, done);
            Self::reached(unit, key, self.record(f).size);
            result?;
            pos = hi;
        }
        Ok(())
    }

    /// Set the length of file `key` as part of `unit`.
    pub fn set_len_in(&self, unit: &mut Unit, key: u64, len: u64) -> Result<()> {
        assert_eq!(
            unit.state,
            UnitState::Open,
            "cache: set_len in a finished unit"
        );
        if len > super::recovery::SIZE_MAX {
            return Err(Error::FileTooLarge(format!("length {len}")));
        }
        let f = self.file(key)?;
        let _op = f.op.lock();
        let cur = self.record(&f).size;
        self.note_file(unit, key, cur);
        if len > cur {
            self.zero_gap_in(unit, &f, key, cur, len)?;
        }
        let rec_at = self.geometry().record_at(f.record);
        self.mark_size_change(rec_at, unit.stamp, cur);
        let now = self.record(&f).size;
        self.region.store_u64(rec_at + record::SIZE, len);
        // persist: the new length, undone by abort or recovery while the unit is open.
        self.region.persist(rec_at + record::SIZE, 8);
        self.files.lock().resized(now, len);
        Self::reached(unit, key, now.max(len));
        Ok(())
    }

    /// Commit: every write and length change of the unit is durable and visible at once.
    pub fn commit(&self, unit: Unit) -> Result<()> {
        assert_eq!(
            unit.state,
            UnitState::Open,
            "cache: commit of a finished unit"
        );
        let at = self.geometry().unit_at(unit.word);
        assert_eq!(
            self.region.load_u64(at),
            unit.stamp,
            "cache: unit word changed"
        );
        self.region.store_u64(at, 0);
        // persist: the commit point — the unit's chunks and lengths are now the file's.
        self.region.persist(at, 8);
        self.finish_commit(unit)
    }

    /// Commit several units at once (syncv): each is linked to a group record, then clearing
    /// the group record is the one commit point of all of them.
    pub fn commit_group(&self, units: Vec<Unit>) -> Result<()> {
        if units.len() < 2 {
            return units.into_iter().try_for_each(|u| self.commit(u));
        }
        let group = self.begin()?;
        let g = self.geometry();
        for unit in &units {
            assert_eq!(
                unit.state,
                UnitState::Open,
                "cache: group commit of a finished unit"
            );
            let at = g.unit_at(unit.word);
            self.region.store_u64(at + 8, group.word + 1);
            self.region.flush(at + 8, 8);
        }
        // persist: every unit is linked to the group before the group commits.
        self.region.fence();
        let gat = g.unit_at(group.word);
        self.region.store_u64(gat, 0);
        // persist: the commit point of every unit of the group.
        self.region.persist(gat, 8);
        self.open_units.lock().remove(&group.stamp);
        for unit in units {
            let at = g.unit_at(unit.word);
            self.region.store_u64(at, 0);
            self.region.store_u64(at + 8, 0);
            // persist: the unit's record is free (its group committed).
            self.region.persist(at, 16);
            self.finish_commit(unit)?;
        }
        self.free_units.lock().push(group.word);
        Ok(())
    }

    /// After a unit's commit point: its old copies invalid, its lengths settled.
    fn finish_commit(&self, mut unit: Unit) -> Result<()> {
        self.open_units.lock().remove(&unit.stamp);
        self.free_units.lock().push(unit.word);
        for (chunk, old) in &unit.chunks {
            let (Some(old), new) = (old, self.tag(*chunk)?) else {
                continue;
            };
            let _g = self.lock_slot(old / 2);
            let t = self.tag(*old)?;
            if t.valid() && t.key == new.key && t.index == new.index && t.stamp != unit.stamp {
                self.set_status(
                    *old,
                    &Tag {
                        status: Status::default(),
                        ..t
                    },
                );
            }
        }
        for (key, before, max) in &unit.files {
            if self.file(*key).is_ok() {
                self.settle_length(*key, (*before).max(*max))?;
            }
        }
        unit.state = UnitState::Committed;
        assert_eq!(unit.state, UnitState::Committed);
        Ok(())
    }

    /// After a committed length change: the home file no longer than the length, no chunk
    /// past it (up to `reach`, the largest length the file had during the unit).
    fn settle_length(&self, key: u64, reach: u64) -> Result<()> {
        let f = self.file(key)?;
        let _op = f.op.lock();
        let size = self.record(&f).size;
        if self.backing.len(f.id)? > size {
            self.begin_home_change(&f, super::home_state::Check::No)?;
            let truncated = {
                let _home = f.home.lock();
                self.truncate_home(&f, size)
            };
            self.end_home_change(&f, truncated.is_ok());
            truncated?;
        }
        self.invalidate_from(key, size.div_ceil(CHUNK_SIZE), reach.max(size))
    }

    /// Abort: none of the unit's writes or length changes remain.
    pub fn abort(&self, mut unit: Unit) -> Result<()> {
        assert_eq!(
            unit.state,
            UnitState::Open,
            "cache: abort of a finished unit"
        );
        for (chunk, _) in unit.chunks.iter().rev() {
            let _g = self.lock_slot(chunk / 2);
            let t = self.tag(*chunk)?;
            if t.valid() && t.stamp == unit.stamp {
                self.set_status(
                    *chunk,
                    &Tag {
                        status: Status::default(),
                        ..t
                    },
                );
            }
        }
        for (key, before, _) in &unit.files {
            // A file the transaction created is already gone (its create was undone).
            let Ok(f) = self.file(*key) else { continue };
            let rec_at = self.geometry().record_at(f.record);
            let now = self.record(&f).size;
            self.region.store_u64(rec_at + record::SIZE, *before);
            // persist: the length before the unit is back.
            self.region.persist(rec_at + record::SIZE, 8);
            self.files.lock().resized(now, *before);
        }
        let at = self.geometry().unit_at(unit.word);
        self.region.store_u64(at, 0);
        // persist: the unit is closed; nothing of it remains.
        self.region.persist(at, 8);
        self.open_units.lock().remove(&unit.stamp);
        self.free_units.lock().push(unit.word);
        unit.state = UnitState::Aborted;
        Ok(())
    }
}
