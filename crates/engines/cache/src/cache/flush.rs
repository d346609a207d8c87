//! Write-back to the home files: the periodic flush (§5.2.3), the forced flush of a Case 3
//! victim, and the flushes of `stat`, `sync` and unmount.
//!
//! A chunk's home write happens under its slot lock and its file's home lock (so a shrink
//! never races it), clamped to the file's length; the chunk is marked clean only after the
//! home file's sync succeeded and only if its tag did not change meanwhile. A failed write or
//! sync leaves the chunk dirty in PM (nothing is lost) and is kept as the pending flush
//! error until a later flush succeeds.

use super::Cache;
use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::{Status, Tag, CHUNK_SIZE};
use pmem::Region;
use std::collections::BTreeMap;
use store::Result;

impl<R: Region, B: Backing> Cache<R, B> {
    /// Write chunk `chunk` (valid, with tag `tag`) to its home file, without sync.
    /// Returns the home file's id, or `None` when the chunk's file is gone.
    fn write_home(&self, chunk: u64, tag: &Tag) -> Result<Option<u64>> {
        let Some(f) = self.files.lock().get(tag.key).cloned() else {
            return Ok(None);
        };
        let _home = f.home.lock();
        let rec = self.record(&f);
        // The committed length: an open transaction's length change is not the home's yet.
        let size = if rec.size_stamp != 0 && self.is_open(rec.size_stamp) {
            rec.prev_size
        } else {
            rec.size
        };
        let start = tag.index * CHUNK_SIZE;
        if start < size {
            let n = (size - start).min(CHUNK_SIZE) as usize;
            let mut buf = vec![0u8; n];
            self.region.read(self.geometry().chunk_at(chunk), &mut buf);
            self.backing.write(f.id, start, &buf)?;
        }
        Ok(Some(f.id))
    }

    /// Case 3: flush the victim home (when dirty) and free it; the slot lock is held.
    pub(crate) fn evict(&self, victim: u64) -> Result<()> {
        let tag = self.tag(victim)?;
        assert!(tag.valid(), "cache: evicting the free chunk {victim}");
        if tag.dirty() {
            if let Some(id) = self.write_home(victim, &tag)? {
                if let Err(e) = self.backing.sync(id) {
                    self.record_error(&e);
                    return Err(e);
                }
            }
            Counters::bump(&self.counters.forced_flushes);
            Counters::bump(&self.counters.chunks_flushed);
        }
        // The victim is clean at home: free it, C(0,0).
        self.set_status(
            victim,
            &Tag {
                status: Status::default(),
                ..tag
            },
        );
        Ok(())
    }

    /// Flush the given chunks (those valid and dirty) home; returns how many were cleaned.
    pub fn flush_chunks(&self, chunks: Vec<u64>) -> Result<usize> {
        let mut written: BTreeMap<u64, Vec<(u64, Tag)>> = BTreeMap::new();
        let mut first_error = None;
        for chunk in chunks {
            let _g = self.lock_slot(chunk / 2);
            let tag = self.tag(chunk)?;
            if !(tag.valid() && tag.dirty()) {
                self.dirty.lock().remove(&chunk);
                continue;
            }
            if self.is_open(tag.stamp) {
                // An open transaction's chunk: home gets it only after the commit.
                continue;
            }
            match self.write_home(chunk, &tag) {
                Ok(Some(id)) => written.entry(id).or_default().push((chunk, tag)),
                Ok(None) => {}
                Err(e) => {
                    self.record_error(&e);
                    first_error.get_or_insert(e);
                }
            }
        }
        let mut cleaned = 0;
        for (id, chunks) in written {
            if let Err(e) = self.backing.sync(id) {
                self.record_error(&e);
                first_error.get_or_insert(e);
                continue;
            }
            cleaned += self.mark_clean(&chunks)?;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(cleaned),
        }
    }

    /// Clear the dirty bit of chunks whose tags did not change since their home write.
    fn mark_clean(&self, chunks: &[(u64, Tag)]) -> Result<usize> {
        let mut n = 0;
        for (chunk, tag) in chunks {
            let _g = self.lock_slot(chunk / 2);
            if self.tag(*chunk)? == *tag {
                let clean = Tag {
                    status: tag.status.without(Status::DIRTY),
                    ..*tag
                };
                self.set_status(*chunk, &clean);
                self.dirty.lock().remove(chunk);
                Counters::bump(&self.counters.chunks_flushed);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Flush every dirty chunk (the periodic flush, `sync`, unmount); clears the pending
    /// flush error when everything reached home.
    pub fn flush_all(&self) -> Result<usize> {
        let chunks: Vec<u64> = self.dirty.lock().iter().copied().collect();
        let n = self.flush_chunks(chunks)?;
        *self.flush_error.lock() = None;
        Ok(n)
    }

    /// Flush the dirty chunks of one file (the seed's `stat()` rule, and its fsync of a
    /// file whose earlier flush failed).
    pub fn flush_file(&self, key: u64) -> Result<usize> {
        let f = self.file(key)?;
        let size = self.record(&f).size;
        let count = size.div_ceil(CHUNK_SIZE).min(self.geometry().slots());
        let dirty = self.dirty.lock();
        let chunks: Vec<u64> = (0..count)
            .flat_map(|i| {
                let s = self.slot_of(key, i);
                [s * 2, s * 2 + 1]
            })
            .filter(|c| dirty.contains(c))
            .collect();
        drop(dirty);
        let n = self.flush_chunks(chunks)?;
        if self.dirty.lock().is_empty() {
            // Nothing is left to write home: no earlier failure is pending any more.
            *self.flush_error.lock() = None;
        }
        Ok(n)
    }
}
