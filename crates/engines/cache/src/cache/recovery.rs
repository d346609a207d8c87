//! Recovery (§5.2.5): scan the tags, roll incomplete multi-chunk writes back, settle the
//! slots, and restore the record invariants. Every step is idempotent, so a crash during
//! recovery is recovered by running it again.
//!
//! | state found                                              | action                         |
//! |----------------------------------------------------------|--------------------------------|
//! | a valid chunk with the not-complete bit (stamp T)        | T is incomplete                |
//! | a valid chunk with stamp T, T incomplete, no NC bit      | invalidate (first, backwards)  |
//! | a record whose size_stamp is incomplete                  | size = prev_size               |
//! | the NC chunk of T                                        | invalidate last                |
//! | two valid copies of one chunk (Case 2-1 cut before step 5)| keep the new one (N, stamp)   |
//! | a valid chunk of no live record, or wholly past the size | invalidate                     |
//! | a home file longer than its size, stamp unsettled (a shrink cut short) | truncate it      |
//! | a home file changed behind the cache, no dirty chunk     | drop its chunks, take its length |
//! | a home file changed behind the cache, dirty chunks       | a conflict for the store (home_state.rs) |
//!
//! Dirty chunks stay in PM and are flushed lazily; the dirty set, the stride table and the
//! stamp counter are rebuilt.

use super::Cache;
use crate::backing::Backing;
use crate::format::record::{self, FileRecord};
use crate::format::tag::KEY_MAX;
use crate::format::{Status, Tag, CHUNK_SIZE};

/// Largest file length a record may hold (2^60 bytes).
pub const SIZE_MAX: u64 = 1 << 60;
use pmem::Region;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use store::{Error, Result};

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub files: u64,
    pub valid_chunks: u64,
    pub dirty_chunks: u64,
    pub incomplete_writes: u64,
    pub chunks_rolled_back: u64,
    pub sizes_restored: u64,
    pub duplicates_settled: u64,
    pub orphans_dropped: u64,
    pub homes_truncated: u64,
    /// Home files changed behind the cache holding no dirty chunk: their chunks dropped.
    pub homes_adopted: u64,
    /// Stamps of the writes and transactions rolled back (their namespace intents are undone
    /// by the store; intents of other stamps are finished).
    pub incomplete: Vec<u64>,
}

impl<R: Region, B: Backing> Cache<R, B> {
    pub(crate) fn recover(&self) -> Result<RecoveryReport> {
        let mut report = RecoveryReport::default();
        let records = self.live_records()?;
        let tags = self.all_tags()?;
        let open_units = self.open_unit_words();
        let incomplete: BTreeSet<u64> = tags
            .iter()
            .filter(|(_, t)| t.valid() && t.not_complete())
            .map(|(_, t)| t.stamp)
            .chain(open_units.iter().map(|(_, stamp)| *stamp))
            .collect();
        report.incomplete_writes = incomplete.len() as u64;
        report.incomplete = incomplete.iter().copied().collect();
        self.roll_back(&tags, &records, &incomplete, &mut report);
        let tags = self.all_tags()?;
        self.settle_slots(&tags, &mut report)?;
        let tags = self.all_tags()?;
        self.drop_orphans(&tags, &records, &mut report);
        self.rebuild(&records, &mut report)?;
        report.homes_adopted = self.adopt_changed_homes()?;
        self.counters
            .homes_adopted
            .fetch_add(report.homes_adopted, Ordering::Relaxed);
        self.rebuild_free_intents();
        Ok(report)
    }

    /// Close the unit words of the transactions recovery rolled back — after the store undid
    /// their namespace intents (until then a crash recovers them again as incomplete).
    pub fn close_recovered_units(&self) {
        for (at, _) in self.used_unit_words() {
            // The stamp first: a record with its link cleared but its stamp set would read
            // as an open transaction of its own (a crash between the two stores).
            self.region.store_u64(at, 0);
            self.region.store_u64(at + 8, 0);
            // persist: the transaction is rolled back (or its group committed) and closed.
            self.region.persist(at, 16);
        }
        let g = self.geometry();
        *self.free_units.lock() = (0..g.units_max()).rev().collect();
    }

    /// Unit records in use: (offset, stamp).
    fn used_unit_words(&self) -> Vec<(u64, u64)> {
        (0..self.geometry().units_max())
            .map(|i| self.geometry().unit_at(i))
            .map(|at| (at, self.region.load_u64(at)))
            .filter(|(_, stamp)| *stamp != 0)
            .collect()
    }

    /// Units of transactions open at the crash: (offset, stamp). A unit linked to a group
    /// (a syncv in progress) is open while the group's record is; once the group's record is
    /// clear, the group committed and so did the unit.
    fn open_unit_words(&self) -> Vec<(u64, u64)> {
        let g = self.geometry();
        self.used_unit_words()
            .into_iter()
            .filter(|(at, _)| {
                let link = self.region.load_u64(at + 8);
                link == 0
                    || (link <= g.units_max() && self.region.load_u64(g.unit_at(link - 1)) != 0)
            })
            .collect()
    }

    /// Live records by key: (record index, record).
    fn live_records(&self) -> Result<HashMap<u64, (u64, FileRecord)>> {
        let mut out = HashMap::new();
        for i in 0..self.geometry().files_max() {
            let at = self.geometry().record_at(i);
            let r = FileRecord::read(&self.region, at);
            if r.key == 0 {
                continue;
            }
            if r.key > KEY_MAX || r.size > SIZE_MAX || r.prev_size > SIZE_MAX {
                return Err(Error::corrupt(
                    format!("cache: record {i} out of range"),
                    at,
                ));
            }
            if out.insert(r.key, (i, r)).is_some() {
                return Err(Error::corrupt(
                    format!("cache: key {} in two records", r.key),
                    at,
                ));
            }
        }
        Ok(out)
    }

