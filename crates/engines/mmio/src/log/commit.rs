//! Commit, abort and close of one file (Libnvmmio §3.6 SYNC, and what the seed leaves out:
//! sizes, aborts). A commit is one persisted 8-byte store of the file's epoch (or, for several
//! files, of a transaction record's state word, in `transaction/commit.rs`).

use crate::file::{FileState, MmioFile};
use crate::host::FileMedia;
use crate::io_err;
use crate::log::layout::{self, fm, Policy, NO_EPOCH};
use crate::shared::Shared;
use crate::PolicyMode;
use pmem::Region;
use std::sync::atomic::Ordering;
use store::Result;

impl<R: Region, M: FileMedia> MmioFile<R, M> {
    /// Step 1 of a commit (file lock exclusive): make every write of the epoch durable.
    pub(crate) fn prepare_commit(&self, s: &Shared<R, M>, st: &FileState<M::Map>) -> Result<()> {
        // persist: redo log bytes and entries this thread stored for the epoch (a call that
        // commits right after its write leaves them unfenced) are durable before the commit
        // point. Writes of other threads fenced their own (`MmioFile::settle`).
        s.pool.fence();
        if !self.home_dirty.swap(false, Ordering::AcqRel) {
            return Ok(()); // nothing written home in this epoch
        }
        let ranges = std::mem::take(&mut *self.dirty_home.lock());
        if let Some(map) = st.map.as_deref() {
            for (a, l) in ranges {
                let l = l.min(st.host_len.saturating_sub(a));
                if l > 0 {
                    map.flush(a, l);
                }
            }
            // persist: undo-mode and direct home writes are durable before the epoch bump
            // that commits them (msync on a non-DAX file system).
            map.fence();
            s.media
                .check_map(map)
                .map_err(|e| io_err(st.path.as_deref().unwrap_or("?".as_ref()), "msync", e))?;
        }
        Ok(())
    }

    pub(crate) fn needs_commit(&self) -> bool {
        self.uncommitted.load(Ordering::Acquire)
    }

