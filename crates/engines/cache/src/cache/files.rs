//! File records, keys and lengths: create (a key advanced by the stride), delete (tags
//! cleared, then the record), and length changes that keep the record invariants (the home
//! file never longer than `size`; no valid chunk wholly past `size`).

use super::home_state::Check;
use super::Cache;
use crate::backing::Backing;
use crate::format::record::{self, FileRecord};
use crate::format::superblock::NEXT_KEY_AT;
use crate::format::tag::KEY_MAX;
use crate::format::{Status, CHUNK_SIZE};
use crate::stride::StrideTable;
use parking_lot::Mutex;
use pmem::Region;
use std::collections::HashMap;
use std::sync::Arc;
use store::{Error, Result};

/// DRAM state of one file.
#[derive(Clone, Debug)]
pub struct FileState {
    pub record: u64,
    pub id: u64,
    /// Serialises the file's writes, length changes and delete (outermost lock).
    pub op: Arc<Mutex<()>>,
    /// Serialises home writes against home truncation (taken after a slot lock); counts
    /// the home changes in progress (the record's home stamp is settled when none is).
    pub home: Arc<Mutex<super::home_state::HomeWriters>>,
}

/// Every live file by key, the free records and the stride table.
pub struct Files {
    by_key: HashMap<u64, FileState>,
    free_records: Vec<u64>,
    stride: StrideTable,
}

impl Files {
    pub fn new(files_max: u64, stride: StrideTable) -> Self {
        Files {
            by_key: HashMap::new(),
            free_records: (0..files_max).rev().collect(),
            stride,
        }
    }
    pub fn count(&self) -> u64 {
        self.by_key.len() as u64
    }
    pub fn get(&self, key: u64) -> Option<&FileState> {
        self.by_key.get(&key)
    }
    pub fn keys(&self) -> Vec<u64> {
        self.by_key.keys().copied().collect()
    }
    /// Take a record as live (at open) or after create.
    pub fn insert(&mut self, key: u64, record: u64, id: u64, size: u64) {
        self.free_records.retain(|&r| r != record);
        self.stride.add(size);
        let state = FileState {
            record,
            id,
            op: Arc::new(Mutex::new(())),
            home: Arc::new(Mutex::new(Default::default())),
        };
        assert!(
            self.by_key.insert(key, state).is_none(),
            "cache: key {key} twice"
        );
    }
    pub fn stride_table(&self) -> &StrideTable {
        &self.stride
    }
    /// A file's length changed from `old` to `new`.
    pub fn resized(&mut self, old: u64, new: u64) {
        self.stride.update(old, new);
    }
}

