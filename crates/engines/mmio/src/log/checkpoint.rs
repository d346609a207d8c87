//! Checkpointing (Libnvmmio §3.3): a committed redo entry's bytes are copied home, made
//! durable (msync on a non-DAX file system), then the entry is freed; a committed undo entry is
//! just freed.
//!
//! Three callers: the background thread (`shared::checkpoint_loop`), which holds no file lock
//! while it copies, so that commits of the file go on; the synchronous checkpoint of one
//! committed entry that a new write hits (`checkpoint_one`); and the synchronous checkpoints
//! with the file's lock held (policy switch, committed truncation, full log, close). Entries
//! are taken off the file's queue, oldest first, under the file's checkpoint mutex, in batches
//! of a bounded size; each batch costs two fences (home data, then the freed entries).

use crate::file::{copy_durable, FileState, MmioFile};
use crate::host::FileMedia;
use crate::io_err;
use crate::log::layout::BLOCK_SIZE;
use crate::shared::{EntryState, Shared};
use parking_lot::RwLockWriteGuard;
use pmem::Region;
use std::path::Path;
use std::sync::atomic::Ordering;
use store::Result;

/// Entries one checkpoint batch takes at most.
pub(crate) const CHECKPOINT_BATCH_ENTRIES: usize = 64;
/// Bytes one batch copies home at most (bounds how long it holds its entries' locks).
pub(crate) const CHECKPOINT_BATCH_BYTES: u64 = 1 << 20;

/// Snapshots one background checkpoint takes at most when its drain stops at an entry its
/// snapshot does not reach (the file grew meanwhile); what is left waits for the next call.
const SNAPSHOTS_MAX: usize = 4;

/// The home side of a checkpoint: the mapping (the file's current one, or a snapshot of it
/// taken by the background thread), the host length, the path (for errors).
pub(crate) struct Home<'a, Map> {
    pub(crate) map: Option<&'a Map>,
    pub(crate) host_len: u64,
    pub(crate) path: &'a Path,
    /// `map` and `host_len` are the file's current ones (its lock is held), not a snapshot
    /// that commits may have outdated since it was taken.
    pub(crate) current: bool,
}

impl<Map: Region> Home<'_, Map> {
    /// Whether a committed chunk ending at `end` can be copied home through this view. The
    /// current view clips a chunk at the host length (bytes past the file's end do not exist).
    /// A snapshot must hold the whole chunk: a chunk past its host length belongs to a page
    /// the file gained after the snapshot (a commit grew it, a later commit overwrote the new
    /// page through the log), and clipping it would free the entry without copying it home.
    fn reaches(&self, end: u64) -> bool {
        self.map.is_some_and(|m| {
            if self.current {
                end.min(self.host_len) <= m.len()
            } else {
                end <= self.host_len && end <= m.len()
            }
        })
    }
}

type Taken<'a> = Vec<(u32, u32, RwLockWriteGuard<'a, EntryState>)>;

impl<R: Region, M: FileMedia> MmioFile<R, M> {
    /// Copy a committed redo entry home and free it (entry lock held): a write hit it.
    pub(crate) fn checkpoint_one(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        id: u32,
        e: &mut EntryState,
    ) -> Result<()> {
        if e.policy_redo {
            let map = self.map_of(st)?;
            copy_chunk_home(s, map, st.host_len, e);
            // persist: the checkpointed bytes are home (msync on a non-DAX file system)
            // before the entry that protects them is freed.
            map.fence();
            s.media
                .check_map(map)
                .map_err(|err| io_err(st.path.as_deref().unwrap_or("?".as_ref()), "msync", err))?;
        }
        self.assert_checkpointable(e, e.policy_redo);
        s.clear_entry(id);
        // persist: the entry is free.
        s.pool.fence();
        self.forget(s, id, e);
        Ok(())
    }

