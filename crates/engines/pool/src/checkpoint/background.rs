//! Checkpointing beyond one batch: every committed version of every file (unmount, the
//! comparison modes at open), a writer making room, and the background threads that take
//! blocks from a queue and checkpoint them (seed §III-E "Triggers").

use super::block::CHECKPOINT_BATCH;
use crate::core::Core;
use crate::sharing::Padded;
use parking_lot::{Condvar, Mutex, RwLock};
use pmem::Region;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Result;

impl<R: Region> Core<R> {
    /// Checkpoint every committed version of every file.
    pub(crate) fn checkpoint_all(&self) -> Result<()> {
        self.checkpoint_while(|| true)
    }

    /// Checkpoint committed versions file by file, a batch of blocks at a time (the inode
    /// lock is let go between batches), for as long as `more()` says so before each batch.
    /// Successive calls start at successive files, so that a caller that stops early (a
    /// writer making room) does not checkpoint the same files every time.
    pub(crate) fn checkpoint_while(&self, mut more: impl FnMut() -> bool) -> Result<()> {
        let cells: Vec<_> = self.cells.read().values().cloned().collect();
        if cells.is_empty() {
            return Ok(());
        }
        let start = self.checkpointer.cursor.fetch_add(1, Ordering::Relaxed) % cells.len();
        for cell in cells[start..].iter().chain(&cells[..start]) {
            let lbns: Vec<u64> = cell
                .lock_spinning()
                .pending
                .iter()
                .filter(|(_, l)| l.first().is_some_and(|v| v.committed))
                .map(|(l, _)| l)
                .collect();
            for batch in lbns.chunks(CHECKPOINT_BATCH) {
                if !more() {
                    return Ok(());
                }
                self.checkpoint_blocks(&mut cell.lock_spinning(), batch)?;
                cell.let_waiters_in();
            }
        }
        Ok(())
    }

    /// Any committed version waiting for a checkpoint?
    pub(crate) fn has_committed_versions(&self) -> bool {
        !self.commits.is_empty()
    }
}

/// Work queue and wake-up of the background checkpointing threads.
#[derive(Default)]
pub(crate) struct CheckpointQueue {
    /// Taken by the checkpoint threads on every round: alone on its lines (`Padded`).
    pub(crate) queue: Padded<Mutex<VecDeque<(u64, u64)>>>,
    pub(crate) wake: Condvar,
    pub(crate) stop: AtomicBool,
    pub(crate) everything: AtomicBool,
    /// Where the next `checkpoint_while` starts among the files (bumped by the checkpoint
    /// threads: on lines of its own, away from `epoch`, which every commit reads).
    pub(crate) cursor: Padded<std::sync::atomic::AtomicUsize>,
    /// Milliseconds since `epoch` of the last commit (idle trigger). Written by committing
    /// threads (`note_commit`), alone on its lines.
    pub(crate) last_commit_ms: Padded<AtomicU64>,
    pub(crate) epoch: Padded<Option<Instant>>,
    /// Held shared by a background thread while it checkpoints, exclusively by fsck, so that
    /// fsck sees blocks, entries and free lists at one instant (taken with no other lock).
    pub(crate) pause: Padded<RwLock<()>>,
}

impl CheckpointQueue {
    pub(crate) fn new() -> Self {
        CheckpointQueue {
            epoch: Padded::new(Some(Instant::now())),
            ..Default::default()
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.map_or(0, |e| e.elapsed().as_millis() as u64)
    }

    /// A commit happened now (idle trigger). Stored only when the millisecond changed: most
    /// commits leave the line alone.
    pub(crate) fn note_commit(&self) {
        let now = self.now_ms();
        if self.last_commit_ms.load(Ordering::Relaxed) != now {
            self.last_commit_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Ask for one block to be checkpointed.
    pub(crate) fn push(&self, ino: u64, lbn: u64) {
        self.queue.lock().push_back((ino, lbn));
        self.wake.notify_one();
    }

    /// Ask for everything to be checkpointed (low space). Every data operation asks while
    /// space is low: the flag is written (and the threads woken) only when it is not set
    /// already, so that the line the checkpoint threads poll is not taken from them on
    /// every call.
    pub(crate) fn push_all(&self) {
        if !self.everything.load(Ordering::Acquire) {
            self.everything.store(true, Ordering::Release);
            self.wake.notify_all();
        }
    }
}

/// Body of one background checkpointing thread.
pub(crate) fn checkpoint_thread<R: Region>(core: Arc<Core<R>>, queue: Arc<CheckpointQueue>) {
    let idle = core.cfg.checkpoint_idle_ms;
    loop {
        let items: Vec<(u64, u64)> = {
            let mut q = queue.queue.lock();
            if q.is_empty()
                && !queue.stop.load(Ordering::Acquire)
                && !queue.everything.load(Ordering::Acquire)
            {
                let wait = if idle == 0 { 1_000 } else { idle.max(1) };
                queue.wake.wait_for(&mut q, Duration::from_millis(wait));
            }
            let n = q.len().min(CHECKPOINT_BATCH);
            q.drain(..n).collect()
        };
        if queue.stop.load(Ordering::Acquire) {
            return;
        }
        let _running = queue.pause.read();
        if !items.is_empty() {
            checkpoint_items(&core, items);
            continue;
        }
        let idle_now = idle > 0
            && queue
                .now_ms()
                .saturating_sub(queue.last_commit_ms.load(Ordering::Relaxed))
                >= idle;
        if queue.everything.swap(false, Ordering::AcqRel)
            || core.blocks_low()
            || core.logs_low()
            || (idle_now && core.has_committed_versions())
        {
            let _ = core.checkpoint_all();
        }
    }
}

/// Checkpoint queued blocks, one batch per inode.
fn checkpoint_items<R: Region>(core: &Core<R>, mut items: Vec<(u64, u64)>) {
    items.sort_unstable();
    items.dedup();
    for group in items.chunk_by(|a, b| a.0 == b.0) {
        let Some(cell) = core.cells.read().get(&group[0].0).cloned() else {
            continue;
        };
        let lbns: Vec<u64> = group.iter().map(|i| i.1).collect();
        for batch in lbns.chunks(CHECKPOINT_BATCH) {
            let _ = core.checkpoint_blocks(&mut cell.lock_spinning(), batch);
            cell.let_waiters_in();
        }
    }
}