    /// Step 3 of a commit, after the epoch word(s) are durable: fold the size, apply a
    /// truncation to the host file, decide the next epoch's policy.
    pub(crate) fn finish_commit(
        &self,
        s: &Shared<R, M>,
        st: &mut FileState<M::Map>,
        new_epoch: u64,
    ) -> Result<()> {
        let old_epoch = self.epoch.load(Ordering::Acquire);
        assert_eq!(
            new_epoch,
            old_epoch + 1,
            "file slot {}: epoch {old_epoch} committed as {new_epoch}",
            self.slot
        );
        self.epoch.store(new_epoch, Ordering::Release);
        self.uncommitted.store(false, Ordering::Release);
        self.epoch_bytes.store(0, Ordering::Relaxed);
        s.counters.commits.fetch_add(1, Ordering::Relaxed);
        let mut force_checkpoint = false;
        let size_words = st.size_pending;
        if st.size_pending {
            let at = s.sb.file_meta_at(self.slot);
            // The pending size is the one of the epoch just committed, as stored.
            let (slot, pending) = (self.slot, s.pool.load_u64(at + fm::PENDING_SIZE));
            assert_eq!(s.pool.load_u64(at + fm::PENDING_EPOCH), old_epoch);
            assert_eq!(
                pending, st.visible_size,
                "file slot {slot}: PENDING_SIZE word"
            );
            s.pool.store_u64(at + fm::COMMITTED_SIZE, st.visible_size);
            s.pool.persist(at + fm::COMMITTED_SIZE, 8);
            s.pool.store_u64(at + fm::PENDING_EPOCH, NO_EPOCH);
            // persist: the committed size is folded; the pending field is free again.
            s.pool.persist(at + fm::PENDING_EPOCH, 8);
            st.size_pending = false;
            if st.visible_size < st.committed_size {
                force_checkpoint = true; // drop entries past the new end before it can regrow
            }
            st.committed_size = st.visible_size;
        }
        let switch = self.next_policy(s);
        if switch.is_some() || force_checkpoint {
            // Synchronous checkpoint at a policy switch (§3.4): the new epoch starts clean.
            self.checkpoint_locked(s, st)?;
            s.counters.sync_checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(redo_next) = switch {
            self.redo.store(redo_next, Ordering::Release);
            let policy = if redo_next {
                Policy::Redo
            } else {
                Policy::Undo
            };
            let at = s.sb.file_meta_at(self.slot) + fm::HEADER;
            s.pool.store_u64(at, layout::file_header(policy));
            s.pool.persist(at, 8);
            s.counters.policy_switches.fetch_add(1, Ordering::Relaxed);
        }
        self.cut_host_file(s, st)?;
        self.assert_settled(s, st, size_words);
        if self.live_count.load(Ordering::Acquire) > 0 {
            s.signal_work();
        }
        Ok(())
    }

    /// The file's epoch word in the log pool holds `epoch` (a commit bumps it by one, from the
    /// value this file last committed: nothing else writes it).
    fn assert_epoch_word(&self, s: &Shared<R, M>, epoch: u64) {
        let stored = s.pool.load_u64(s.sb.file_meta_at(self.slot) + fm::EPOCH);
        assert_eq!(
            stored, epoch,
            "file slot {}: epoch word {stored}, expected {epoch}",
            self.slot
        );
        assert!(
            epoch < NO_EPOCH - 1,
            "file slot {}: epoch overflow",
            self.slot
        );
    }

    /// After a commit or an abort (file lock exclusive): no size is pending and the host file
    /// is no longer than the committed size; when this commit or abort wrote the size words
    /// (`size_words`), they are read back: nothing pending, the committed size the DRAM one.
    fn assert_settled(&self, s: &Shared<R, M>, st: &FileState<M::Map>, size_words: bool) {
        assert!(!st.size_pending && st.visible_size == st.committed_size);
        assert!(st.host_len <= st.committed_size);
        if !size_words {
            return;
        }
        let at = s.sb.file_meta_at(self.slot);
        let slot = self.slot;
        let pending_epoch = s.pool.load_u64(at + fm::PENDING_EPOCH);
        assert_eq!(
            pending_epoch, NO_EPOCH,
            "file slot {slot}: PENDING_EPOCH word"
        );
        let committed = s.pool.load_u64(at + fm::COMMITTED_SIZE);
        assert_eq!(
            committed, st.committed_size,
            "file slot {slot}: COMMITTED_SIZE word"
        );
    }

    /// Shrink the host file to the committed size (a committed truncation, or growth of an
    /// aborted epoch).
    fn cut_host_file(&self, s: &Shared<R, M>, st: &mut FileState<M::Map>) -> Result<()> {
        if st.host_len > st.committed_size {
            if let Some(path) = st.path.clone() {
                s.media
                    .set_len(&path, st.committed_size)
                    .map_err(|e| io_err(&path, "set_len", e))?;
            }
            st.host_len = st.committed_size;
        }
        Ok(())
    }

    /// Hybrid logging: the policy of the next epoch from the last one's reads and writes, if
    /// it differs from the current one (`Some(redo?)`). Resets the counters.
    fn next_policy(&self, s: &Shared<R, M>) -> Option<bool> {
        let w = self.writes.swap(0, Ordering::Relaxed);
        let r = self.reads.swap(0, Ordering::Relaxed);
        let redo = self.redo.load(Ordering::Acquire);
        if s.config.policy_mode != PolicyMode::Hybrid || w + r == 0 {
            return None;
        }
        // Multiply before comparing (the public code divided integers first, so any read in
        // the epoch made the ratio 0 and the switch to redo never happened).
        let redo_next = w * 100 >= s.config.redo_write_percent_min * (w + r);
        (redo_next != redo).then_some(redo_next)
    }

    /// Commit this file alone: one persisted 8-byte store of its epoch.
    pub(crate) fn commit(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        if !self.needs_commit() || self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.prepare_commit(s, &st)?;
        let e = self.epoch.load(Ordering::Acquire);
        let at = s.sb.file_meta_at(self.slot) + fm::EPOCH;
        self.assert_epoch_word(s, e);
        s.pool.store_u64(at, e + 1);
        // persist: COMMIT POINT of the file's epoch: its entries become committed.
        s.pool.persist(at, 8);
        self.finish_commit(s, &mut st, e + 1)
    }

    /// Drop every uncommitted change (file lock exclusive).
    pub(crate) fn abort_locked(&self, s: &Shared<R, M>, st: &mut FileState<M::Map>) -> Result<()> {
        {
            let _one = self.ckpt.lock();
            let mut taken = self.take_uncommitted(s);
            if let Some(map) = st.map.as_deref() {
                for (_, g) in &taken {
                    if !g.policy_redo {
                        // Undo: the old bytes back home.
                        crate::log::checkpoint::copy_chunk_home(s, map, st.host_len, g);
                    }
                }
                // persist: the restored old bytes are home before their entries are freed.
                map.fence();
            }
            for (id, _) in &taken {
                s.clear_entry(*id);
            }
            // persist: the aborted entries are free (home holds the old bytes again).
            s.pool.fence();
            for (id, g) in taken.iter_mut() {
                self.forget(s, *id, g);
            }
        }
        self.dirty_home.lock().clear();
        self.home_dirty.store(false, Ordering::Release);
        let size_words = st.size_pending;
        if st.size_pending {
            let at = s.sb.file_meta_at(self.slot) + fm::PENDING_EPOCH;
            s.pool.store_u64(at, NO_EPOCH);
            s.pool.persist(at, 8);
            st.size_pending = false;
            st.visible_size = st.committed_size;
        }
        self.cut_host_file(s, st)?;
        self.assert_settled(s, st, size_words);
        self.uncommitted.store(false, Ordering::Release);
        self.epoch_bytes.store(0, Ordering::Relaxed);
        s.counters.aborts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn abort(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        self.abort_locked(s, &mut st)
    }

    /// Checkpoint everything, drop uncommitted changes, free the metadata slot.
    pub(crate) fn close(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.abort_locked(s, &mut st)?;
        self.checkpoint_locked(s, &st)?;
        let at = s.sb.file_meta_at(self.slot) + fm::HEADER;
        s.pool.store_u64(at, 0);
        // persist: the slot is free (nothing of the file is left in the log).
        s.pool.persist(at, 8);
        s.files.lock().remove(&self.slot);
        s.free_file_slots.lock().push(self.slot);
        Ok(())
    }
}