impl<R: Region, B: Backing> Cache<R, B> {
    pub(crate) fn file(&self, key: u64) -> Result<FileState> {
        self.files
            .lock()
            .get(key)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("cache file key {key}")))
    }

    pub(crate) fn record(&self, f: &FileState) -> FileRecord {
        FileRecord::read(&self.region, self.geometry().record_at(f.record))
    }

    /// The file's length.
    pub fn len(&self, key: u64) -> Result<u64> {
        let f = self.file(key)?;
        Ok(self.record(&f).size)
    }

    /// The key of the file whose home identity is `id`.
    pub fn key_of(&self, id: u64) -> Option<u64> {
        let files = self.files.lock();
        files
            .keys()
            .into_iter()
            .find(|k| files.get(*k).is_some_and(|f| f.id == id))
    }

    /// Start caching the home file `id` of length `size`; returns its key.
    pub fn create_file(&self, id: u64, size: u64) -> Result<u64> {
        let mut files = self.files.lock();
        let Some(&record) = files.free_records.last() else {
            return Err(Error::TooMany {
                what: "cached files",
                max: self.geometry().files_max(),
            });
        };
        let key = self.next_key_word();
        let stride = files.stride.stride(self.geometry().slots());
        if key == 0 || key.saturating_add(stride) > KEY_MAX {
            return Err(Error::NoSpace("cache keys exhausted".into()));
        }
        self.region.store_u64(NEXT_KEY_AT, key + stride);
        // persist: the key is taken before a record carries it (a crash in between wastes
        // it, never hands it out twice).
        self.region.persist(NEXT_KEY_AT, 8);
        FileRecord::create(
            &self.region,
            self.geometry().record_at(record),
            key,
            id,
            size,
        );
        files.insert(key, record, id, size);
        let f = files.get(key).cloned();
        drop(files);
        if let Some(f) = f {
            // The home file as it is now; a failure leaves the stamp unsettled.
            let _ = self.settle(&f);
        }
        Ok(key)
    }

    /// Stop caching a file: invalidate its chunks (dirty ones are dropped: the file is gone),
    /// then free its record.
    pub fn delete_file(&self, key: u64) -> Result<()> {
        let f = self.file(key)?;
        let _op = f.op.lock();
        let size = self.record(&f).size;
        self.invalidate_from(key, 0, size)?;
        let at = self.geometry().record_at(f.record);
        self.region.store_u64(at + record::KEY, 0);
        // persist: the record is free; its chunks were invalidated before.
        self.region.persist(at + record::KEY, 8);
        let mut files = self.files.lock();
        files.by_key.remove(&key);
        files.free_records.push(f.record);
        files.stride.remove(size);
        Ok(())
    }

    /// Invalidate every valid chunk of `key` with index at or past `from` chunks, for the
    /// indexes a file of `size` bytes may use.
    pub(crate) fn invalidate_from(&self, key: u64, from: u64, size: u64) -> Result<()> {
        let end = size
            .div_ceil(CHUNK_SIZE)
            .min(from + self.geometry().slots());
        for index in from..end {
            let slot = self.slot_of(key, index);
            let _g = self.lock_slot(slot);
            let pair = self.pair(slot)?;
            for side in 0..2 {
                let tag = *pair.tag(side);
                if tag.holds(key, index) {
                    let cleared = crate::format::Tag {
                        status: Status::default(),
                        ..tag
                    };
                    self.set_status(pair.chunk(side), &cleared);
                }
            }
        }
        Ok(())
    }

    /// Set the file's length (a hole when it grows), durable when this returns.
    pub fn set_len(&self, key: u64, len: u64) -> Result<()> {
        if len > super::recovery::SIZE_MAX {
            return Err(Error::FileTooLarge(format!("length {len}")));
        }
        let f = self.file(key)?;
        let _op = f.op.lock();
        let old = self.record(&f).size;
        if len > old {
            self.zero_tail(&f, key, old, len)?;
            self.store_size(&f, len);
        } else if len < old {
            self.shrink(&f, key, old, len)?;
        }
        self.files.lock().resized(old, len);
        Ok(())
    }

    fn store_size(&self, f: &FileState, len: u64) {
        let at = self.geometry().record_at(f.record) + record::SIZE;
        self.region.store_u64(at, len);
        // persist: the new length, one atomic store.
        self.region.persist(at, 8);
    }

    /// Shrink: the length first (reads stop at it), then the home file, then the chunks
    /// past it (recovery finishes both after a crash).
    fn shrink(&self, f: &FileState, key: u64, old: u64, len: u64) -> Result<()> {
        self.begin_home_change(f, Check::No)?;
        let truncated = {
            let _home = f.home.lock();
            self.store_size(f, len);
            self.truncate_home(f, len)
        };
        self.end_home_change(f, truncated.is_ok());
        truncated?;
        self.invalidate_from(key, len.div_ceil(CHUNK_SIZE), old)
    }

    pub(crate) fn truncate_home(&self, f: &FileState, len: u64) -> Result<()> {
        if self.backing.len(f.id)? > len {
            self.backing.set_len(f.id, len)?;
            self.backing.sync(f.id)?;
        }
        Ok(())
    }

    /// Before the length grows from `old`: zero the bytes past `old` in its chunk when
    /// that chunk is in PM (they may hold data of an earlier, longer life of the file).
    /// Invisible until the length grows, so it needs no atomicity.
    pub(crate) fn zero_tail(&self, f: &FileState, key: u64, old: u64, new: u64) -> Result<()> {
        let in_chunk = old % CHUNK_SIZE;
        if in_chunk == 0 {
            return Ok(());
        }
        let index = old / CHUNK_SIZE;
        let slot = self.slot_of(key, index);
        let cached = {
            let _g = self.lock_slot(slot);
            self.pair(slot)?.find(key, index).is_some()
        };
        if !cached {
            return Ok(());
        }
        let len = (CHUNK_SIZE - in_chunk).min(new - old) as usize;
        let stamp = self.take_stamp();
        let _g = self.lock_slot(slot);
        self.write_chunk(
            f,
            key,
            index,
            in_chunk,
            &vec![0u8; len],
            stamp,
            false,
            false,
        )?;
        Ok(())
    }

    pub(crate) fn take_stamp(&self) -> u64 {
        self.next_stamp
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}
