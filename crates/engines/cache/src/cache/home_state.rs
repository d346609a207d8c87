//! Home files changed behind the cache's back.
//!
//! After every home write of its own (a flush, a shrink, a change of times) the cache
//! records the home file's length and modification time in the file's record (`home_len`,
//! `home_mtime`: the *stamp*; docs/format.md). Before such a write it marks the stamp
//! unsettled (`home_mtime` = 0), so a crash in the middle never makes its own change look
//! foreign. A settled stamp that no longer matches the home file — another length, a later
//! modification time, or the inode gone — is a change made by someone else (an earlier
//! mtime is an mtime update lost by the home file system in a power loss: fdatasync does
//! not make it durable):
//!
//! | file state at open / flush                      | what happens                              |
//! |-------------------------------------------------|-------------------------------------------|
//! | stamp unsettled                                 | nothing to compare: the PM copy wins      |
//! | settled, home unchanged                         | nothing                                   |
//! | settled, changed, no dirty chunk in PM          | the home file wins: chunks dropped, length taken (recovery) |
//! | settled, changed or gone, dirty chunks in PM    | a conflict: the store refuses to open until `--prefer pm|home` resolves it; a flush skips the file |
//!
//! A conflict is never resolved silently: [`Prefer::Pm`] writes the cache's copy over the
//! home file (every valid chunk and the length), [`Prefer::Home`] keeps the home file and
//! drops the cache's chunks.

use super::files::FileState;
use super::Cache;
use crate::backing::{Backing, HomeStamp};
use crate::counters::Counters;
use crate::format::record;
use crate::format::{Status, Tag, CHUNK_SIZE};
use pmem::Region;
use std::collections::HashMap;
use store::{Error, Result};

/// Home changes of the cache's own in progress on one file (behind its home lock).
#[derive(Debug, Default)]
pub struct HomeWriters {
    active: u32,
}

/// Whether a home change first checks that nobody else changed the home file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// A flush: the cache's chunks would overwrite the home file.
    Yes,
    /// A change the user asked for through the store (shrink, times, removal).
    No,
}

/// What of the stamp an open and a flush compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HomeStampCheck {
    /// The length, and a modification time later than the recorded one.
    #[default]
    LengthAndMtime,
    /// The length only (the crash model's host file system gives every file a new mtime
    /// in a crash image).
    Length,
}

/// Which copy wins when a home file changed behind the cache while PM held dirty chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefer {
    /// The cache's copy: its chunks are written over the home file, its length set.
    Pm,
    /// The home file as it is: the cache's chunks of it are dropped.
    Home,
}

/// What an open does with conflicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HomeConflictPolicy {
    /// Refuse to open, naming the files and the two choices.
    #[default]
    Refuse,
    /// Resolve every conflict this way (`atomfs recover --prefer pm|home`).
    Resolve(Prefer),
}

/// How a home file differs from its stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HomeChange {
    Changed {
        was: HomeStamp,
        now: HomeStamp,
    },
    /// Deleted, replaced by another file, or moved out of the home directory.
    Gone,
}

/// A home file changed behind the cache while PM holds dirty chunks of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeConflict {
    pub key: u64,
    /// The home file's inode number.
    pub id: u64,
    pub dirty_chunks: u64,
    pub change: HomeChange,
}

impl HomeConflict {
    /// One line naming the file (`name`: its path in the home directory, when known).
    pub fn describe(&self, name: Option<&std::path::Path>) -> String {
        let file = match name {
            Some(p) => format!("home file {}", p.display()),
            None => format!("home file with inode {}", self.id),
        };
        let what = match self.change {
            HomeChange::Changed { was, now } => format!(
                "was changed behind the cache (length {} -> {}, mtime {} -> {} ns)",
                was.len, now.len, was.mtime_ns, now.mtime_ns
            ),
            HomeChange::Gone => "is gone (deleted, replaced or moved away)".to_string(),
        };
        match self.dirty_chunks {
            0 => format!("{file} {what} while the cache holds chunks of it not yet written home"),
            n => format!(
                "{file} {what} while the cache holds {n} chunk(s) of it not yet written home"
            ),
        }
    }
}

/// The two choices, for error messages (`POOL` is replaced by the pool's path where known).
pub const CHOICES: &str = "choose `atomfs recover POOL --prefer pm` (write the cache's copy over the home file) or `atomfs recover POOL --prefer home` (keep the home file, drop the cache's chunks)";

impl<R: Region, B: Backing> Cache<R, B> {
    /// Before a home change of the cache's own: check the stamp (a flush), then unsettle it.
    pub(crate) fn begin_home_change(&self, f: &FileState, check: Check) -> Result<()> {
        let mut writers = f.home.lock();
        if check == Check::Yes && writers.active == 0 {
            if let Some(change) = self.home_change(f)? {
                // (Counted and named in full by the next open, which refuses it.)
                let conflict = HomeConflict {
                    key: 0,
                    id: f.id,
                    dirty_chunks: 0,
                    change,
                };
                let name = self.backing.path_hint(f.id);
                return Err(Error::NotPermitted(format!(
                    "{}; {CHOICES}",
                    conflict.describe(name.as_deref())
                )));
            }
        }
        let at = self.geometry().record_at(f.record) + record::HOME_MTIME;
        if self.region.load_u64(at) != 0 {
            self.region.store_u64(at, 0);
            // persist: the stamp is unsettled before the home file changes.
            self.region.persist(at, 8);
        }
        writers.active += 1;
        Ok(())
    }

