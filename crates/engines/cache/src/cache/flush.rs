//! Write-back to the home files: the periodic flush (§5.2.3), the forced flush of a Case 3
//! victim, and the flushes of `stat`, `sync` and unmount.
//!
//! A chunk's home write happens under its slot lock and its file's home lock (so a shrink
//! never races it), clamped to the file's length; the chunk is marked clean only after the
//! home file's sync succeeded and only if its tag did not change meanwhile. A failed write or
//! sync leaves the chunk dirty in PM (nothing is lost) and is kept as the pending flush
//! error until a later flush succeeds.

use super::files::FileState;
use super::home_state::Check;
use super::Cache;
use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::{Status, Tag, CHUNK_SIZE};
use pmem::Region;
use std::collections::BTreeMap;
use store::Result;

/// What a write-back makes of the chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteBack {
    /// Written home, the home files synced, the chunks clean.
    Durable,
    /// Written into the home files only (readers of the home file system see them); the
    /// chunks stay dirty until a durable flush (the PM copy is the durable one meanwhile).
    Visible,
}

/// Where a file's write-back in one flush stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BatchState {
    /// Its home change began; chunks are being written.
    Writing,
    /// A home write failed: no sync, the change ends unsettled.
    Failed,
    /// Its home file changed behind the cache (or could not be looked at): not written.
    Refused,
}

/// One file's chunks written home in one flush.
struct FileBatch {
    file: FileState,
    chunks: Vec<(u64, Tag)>,
    state: BatchState,
}

impl<R: Region, B: Backing> Cache<R, B> {
    /// Write chunk `chunk` (valid, with tag `tag`) to the home file of `f`, without sync.
    fn write_home(&self, f: &FileState, chunk: u64, tag: &Tag) -> Result<()> {
        let _home = f.home.lock();
        let rec = self.record(f);
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
        Ok(())
    }

    /// Case 3: flush the victim home (when dirty) and free it; the slot lock is held.
    pub(crate) fn evict(&self, victim: u64) -> Result<()> {
        let tag = self.tag(victim)?;
        assert!(tag.valid(), "cache: evicting the free chunk {victim}");
        if tag.dirty() {
            let file = self.files.lock().get(tag.key).cloned();
            if let Some(f) = file {
                if let Err(e) = self.begin_home_change(&f, Check::Yes) {
                    self.record_error(&e);
                    return Err(e);
                }
                let done = self
                    .write_home(&f, victim, &tag)
                    .and_then(|()| self.backing.sync(f.id));
                self.end_home_change(&f, done.is_ok());
                if let Err(e) = done {
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
    /// A file whose home changed behind the cache is skipped (its chunks stay dirty; the
    /// error is pending, and the next open refuses until it is resolved).
    pub fn flush_chunks(&self, chunks: Vec<u64>) -> Result<usize> {
        self.write_back(chunks, WriteBack::Durable)
    }

    /// Write the given chunks (valid and dirty) home, synced and cleaned (`Durable`), or
    /// only into the home file (`Visible`: they stay dirty); returns how many.
    fn write_back(&self, chunks: Vec<u64>, how: WriteBack) -> Result<usize> {
        let mut batch: BTreeMap<u64, FileBatch> = BTreeMap::new();
        let mut first_error = None;
        for chunk in chunks {
            let _g = self.lock_slot(chunk / 2);
            let tag = self.tag(chunk)?;
            if !(tag.valid() && tag.dirty()) {
                self.dirty.lock().remove(&chunk);
                self.shown.lock().remove(&chunk);
                continue;
            }
            if self.is_open(tag.stamp) {
                // An open transaction's chunk: home gets it only after the commit.
                continue;
            }
            if how == WriteBack::Visible && self.shown.lock().get(&chunk) == Some(&tag) {
                // Already in the home file as it is (a second stat changes nothing).
                continue;
            }
            let Some(entry) = self.batch_entry(&mut batch, tag.key, &mut first_error) else {
                continue;
            };
            match self.write_home(&entry.file, chunk, &tag) {
                Ok(()) => {
                    if how == WriteBack::Visible {
                        self.shown.lock().insert(chunk, tag);
                    }
                    entry.chunks.push((chunk, tag));
                }
                Err(e) => {
                    entry.state = BatchState::Failed;
                    self.record_error(&e);
                    first_error.get_or_insert(e);
                }
            }
        }
        let mut cleaned = 0;
        for entry in batch.into_values() {
            if how == WriteBack::Visible {
                // Not synced: the stamp stays unsettled until a durable flush.
                if entry.state != BatchState::Refused {
                    self.end_home_change(&entry.file, false);
                }
                cleaned += entry.chunks.len();
                continue;
            }
            let synced = match entry.state {
                BatchState::Writing => self.backing.sync(entry.file.id),
                BatchState::Failed => {
                    self.end_home_change(&entry.file, false);
                    continue;
                }
                BatchState::Refused => continue,
            };
            self.end_home_change(&entry.file, synced.is_ok());
            if let Err(e) = synced {
                self.record_error(&e);
                first_error.get_or_insert(e);
                continue;
            }
            cleaned += self.mark_clean(&entry.chunks)?;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(cleaned),
        }
    }

    /// The batch entry of file `key`, its home change begun at its first chunk; `None` when
    /// the file is gone or its home cannot be written (changed behind the cache, failed).
    fn batch_entry<'a>(
        &self,
        batch: &'a mut BTreeMap<u64, FileBatch>,
        key: u64,
        first_error: &mut Option<store::Error>,
    ) -> Option<&'a mut FileBatch> {
        if let std::collections::btree_map::Entry::Vacant(slot) = batch.entry(key) {
            let file = self.files.lock().get(key).cloned()?;
            let state = match self.begin_home_change(&file, Check::Yes) {
                Ok(()) => BatchState::Writing,
                Err(e) => {
                    self.record_error(&e);
                    first_error.get_or_insert(e);
                    BatchState::Refused
                }
            };
            slot.insert(FileBatch {
                file,
                chunks: Vec::new(),
                state,
            });
        }
        batch
            .get_mut(&key)
            .filter(|e| e.state == BatchState::Writing)
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
                self.shown.lock().remove(chunk);
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

    /// The seed's `stat()` rule: the file's dirty chunks written into its home file, so
    /// that its length and data seen through the home file system are right — without the
    /// home sync (the chunks stay dirty and durable in PM; the flusher syncs them).
    pub fn show_file(&self, key: u64) -> Result<usize> {
        let chunks = self.dirty_chunks_of(key)?;
        self.write_back(chunks, WriteBack::Visible)
    }

    fn dirty_chunks_of(&self, key: u64) -> Result<Vec<u64>> {
        let f = self.file(key)?;
        let size = self.record(&f).size;
        let count = size.div_ceil(CHUNK_SIZE).min(self.geometry().slots());
        let dirty = self.dirty.lock();
        Ok((0..count)
            .flat_map(|i| {
                let s = self.slot_of(key, i);
                [s * 2, s * 2 + 1]
            })
            .filter(|c| dirty.contains(c))
            .collect())
    }

    /// Flush the dirty chunks of one file, synced (`atomfs flush` of a file, its fsync
    /// after an earlier failed flush).
    pub fn flush_file(&self, key: u64) -> Result<usize> {
        let chunks = self.dirty_chunks_of(key)?;
        let n = self.flush_chunks(chunks)?;
        if self.dirty.lock().is_empty() {
            // Nothing is left to write home: no earlier failure is pending any more.
            *self.flush_error.lock() = None;
        }
        Ok(n)
    }
}
