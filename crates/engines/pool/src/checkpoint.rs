//! Concurrently selective checkpointing (seed §III-E, Algorithm 1, Fig. 5).
//!
//! All committed versions of one block are checkpointed in one group, under the inode's lock;
//! different blocks (of different files) are checkpointed in parallel by the background
//! threads. For one block:
//! 1. pick as the new permanent block the version (or the old permanent block) holding the
//!    most latest cache lines;
//! 2. copy into it only the latest lines it lacks, persist;
//! 3. if it is not the old permanent block, swing the 8-byte block pointer (atomic store),
//!    persist;
//! 4. free the data entries in commit order, each persisted before the next (ordering
//!    property 1), then the blocks; a transaction's undo, member and commit entries go once
//!    its last data entry is gone (ordering property 2, `Core::data_entry_retired`).
//!
//! Crash safety (docs/format.md, "Checkpoint"): until step 4 every committed entry is still
//! valid, and every line written in step 2 is the latest copy of that line, so whatever the
//! TLVI rebuilt by recovery picks for a line is the latest copy. Step 4 leaves a suffix (in
//! commit order) of the entries valid, which again resolves every line to its latest copy.
//! A second checkpoint after recovery does the same again: the algorithm is idempotent.

use crate::config::Mode;
use crate::core::{Core, InodeState};
use crate::layout::*;
use crate::tlvi::owners;
use parking_lot::{Condvar, Mutex};
use pmem::Region;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Error, Result};

impl<R: Region> Core<R> {
    /// Checkpoint every committed version of block `lbn` of `st.ino`.
    pub fn checkpoint_block(&self, st: &mut InodeState, lbn: u64) -> Result<()> {
        let Some(list) = st.pending.get(&lbn) else {
            return Ok(());
        };
        let k = list.iter().take_while(|v| v.committed).count();
        if k == 0 {
            return Ok(());
        }
        let versions: Vec<_> = list[..k].to_vec();
        let ptr = versions[0].ptr_addr;
        let (permanent, found_ptr) = self.permanent_block(st.ino, lbn)?;
        if found_ptr != Some(ptr) {
            return Err(Error::corrupt(
                format!(
                    "inode {} block {lbn}: redo entry names another pointer",
                    st.ino
                ),
                ptr,
            ));
        }
        let owner = owners(&versions, k);
        // Step 1: the block holding most latest lines (ties keep the permanent block).
        let mut counts = vec![0u32; k + 1];
        for o in owner.iter() {
            counts[o.map_or(0, |i| i + 1)] += 1;
        }
        let mut best = 0usize;
        if permanent != 0 && matches!(self.mode(), Mode::Soc) {
            best = 0;
        } else {
            for (i, &c) in counts.iter().enumerate().skip(1) {
                if c > counts[best] || (best == 0 && permanent == 0) {
                    best = i;
                }
            }
        }
        let target = if best == 0 {
            permanent
        } else {
            versions[best - 1].pbn
        };
        // Step 2: copy the missing latest lines.
        let copied = if self.mode() == Mode::Soc && best == 0 {
            self.apply_in_order(&versions, target)
        } else {
            self.copy_latest(&owner, &versions, permanent, target)
        };
        // persist: the new permanent block holds the latest copy of every line.
        self.region.fence();
        // Step 3: swing the pointer.
        if target != permanent {
            self.region.store_u64(ptr, target);
            self.region.flush(ptr, 8);
            // persist: the block pointer names the new permanent block before any redo entry
            // is freed.
            self.region.fence();
            self.counters
                .checkpoint_pointer_swings
                .fetch_add(1, Ordering::Relaxed);
        }
        // Step 4: free the entries in commit order, then the blocks.
        for v in &versions {
            self.clear_entry(self.geo.data_entry(v.slot));
            // persist: versions of a block are freed strictly in commit order (property 1).
            self.region.fence();
        }
        let mut release: Vec<u64> = versions.iter().map(|v| v.pbn).collect();
        release.push(permanent);
        release.sort_unstable();
        release.dedup();
        for pbn in release {
            if pbn != 0 && pbn != target {
                self.blocks.free(pbn);
            }
        }
        for v in &versions {
            self.data_slots.free(v.slot);
            self.data_entry_retired(v.txid);
        }
        if let Some(list) = st.pending.get_mut(&lbn) {
            list.drain(..k);
            if list.is_empty() {
                st.pending.remove(&lbn);
            }
        }
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.counters
            .checkpoint_lines_copied
            .fetch_add(copied, Ordering::Relaxed);
        Ok(())
    }