    /// After a home change of the cache's own (synced when `done`): settle the stamp when no
    /// other change is in progress. A failed change leaves it unsettled.
    pub(crate) fn end_home_change(&self, f: &FileState, done: bool) {
        let mut writers = f.home.lock();
        assert!(writers.active > 0, "cache: home change ended twice");
        writers.active -= 1;
        if done && writers.active == 0 {
            let _ = self.settle_locked(f);
        }
    }

    /// Record the home file's stamp now (when no home change is in progress).
    pub(crate) fn settle(&self, f: &FileState) -> Result<()> {
        let writers = f.home.lock();
        if writers.active > 0 {
            return Ok(());
        }
        self.settle_locked(f)
    }

    fn settle_locked(&self, f: &FileState) -> Result<()> {
        let now = self.backing.stamp(f.id)?;
        if now.mtime_ns == 0 {
            return Ok(());
        }
        let at = self.geometry().record_at(f.record);
        self.region.store_u64(at + record::HOME_LEN, now.len);
        self.region.flush(at + record::HOME_LEN, 8);
        self.region.fence();
        self.region.store_u64(at + record::HOME_MTIME, now.mtime_ns);
        // persist: the stamp is settled (its length first: a torn pair stays unsettled).
        self.region.persist(at + record::HOME_MTIME, 8);
        Ok(())
    }

    /// Mark the stamp of `key` unsettled (the cache changes its home file while opening;
    /// the next flush of the file settles it again).
    pub fn unsettle_key(&self, key: u64) -> Result<()> {
        let f = self.file(key)?;
        self.begin_home_change(&f, Check::No)?;
        self.end_home_change(&f, false);
        Ok(())
    }

    /// Record the home stamp of `key` now (after a change of the cache's own).
    pub fn settle_key(&self, key: u64) -> Result<()> {
        let f = self.file(key)?;
        self.settle(&f)
    }

    /// Mark the stamp of `key` unsettled for good: the cache is removing its home file.
    pub fn unsettle_for_removal(&self, key: u64) -> Result<()> {
        let f = self.file(key)?;
        // Never ended: no flush settles the stamp of a file being removed.
        self.begin_home_change(&f, Check::No)
    }

    /// How the home file differs from its settled stamp (`None`: unsettled, or unchanged).
    pub(crate) fn home_change(&self, f: &FileState) -> Result<Option<HomeChange>> {
        let rec = self.record(f);
        if rec.home_mtime == 0 {
            return Ok(None);
        }
        let was = HomeStamp {
            len: rec.home_len,
            mtime_ns: rec.home_mtime,
        };
        match self.backing.stamp(f.id) {
            Err(Error::NotFound(_)) => Ok(Some(HomeChange::Gone)),
            Err(e) => Err(e),
            Ok(now) if self.stamp_differs(was, now) => Ok(Some(HomeChange::Changed { was, now })),
            Ok(_) => Ok(None),
        }
    }

    /// Whether `now` shows a change made by someone else since the stamp `was`: another
    /// length, or (when the check includes it) a later modification time. An earlier one is
    /// the home file system having lost an mtime update the cache's fdatasync did not make
    /// durable (a power loss), not a foreign change.
    fn stamp_differs(&self, was: HomeStamp, now: HomeStamp) -> bool {
        now.len != was.len
            || (self.config.home_stamp == HomeStampCheck::LengthAndMtime
                && now.mtime_ns > was.mtime_ns)
    }

    /// Dirty chunks by key.
    fn dirty_by_key(&self) -> Result<HashMap<u64, u64>> {
        let chunks: Vec<u64> = self.dirty.lock().iter().copied().collect();
        let mut out = HashMap::new();
        for chunk in chunks {
            let t = self.tag(chunk)?;
            if t.valid() && t.dirty() {
                *out.entry(t.key).or_insert(0) += 1;
            }
        }
        Ok(out)
    }

    /// Every home file changed behind the cache while PM holds dirty chunks of it.
    pub fn home_conflicts(&self) -> Result<Vec<HomeConflict>> {
        let mut out = Vec::new();
        let mut dirty: Vec<(u64, u64)> = self.dirty_by_key()?.into_iter().collect();
        dirty.sort_unstable();
        for (key, dirty_chunks) in dirty {
            let Ok(f) = self.file(key) else { continue };
            if let Some(change) = self.home_change(&f)? {
                out.push(HomeConflict {
                    key,
                    id: f.id,
                    dirty_chunks,
                    change,
                });
            }
        }
        Ok(out)
    }