    fn all_tags(&self) -> Result<Vec<(u64, Tag)>> {
        (0..self.geometry().chunks())
            .map(|c| {
                let tag = self.tag(c)?;
                if tag.valid() && (tag.index > SIZE_MAX / CHUNK_SIZE || tag.stamp == u64::MAX) {
                    let at = self.geometry().tag_at(c);
                    return Err(Error::corrupt(format!("cache tag {c} out of range"), at));
                }
                Ok((c, tag))
            })
            .collect()
    }

    fn invalidate(&self, chunk: u64, tag: &Tag) {
        self.set_status(
            chunk,
            &Tag {
                status: Status::default(),
                ..*tag
            },
        );
    }

    /// Undo incomplete writes: their other chunks (from the last, backwards), their length
    /// changes, then their not-complete chunks.
    fn roll_back(
        &self,
        tags: &[(u64, Tag)],
        records: &HashMap<u64, (u64, FileRecord)>,
        incomplete: &BTreeSet<u64>,
        report: &mut RecoveryReport,
    ) {
        for (chunk, tag) in tags.iter().rev() {
            if tag.valid() && !tag.not_complete() && incomplete.contains(&tag.stamp) {
                self.invalidate(*chunk, tag);
                report.chunks_rolled_back += 1;
            }
        }
        for (index, r) in records.values() {
            if r.size_stamp != 0 && incomplete.contains(&r.size_stamp) {
                let at = self.geometry().record_at(*index);
                self.region.store_u64(at + record::SIZE, r.prev_size);
                // persist: the incomplete write's length change is undone before its
                // not-complete chunk (its only witness) goes.
                self.region.persist(at + record::SIZE, 8);
                report.sizes_restored += 1;
            }
        }
        for (chunk, tag) in tags {
            if tag.valid() && tag.not_complete() {
                self.invalidate(*chunk, tag);
                report.chunks_rolled_back += 1;
            }
        }
    }

    /// Two valid copies of one chunk in a slot: keep the newer.
    fn settle_slots(&self, tags: &[(u64, Tag)], report: &mut RecoveryReport) -> Result<()> {
        for pair in tags.chunks(2) {
            let [(c0, t0), (c1, t1)] = pair else { continue };
            if t0.valid() && t1.holds(t0.key, t0.index) {
                let (chunk, tag) = if t0.stamp < t1.stamp {
                    (c0, t0)
                } else {
                    (c1, t1)
                };
                self.invalidate(*chunk, tag);
                report.duplicates_settled += 1;
            }
        }
        Ok(())
    }

    fn drop_orphans(
        &self,
        tags: &[(u64, Tag)],
        records: &HashMap<u64, (u64, FileRecord)>,
        report: &mut RecoveryReport,
    ) {
        for (chunk, tag) in tags {
            if !tag.valid() {
                continue;
            }
            let size = records.get(&tag.key).map(|(i, _)| {
                self.region
                    .load_u64(self.geometry().record_at(*i) + record::SIZE)
            });
            let past_end = size.is_none_or(|s| tag.index >= s.div_ceil(CHUNK_SIZE));
            if past_end {
                self.invalidate(*chunk, tag);
                report.orphans_dropped += 1;
            }
        }
    }

    /// DRAM state from the settled pool; home files longer than their size are truncated.
    fn rebuild(
        &self,
        records: &HashMap<u64, (u64, FileRecord)>,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let mut stamp_max = 0;
        let mut dirty = self.dirty.lock();
        for (chunk, tag) in self.all_tags()? {
            stamp_max = stamp_max.max(tag.stamp.min(u64::MAX - 1));
            if tag.valid() {
                report.valid_chunks += 1;
                if tag.dirty() {
                    dirty.insert(chunk);
                    report.dirty_chunks += 1;
                }
            }
        }
        drop(dirty);
        for (_, r) in records.values() {
            stamp_max = stamp_max.max(r.size_stamp.min(u64::MAX - 1));
        }
        self.next_stamp.store(stamp_max + 1, Ordering::Relaxed);
        let mut files = self.files.lock();
        for (key, (index, _)) in records {
            let r = FileRecord::read(&self.region, self.geometry().record_at(*index));
            files.insert(*key, *index, r.id, r.size);
            report.files += 1;
        }
        drop(files);
        for key in records.keys() {
            let f = self.file(*key)?;
            match self.backing.len(f.id) {
                Ok(home) if home > self.record(&f).size => {
                    if self.home_change(&f)?.is_some() {
                        // Changed behind the cache: never truncated here (home_state.rs).
                        continue;
                    }
                    // A shrink (or a committed transaction's) cut short: finish it.
                    self.begin_home_change(&f, super::home_state::Check::No)?;
                    let truncated = self.truncate_home(&f, self.record(&f).size);
                    self.end_home_change(&f, truncated.is_ok());
                    truncated?;
                    report.homes_truncated += 1;
                }
                Ok(_) => {}
                // A record whose home file is gone: the store drops it after recovery.
                Err(Error::NotFound(_)) => {}
                Err(e) => self.record_error(&e),
            }
        }
        Ok(())
    }
}
