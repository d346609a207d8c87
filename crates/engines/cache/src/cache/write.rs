//! Writes: the seed's cases for one chunk (§5.2.2, Algorithm 1) and multi-chunk writes made
//! atomic by the not-complete bit and a shared timestamp (§5.2.4).
//!
//! A write of one chunk that does not grow the file follows Algorithm 1 exactly: the old
//! copy (Case 2-1) is invalidated right after the new one is valid. A write of several
//! chunks, or one that grows the file, is a multi-chunk write: every chunk gets the write's
//! stamp, the first one also the not-complete bit, and the old copies stay valid (C(1,0))
//! until the write completes; completing clears the not-complete bit (the commit point),
//! then invalidates the old copies. The slots of a multi-chunk write are locked from the
//! first to the last for its whole duration, as in the seed.

use super::files::FileState;
use super::Cache;
use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::record;
use crate::format::{Status, Tag, CHUNK_SIZE};
use crate::slot::pair::Plan;
use crate::slot::WriteCase;
use pmem::Region;
use store::{Error, Result};

/// How a write's chunks are made atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One chunk, no growth: Algorithm 1 as is.
    Single,
    /// The not-complete bit on the first chunk; old copies kept until completion.
    MultiChunk,
    /// Part of an open transaction (its unit word is the commit record); old copies kept.
    Unit,
}

/// What a chunk write left behind.
pub struct Written {
    pub chunk: u64,
    /// The old copy, still valid, that completing the write invalidates.
    pub superseded: Option<u64>,
}