    /// Files whose home changed behind the cache but that hold no dirty chunk: the home
    /// file wins at once (their clean chunks are dropped, its length taken). Returns how many.
    pub(crate) fn adopt_changed_homes(&self) -> Result<u64> {
        let dirty = self.dirty_by_key()?;
        let mut adopted = 0;
        for (key, _) in self.file_list() {
            if dirty.contains_key(&key) {
                continue;
            }
            let f = self.file(key)?;
            if let Some(HomeChange::Changed { now, .. }) = self.home_change(&f)? {
                self.take_home(key, &f, now.len)?;
                adopted += 1;
            }
        }
        Ok(adopted)
    }

    /// The home file wins: every chunk of `key` dropped, the length set to the home's.
    fn take_home(&self, key: u64, f: &FileState, home_len: u64) -> Result<()> {
        let _op = f.op.lock();
        let size = self.record(f).size;
        self.invalidate_from(key, 0, size.max(home_len))?;
        let at = self.geometry().record_at(f.record);
        for field in [record::SIZE, record::PREV_SIZE, record::UNIT_MIN] {
            self.region.store_u64(at + field, home_len);
        }
        self.region.store_u64(at + record::SIZE_STAMP, 0);
        // persist: the file's length is the home file's; no chunk of it is cached.
        self.region.persist(at, record::RECORD_LEN);
        self.files.lock().resized(size, home_len);
        self.settle(f)
    }

    /// Resolve one conflict of a home file that still exists (`Gone` with [`Prefer::Pm`]
    /// needs a new home file: the store's [`pm_image`](Self::pm_image) and `delete_file`).
    pub fn resolve(&self, conflict: &HomeConflict, prefer: Prefer) -> Result<()> {
        let f = self.file(conflict.key)?;
        match (prefer, conflict.change) {
            (Prefer::Home, HomeChange::Gone) => self.delete_file(conflict.key)?,
            (Prefer::Home, HomeChange::Changed { now, .. }) => {
                self.take_home(conflict.key, &f, now.len)?
            }
            (Prefer::Pm, HomeChange::Changed { .. }) => self.write_pm_copy(conflict.key, &f)?,
            (Prefer::Pm, HomeChange::Gone) => {
                return Err(Error::InvalidArgument(
                    "cache: a gone home file is rewritten by the store".into(),
                ))
            }
        }
        Counters::bump(&self.counters.home_conflicts_resolved);
        Ok(())
    }

    /// The cache's copy wins: the home file gets the length and every valid chunk, synced;
    /// then the chunks are clean and the stamp settled.
    fn write_pm_copy(&self, key: u64, f: &FileState) -> Result<()> {
        let _op = f.op.lock();
        let size = self.record(f).size;
        self.begin_home_change(f, Check::No)?;
        let written = self.pm_image(key, &mut |off, data| self.backing.write(f.id, off, data));
        let synced = written
            .and_then(|()| self.backing.set_len(f.id, size))
            .and_then(|()| self.backing.sync(f.id));
        self.end_home_change(f, synced.is_ok());
        synced?;
        for (_, chunk) in self.valid_chunks_of(key, size)? {
            let _g = self.lock_slot(chunk / 2);
            let tag = self.tag(chunk)?;
            if tag.valid() && tag.dirty() {
                let clean = Tag {
                    status: tag.status.without(Status::DIRTY),
                    ..tag
                };
                self.set_status(chunk, &clean);
                self.dirty.lock().remove(&chunk);
            }
        }
        Ok(())
    }

    /// The valid chunks of `key` within its `size`, as (index, chunk), in index order (a
    /// file longer than the pool has chunks of several indexes in one slot).
    pub(crate) fn valid_chunks_of(&self, key: u64, size: u64) -> Result<Vec<(u64, u64)>> {
        let count = size.div_ceil(CHUNK_SIZE);
        let slots = self.geometry().slots();
        let mut out = Vec::new();
        if count <= slots {
            for index in 0..count {
                let slot = self.slot_of(key, index);
                let _g = self.lock_slot(slot);
                if let Some((chunk, _)) = self.pair(slot)?.find(key, index) {
                    out.push((index, chunk));
                }
            }
            return Ok(out);
        }
        for slot in 0..slots {
            let _g = self.lock_slot(slot);
            let pair = self.pair(slot)?;
            for side in 0..2 {
                let t = *pair.tag(side);
                if t.valid() && t.key == key && t.index < count {
                    if let Some((chunk, _)) = pair.find(key, t.index) {
                        out.push((t.index, chunk));
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Every valid chunk of `key` (clamped to the file's length), in index order, given to
    /// `out` as (offset, bytes). No write may run meanwhile (the caller holds the file).
    pub fn pm_image(&self, key: u64, out: &mut dyn FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        let f = self.file(key)?;
        let size = self.record(&f).size;
        let mut buf = vec![0u8; CHUNK_SIZE as usize];
        for (index, chunk) in self.valid_chunks_of(key, size)? {
            self.region.read(self.geometry().chunk_at(chunk), &mut buf);
            let start = index * CHUNK_SIZE;
            let n = (size - start).min(CHUNK_SIZE) as usize;
            out(start, &buf[..n])?;
        }
        Ok(())
    }
}