    /// A checkpoint may free entry `e` (its lock held): it is this file's, live, committed
    /// (its epoch is older than the file's), and a redo entry's bytes were copied home
    /// (`copied_home`) and made durable before this is asked. Freeing anything else would
    /// lose bytes recovery needs.
    fn assert_checkpointable(&self, e: &EntryState, copied_home: bool) {
        let epoch = self.epoch.load(Ordering::Acquire);
        assert!(
            e.live && e.file_slot == self.slot,
            "checkpoint of a foreign entry"
        );
        assert!(
            e.epoch < epoch,
            "checkpoint of an uncommitted entry (epoch {} of {epoch})",
            e.epoch
        );
        assert!(
            !e.policy_redo || copied_home,
            "a redo entry freed before its bytes are home"
        );
    }

    /// Drop a freed entry from the DRAM index and give its resources back (its lock held).
    pub(crate) fn forget(&self, s: &Shared<R, M>, id: u32, e: &mut EntryState) {
        assert!(e.live && e.file_slot == self.slot, "entry {id} freed twice");
        let blocks = e.size() / BLOCK_SIZE;
        self.tree.remove_range(e.file_off / BLOCK_SIZE, blocks, id);
        e.live = false;
        self.live_count.fetch_sub(1, Ordering::AcqRel);
        if e.policy_redo {
            // Release: a reader that sees no redo entry left sees the bytes copied home.
            self.redo_live.fetch_sub(1, Ordering::Release);
        }
        s.unreserve(id, e.log_off, e.order);
        s.counters
            .background
            .entries_checkpointed
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Checkpoint every committed entry, holding no file lock across the copies (the
    /// background thread, `checkpoint_all`). The mapping and host length are a snapshot,
    /// which commits going on meanwhile may outdate: an entry the snapshot does not wholly
    /// reach (the file grew since) stops the drain, which goes on with a fresh snapshot.
    pub(crate) fn checkpoint_committed(&self, s: &Shared<R, M>) -> Result<usize> {
        let mut total = 0;
        for _ in 0..SNAPSHOTS_MAX {
            let (map, host_len, path) = {
                let st = self.state.read();
                (st.map.clone(), st.host_len, st.path.clone())
            };
            let path = path.unwrap_or_else(|| "?".into());
            let home = Home {
                map: map.as_deref(),
                host_len,
                path: &path,
                current: false,
            };
            let _one = self.ckpt.lock();
            let (n, outdated) = self.drain_committed(s, &home)?;
            total += n;
            if !outdated {
                break;
            }
        }
        Ok(total)
    }

    /// Checkpoint every committed entry, the file's lock held by the caller (shared or
    /// exclusive).
    pub(crate) fn checkpoint_locked(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
    ) -> Result<usize> {
        let home = Home {
            map: st.map.as_deref(),
            host_len: st.host_len,
            path: st.path.as_deref().unwrap_or("?".as_ref()),
            current: true,
        };
        let _one = self.ckpt.lock();
        Ok(self.drain_committed(s, &home)?.0)
    }

    /// Batches off the queue's front until it holds no committed entry (checkpoint mutex
    /// held). Returns how many entries were checkpointed, and whether the drain stopped at a
    /// committed entry `home` does not reach.
    fn drain_committed(&self, s: &Shared<R, M>, home: &Home<'_, M::Map>) -> Result<(usize, bool)> {
        let mut total = 0;
        loop {
            let (batch, outdated) = self.take_committed(s, home);
            if batch.is_empty() {
                return Ok((total, outdated));
            }
            total += batch.len();
            self.checkpoint_batch(s, home, batch)?;
        }
    }

    /// The oldest committed entries, locked (stale queue items are dropped on the way), and
    /// whether taking stopped at a committed entry `home` does not reach.
    fn take_committed<'s>(
        &self,
        s: &'s Shared<R, M>,
        home: &Home<'_, M::Map>,
    ) -> (Taken<'s>, bool) {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let mut outdated = false;
        while out.len() < CHECKPOINT_BATCH_ENTRIES && bytes < CHECKPOINT_BATCH_BYTES {
            let Some((id, generation)) = self.queue.lock().pop_front() else {
                break;
            };
            if out.iter().any(|(i, _, _)| *i == id) {
                continue; // a stale mention of a slot this batch holds (we would self-lock)
            }
            // The queue's mutex is not held here: a writer creating an entry holds that
            // entry's lock while it queues it.
            let g = s.entries[id as usize].write();
            if !g.live || g.generation != generation || g.file_slot != self.slot {
                continue; // freed out of order (and perhaps reused): not ours any more
            }
            let end = g.file_off + g.delta_off as u64 + g.delta_len as u64;
            let committed = g.epoch < epoch;
            let reachable = !g.policy_redo || home.reaches(end);
            if !committed || !reachable {
                outdated = committed;
                drop(g);
                self.queue.lock().push_front((id, generation));
                break;
            }
            bytes += g.delta_len as u64;
            out.push((id, generation, g));
        }
        (out, outdated)
    }

    /// Copy a batch's redo chunks home, make them durable, free the entries.
    fn checkpoint_batch(
        &self,
        s: &Shared<R, M>,
        home: &Home<'_, M::Map>,
        mut batch: Taken<'_>,
    ) -> Result<()> {
        if let Some(map) = home.map {
            if batch.iter().any(|(_, _, g)| g.policy_redo) {
                for (_, _, g) in &batch {
                    if g.policy_redo {
                        copy_chunk_home(s, map, home.host_len, g);
                    }
                }
                // persist: every checkpointed byte is home (msync on a non-DAX file system)
                // before its entry is freed.
                map.fence();
                if let Err(err) = s.media.check_map(map) {
                    // Not durable: the entries stay live, back at the queue's front.
                    let mut q = self.queue.lock();
                    for (id, generation, _) in batch.iter().rev() {
                        q.push_front((*id, *generation));
                    }
                    return Err(io_err(home.path, "msync", err));
                }
            }
        }
        for (id, _, g) in &batch {
            self.assert_checkpointable(g, home.map.is_some());
            s.clear_entry(*id);
        }
        // persist: the checkpointed entries are free.
        s.pool.fence();
        for (id, _, g) in batch.iter_mut() {
            self.forget(s, *id, g);
        }
        Ok(())
    }

    /// Take the entries of the running epoch off the queue's back, locked (abort; checkpoint
    /// mutex held by the caller).
    pub(crate) fn take_uncommitted<'s>(
        &self,
        s: &'s Shared<R, M>,
    ) -> Vec<(u32, RwLockWriteGuard<'s, EntryState>)> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut out = Vec::new();
        loop {
            let Some((id, generation)) = self.queue.lock().pop_back() else {
                break;
            };
            if out.iter().any(|(i, _)| *i == id) {
                // A stale mention of a slot taken above (popped from the back, the live
                // mention comes first); locking it again would deadlock.
                continue;
            }
            let g = s.entries[id as usize].write();
            if !g.live || g.generation != generation || g.file_slot != self.slot {
                continue;
            }
            if g.epoch != epoch {
                drop(g);
                self.queue.lock().push_back((id, generation));
                break;
            }
            out.push((id, g));
        }
        out
    }
}

/// Copy an entry's chunk (clipped to the host length) from the log home, durable at the next
/// fence of `map`.
pub(crate) fn copy_chunk_home<R: Region, M: FileMedia>(
    s: &Shared<R, M>,
    map: &M::Map,
    host_len: u64,
    e: &EntryState,
) {
    let a = e.file_off + e.delta_off as u64;
    let b = (a + e.delta_len as u64).min(host_len);
    if a < b {
        copy_durable(&s.pool, e.log_off + e.delta_off as u64, map, a, b - a);
    }
}