impl<R: Region, B: Backing> Cache<R, B> {
    /// Write `data` at `off` of file `key`: durable in PM when this returns.
    pub fn write(&self, key: u64, off: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = off
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::FileTooLarge(format!("write at {off} overflows")))?;
        if end > super::recovery::SIZE_MAX {
            return Err(Error::FileTooLarge(format!("write ending at {end}")));
        }
        let f = self.file(key)?;
        let _op = f.op.lock();
        let old = self.record(&f).size;
        let (first, last) = (off / CHUNK_SIZE, (end - 1) / CHUNK_SIZE);
        if last - first + 1 > self.geometry().slots() {
            return Err(Error::FileTooLarge(format!(
                "a write of {} bytes spans more chunks than the cache has slots ({})",
                data.len(),
                self.geometry().slots()
            )));
        }
        if off > old {
            self.zero_tail(&f, key, old, off)?;
        }
        let multi = last > first || end > old;
        let stamp = self.take_stamp();
        let mode = if multi {
            Mode::MultiChunk
        } else {
            Mode::Single
        };
        let mut done = Vec::new();
        if let Err(e) = self.write_locked(&f, key, off, data, stamp, mode, old, &mut done) {
            self.undo_partial(&f, &done, stamp, old)?;
            return Err(e);
        }
        if multi {
            self.complete(&done)?;
            Counters::bump(&self.counters.multi_chunk_writes);
        }
        let written: Vec<u64> = done.iter().map(|w| w.chunk).collect();
        if self.config.flush_period == Some(std::time::Duration::ZERO) {
            self.flush_chunks(written.into_iter().collect())?;
        }
        Ok(())
    }

    /// Lock the write's slots (in ascending order), write every chunk and the new length.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_locked(
        &self,
        f: &FileState,
        key: u64,
        off: u64,
        data: &[u8],
        stamp: u64,
        mode: Mode,
        old: u64,
        done: &mut Vec<Written>,
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let (first, last) = (off / CHUNK_SIZE, (end - 1) / CHUNK_SIZE);
        let mut slots: Vec<u64> = (first..=last).map(|i| self.slot_of(key, i)).collect();
        slots.sort_unstable();
        slots.dedup();
        let _guards: Vec<_> = slots.iter().map(|&s| self.lock_slot(s)).collect();
        let rec_at = self.geometry().record_at(f.record);
        if end > old {
            self.mark_size_change(rec_at, stamp, old);
        }
        for index in first..=last {
            let start = index * CHUNK_SIZE;
            let lo = off.max(start);
            let hi = end.min(start + CHUNK_SIZE);
            let piece = &data[(lo - off) as usize..(hi - off) as usize];
            let nc = mode == Mode::MultiChunk && index == first;
            let keep_old = mode != Mode::Single;
            done.push(self.write_chunk(f, key, index, lo - start, piece, stamp, nc, keep_old)?);
        }
        if end > old {
            self.region.store_u64(rec_at + record::SIZE, end);
            // persist: the new length (undone by recovery while the write is not complete).
            self.region.persist(rec_at + record::SIZE, 8);
            self.files.lock().resized(old, end);
        }
        Ok(())
    }

    /// A multi-chunk write failed part way (a forced flush failed, a slot is held): undo
    /// what it wrote, as recovery would — its chunks, not-complete one last, and its length.
    fn undo_partial(&self, f: &FileState, done: &[Written], stamp: u64, old: u64) -> Result<()> {
        for w in done.iter().rev() {
            let t = self.tag(w.chunk)?;
            if t.valid() && t.stamp == stamp {
                self.set_status(
                    w.chunk,
                    &Tag {
                        status: Status::default(),
                        ..t
                    },
                );
            }
        }
        let rec_at = self.geometry().record_at(f.record);
        if self.region.load_u64(rec_at + record::SIZE) != old {
            self.region.store_u64(rec_at + record::SIZE, old);
            // persist: the length before the failed write.
            self.region.persist(rec_at + record::SIZE, 8);
        }
        Ok(())
    }

    /// Before the first length change by `stamp`: remember the length to restore if the
    /// write or transaction does not complete.
    pub(crate) fn mark_size_change(&self, rec_at: u64, stamp: u64, old: u64) {
        if self.region.load_u64(rec_at + record::SIZE_STAMP) == stamp {
            return;
        }
        self.region.store_u64(rec_at + record::PREV_SIZE, old);
        self.region.store_u64(rec_at + record::SIZE_STAMP, stamp);
        // persist: recovery can undo the length change if `stamp` does not complete.
        self.region.persist(rec_at, record::RECORD_LEN);
    }

    /// Complete a multi-chunk write: clear the not-complete bit of its first chunk (the
    /// commit point), then invalidate the old copies.
    fn complete(&self, done: &[Written]) -> Result<()> {
        let Some(first) = done.first() else {
            return Ok(());
        };
        let tag = self.tag(first.chunk)?;
        assert!(
            tag.valid() && tag.not_complete(),
            "cache: completing {tag:?}"
        );
        let cleared = Tag {
            status: tag.status.without(Status::NOT_COMPLETE),
            ..tag
        };
        self.set_status(first.chunk, &cleared);
        let at = |c: u64| self.geometry().tag_at(c);
        let mut any = false;
        for w in done {
            if let Some(old) = w.superseded {
                let t = self.tag(old)?;
                assert!(t.valid(), "cache: superseded chunk {old} already invalid");
                self.region.store_u64(
                    at(old),
                    Tag {
                        status: Status::default(),
                        ..t
                    }
                    .word0(),
                );
                self.region.flush(at(old), 8);
                any = true;
            }
        }
        if any {
            // persist: the old copies are invalid; the new ones are the only valid copies.
            self.region.fence();
        }
        Ok(())
    }

    /// Write one chunk's part at `at` by the seed's cases; the caller holds the slot lock.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_chunk(
        &self,
        f: &FileState,
        key: u64,
        index: u64,
        at: u64,
        data: &[u8],
        stamp: u64,
        not_complete: bool,
        keep_old: bool,
    ) -> Result<Written> {
        assert!(
            at + data.len() as u64 <= CHUNK_SIZE,
            "cache: piece crosses a chunk"
        );
        let plan = self.make_room(key, index, stamp)?;
        let chunk_off = self.geometry().chunk_at(plan.target);
        if plan.case == WriteCase::InPlace {
            self.region.write(chunk_off + at, data);
            // persist: the open write's own chunk, overwritten in place.
            self.region.persist(chunk_off + at, data.len() as u64);
            self.counters.case(plan.case);
            return Ok(Written {
                chunk: plan.target,
                superseded: None,
            });
        }
        let mut buf = vec![0u8; CHUNK_SIZE as usize];
        if data.len() as u64 != CHUNK_SIZE {
            match plan.mine {
                Some(mine) => self.region.read(self.geometry().chunk_at(mine), &mut buf),
                None => self.load_home(f, index, &mut buf)?,
            }
        }
        buf[at as usize..at as usize + data.len()].copy_from_slice(data);
        self.region.write_nt(chunk_off, &buf);
        self.region.fence();
        // persist (above): the chunk's data is durable before its tag makes it valid.
        let mut status = Status::from_bits(Status::VALID | Status::NEW | Status::DIRTY);
        if not_complete {
            status = status.with(Status::NOT_COMPLETE);
        }
        self.put_tag(
            plan.target,
            &Tag {
                key,
                status,
                index,
                stamp,
            },
        );
        self.dirty.lock().insert(plan.target);
        self.counters.case(plan.case);
        let superseded = match plan.mine {
            Some(mine) if keep_old => Some(mine),
            Some(mine) => {
                self.drop_old_copy(mine)?;
                None
            }
            None => None,
        };
        Ok(Written {
            chunk: plan.target,
            superseded,
        })
    }

    /// Steps 1 and 2 of Algorithm 1 for a write of chunk `index` of `key` by `stamp`: the
    /// case, the victim flushed home and freed (Case 3), the other chunk's N cleared (Case 2).
    /// A chunk of another open transaction is never evicted nor superseded (ENOSPC).
    pub(crate) fn make_room(&self, key: u64, index: u64, stamp: u64) -> Result<Plan> {
        let slot = self.slot_of(key, index);
        let plan = self.pair(slot)?.plan(key, index, stamp);
        for chunk in plan.victim.iter().chain(plan.mine.iter()) {
            let t = self.tag(*chunk)?;
            if t.stamp != stamp && self.is_open(t.stamp) {
                return Err(Error::NoSpace(format!(
                    "cache slot {slot} is held by an open transaction"
                )));
            }
        }
        if let Some(victim) = plan.victim {
            if self.tag(victim)?.stamp == stamp {
                return Err(Error::NoSpace(format!(
                    "two chunks of one transaction collide in cache slot {slot}"
                )));
            }
            self.evict(victim)?;
        }
        if let Some(other) = plan.clear_new {
            let t = self.tag(other)?;
            let status = t.status.without(Status::NEW);
            self.set_status(other, &Tag { status, ..t });
        }
        Ok(plan)
    }

    /// Step 5 of Case 2-1 for a single-chunk write: the old copy is invalid.
    fn drop_old_copy(&self, mine: u64) -> Result<()> {
        let t = self.tag(mine)?;
        let status = Status::default();
        self.set_status(mine, &Tag { status, ..t });
        Ok(())
    }

    /// The home block of chunk `index` (zeros past the home file's end).
    pub(crate) fn load_home(&self, f: &FileState, index: u64, buf: &mut [u8]) -> Result<()> {
        buf.fill(0);
        let mut done = 0;
        while done < buf.len() {
            let n = self
                .backing
                .read(f.id, index * CHUNK_SIZE + done as u64, &mut buf[done..])?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(())
    }
}