    /// Copy into `target` every line whose latest copy lives elsewhere. Returns lines copied.
    fn copy_latest(
        &self,
        owner: &[Option<usize>; 64],
        versions: &[crate::tlvi::Version],
        permanent: u64,
        target: u64,
    ) -> u64 {
        let mut copied = 0;
        let mut line = 0u64;
        while line < LINES_PER_BLOCK {
            let src = owner[line as usize].map_or(permanent, |i| versions[i].pbn);
            let mut end = line + 1;
            while end < LINES_PER_BLOCK
                && owner[end as usize].map_or(permanent, |i| versions[i].pbn) == src
            {
                end += 1;
            }
            if src != target {
                let (at, len) = (line * LINE, (end - line) * LINE);
                let dst = self.geo.block(target) + at;
                if src == 0 {
                    self.region.fill(dst, len, 0);
                } else {
                    let mut buf = [0u8; BLOCK_SIZE as usize];
                    self.region
                        .read(self.geo.block(src) + at, &mut buf[..len as usize]);
                    self.region.write(dst, &buf[..len as usize]);
                }
                self.region.flush(dst, len);
                copied += end - line;
            }
            line = end;
        }
        copied
    }

    /// SOC: apply every version's lines onto the permanent block, oldest first.
    fn apply_in_order(&self, versions: &[crate::tlvi::Version], target: u64) -> u64 {
        let mut copied = 0;
        for v in versions {
            let mut bits = v.bitmap;
            let mut buf = [0u8; LINE as usize];
            while bits != 0 {
                let line = u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                self.region
                    .read(self.geo.block(v.pbn) + line * LINE, &mut buf);
                self.region
                    .write(self.geo.block(target) + line * LINE, &buf);
                self.region
                    .flush(self.geo.block(target) + line * LINE, LINE);
                copied += 1;
            }
        }
        copied
    }

    /// Checkpoint every committed version of every file.
    pub fn checkpoint_all(&self) -> Result<()> {
        let cells: Vec<_> = self.cells.read().values().cloned().collect();
        for cell in cells {
            let mut st = cell.lock();
            let lbns: Vec<u64> = st
                .pending
                .iter()
                .filter(|(_, l)| l.first().is_some_and(|v| v.committed))
                .map(|(&l, _)| l)
                .collect();
            for lbn in lbns {
                self.checkpoint_block(&mut st, lbn)?;
            }
        }
        Ok(())
    }

    /// Any committed version waiting for a checkpoint?
    pub fn has_committed_versions(&self) -> bool {
        !self.committed.lock().is_empty()
    }
}

/// Work queue and wake-up of the background checkpointing threads.
#[derive(Default)]
pub struct CheckpointQueue {
    pub queue: Mutex<VecDeque<(u64, u64)>>,
    pub wake: Condvar,
    pub stop: AtomicBool,
    pub everything: AtomicBool,
    /// Milliseconds since `epoch` of the last commit (idle trigger).
    pub last_commit_ms: AtomicU64,
    pub epoch: Option<Instant>,
}

impl CheckpointQueue {
    pub fn new() -> Self {
        CheckpointQueue {
            epoch: Some(Instant::now()),
            ..Default::default()
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.epoch.map_or(0, |e| e.elapsed().as_millis() as u64)
    }

    /// Ask for one block to be checkpointed.
    pub fn push(&self, ino: u64, lbn: u64) {
        self.queue.lock().push_back((ino, lbn));
        self.wake.notify_one();
    }

    /// Ask for everything to be checkpointed (low space).
    pub fn push_all(&self) {
        self.everything.store(true, Ordering::Release);
        self.wake.notify_all();
    }
}

/// Body of one background checkpointing thread.
pub fn checkpoint_thread<R: Region>(core: Arc<Core<R>>, queue: Arc<CheckpointQueue>) {
    let idle = core.cfg.checkpoint_idle_ms;
    loop {
        let item = {
            let mut q = queue.queue.lock();
            if q.is_empty()
                && !queue.stop.load(Ordering::Acquire)
                && !queue.everything.load(Ordering::Acquire)
            {
                let wait = if idle == 0 { 1_000 } else { idle.max(1) };
                queue.wake.wait_for(&mut q, Duration::from_millis(wait));
            }
            q.pop_front()
        };
        if queue.stop.load(Ordering::Acquire) {
            return;
        }
        if let Some((ino, lbn)) = item {
            let cell = core.cell(ino);
            let mut st = cell.lock();
            let _ = core.checkpoint_block(&mut st, lbn);
            continue;
        }
        let idle_now = idle > 0
            && queue
                .now_ms()
                .saturating_sub(queue.last_commit_ms.load(Ordering::Relaxed))
                >= idle;
        if queue.everything.swap(false, Ordering::AcqRel)
            || core.blocks_low()
            || (idle_now && core.has_committed_versions())
        {
            let _ = core.checkpoint_all();
        }
    }
}
