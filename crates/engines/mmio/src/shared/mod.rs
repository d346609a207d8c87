//! State shared by every file of a store: the log pool, its allocators, the DRAM half of the
//! index entries (with their reader-writer locks), counters and the checkpoint thread.

mod free_slots;

use crate::file::radix::Buddy;
use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::log::layout::{self, ie, IndexEntry, Policy, Superblock};
use crate::MmioConfig;
use free_slots::FreeSlots;
use parking_lot::{Condvar, Mutex, RwLock};
use pmem::Region;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Weak;

/// DRAM state of one index entry (valid while `live`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EntryState {
    pub(crate) live: bool,
    /// Bumped every time the index slot is reused: tells a file's queue of its entries
    /// (`MmioFile::queue`) a live entry from a stale mention of a freed one.
    pub(crate) generation: u32,
    pub(crate) file_slot: u32,
    pub(crate) policy_redo: bool,
    pub(crate) order: u8,
    pub(crate) epoch: u64,
    pub(crate) file_off: u64,
    pub(crate) log_off: u64,
    pub(crate) delta_off: u32,
    pub(crate) delta_len: u32,
}

impl EntryState {
    pub(crate) fn size(&self) -> u64 {
        layout::BLOCK_SIZE << self.order
    }
    pub(crate) fn policy(&self) -> Policy {
        if self.policy_redo {
            Policy::Redo
        } else {
            Policy::Undo
        }
    }
    pub(crate) fn covers(&self, slot: u32, off: u64) -> bool {
        self.live
            && self.file_slot == slot
            && off >= self.file_off
            && off < self.file_off + self.size()
    }
}

/// Named counters of the engine. The ones the checkpoint thread bumps sit on their own cache
/// line, so that the foreground's counters do not bounce between the two cores.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) writes: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) bytes_logged: AtomicU64,
    pub(crate) bytes_direct: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) tx_commits: AtomicU64,
    pub(crate) entries_created: AtomicU64,
    pub(crate) sync_checkpoints: AtomicU64,
    pub(crate) policy_switches: AtomicU64,
    pub(crate) aborts: AtomicU64,
    pub(crate) background: BackgroundCounters,
}

/// Counters of checkpointing (see [`Counters`]).
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct BackgroundCounters {
    pub(crate) entries_checkpointed: AtomicU64,
    pub(crate) background_checkpoints: AtomicU64,
}

pub(crate) struct Shared<R: Region, M: FileMedia> {
    pub(crate) pool: R,
    pub(crate) sb: Superblock,
    pub(crate) media: M,
    pub(crate) config: MmioConfig,
    pub(crate) entries: Vec<RwLock<EntryState>>,
    pub(crate) free_entries: Mutex<FreeSlots>,
    pub(crate) log_space: Mutex<Buddy>,
    pub(crate) free_file_slots: Mutex<FreeSlots>,
    pub(crate) free_tx_records: Mutex<FreeSlots>,
    pub(crate) free_intents: Mutex<FreeSlots>,
    pub(crate) intent_seq: std::sync::atomic::AtomicU64,
    /// Files with a metadata slot, by slot (for the checkpoint thread).
    pub(crate) files: Mutex<HashMap<u32, Weak<MmioFile<R, M>>>>,
    pub(crate) counters: Counters,
    /// Others' use of the host file system, for `statfs` (hostfs::SharedUsage).
    pub(crate) usage: hostfs::SharedUsage,
    pub(crate) work: Mutex<bool>,
    pub(crate) work_cv: Condvar,
    pub(crate) stop: AtomicBool,
}

impl<R: Region, M: FileMedia> Shared<R, M> {
    pub(crate) fn new(pool: R, sb: Superblock, media: M, config: MmioConfig) -> Self {
        let entries = (0..sb.index_entries_max)
            .map(|_| RwLock::new(EntryState::default()))
            .collect();
        Shared {
            log_space: Mutex::new(Buddy::new(
                sb.log_off,
                sb.log_len,
                layout::BLOCK_SIZE,
                sb.order_max(),
            )),
            free_entries: Mutex::new(FreeSlots::all_free(sb.index_entries_max)),
            free_file_slots: Mutex::new(FreeSlots::all_free(sb.files_max)),
            free_tx_records: Mutex::new(FreeSlots::all_free(sb.tx_records_max)),
            free_intents: Mutex::new(FreeSlots::all_free(sb.intents_max)),
            intent_seq: std::sync::atomic::AtomicU64::new(1),
            files: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            usage: hostfs::SharedUsage::new(),
            work: Mutex::new(false),
            work_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            entries,
            pool,
            sb,
            media,
            config,
        }
    }

    /// Reserve an index slot and log space of `order`; `None` when the log pool is full.
    pub(crate) fn reserve(&self, order: u8) -> Option<(u32, u64)> {
        let idx = self.free_entries.lock().pop()?;
        match self.log_space.lock().alloc(order) {
            Some(off) => Some((idx, off)),
            None => {
                self.free_entries.lock().push(idx);
                None
            }
        }
    }

    /// Give back a reservation (or a freed entry's resources).
    pub(crate) fn unreserve(&self, idx: u32, log_off: u64, order: u8) {
        self.log_space.lock().release(log_off, order);
        self.free_entries.lock().push(idx);
    }

    /// Write a new index entry: its body, then the epoch word that makes it valid (the last
    /// store to the entry's cache line, so a line persisted at any intermediate content has
    /// either a free epoch word or the whole new body). The log data it describes must have
    /// been stored (non-temporal or flushed) before.
    ///
    /// Undo (`ordered`): the old bytes and the body are durable before the epoch word, and
    /// the entry is durable before this returns: the home write may follow. Redo: the entry is
    /// only flushed; the commit's fence makes it and its data durable before the epoch bump,
    /// and until then recovery discards it anyway (an uncommitted redo entry is dropped,
    /// whatever its data).
    pub(crate) fn publish_entry(&self, idx: u32, e: &IndexEntry, ordered: bool) {
        let at = self.sb.index_at(idx);
        let body = e.encode_checked(&self.sb);
        self.pool.write(at + 8, &body);
        if ordered {
            // persist: the entry's body and the logged old bytes are durable before the epoch
            // word makes the entry valid (recovery copies a valid undo entry's bytes home).
            self.pool.persist(at + 8, 56);
            self.pool.store_u64(at + ie::EPOCH, e.epoch);
            // persist: the entry is valid: the old bytes are protected, the home write may
            // follow.
            self.pool.persist(at, 8);
        } else {
            self.pool.store_u64(at + ie::EPOCH, e.epoch);
            self.pool.flush(at, layout::INDEX_ENTRY_LEN);
        }
    }

    /// Store a new delta word of a live entry (flushed, not fenced: callers fence).
    pub(crate) fn set_delta(&self, idx: u32, off: u32, len: u32) {
        self.pool.store_u64(
            self.sb.index_at(idx) + ie::DELTA,
            layout::pack_delta(off, len),
        );
        self.pool.flush(self.sb.index_at(idx) + ie::DELTA, 8);
    }

    /// Invalidate an index entry (flushed, not fenced: callers fence once for a batch).
    pub(crate) fn clear_entry(&self, idx: u32) {
        let at = self.sb.index_at(idx);
        self.pool.store_u64(at + ie::EPOCH, 0);
        self.pool.flush(at, 8);
    }

    /// Tell the checkpoint thread there are committed entries.
    pub(crate) fn signal_work(&self) {
        if self.config.checkpoint_period.is_some() {
            *self.work.lock() = true;
            self.work_cv.notify_one();
        }
    }
}

/// The background checkpoint loop: wait for committed entries, let them age one period (so
/// that a burst of syncs is checkpointed together), checkpoint every file's committed entries
/// (oldest first, in batches that never hold a file's lock: commits go on meanwhile), repeat.
pub(crate) fn checkpoint_loop<R: Region, M: FileMedia>(shared: Weak<Shared<R, M>>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let Some(period) = s.config.checkpoint_period else {
            return;
        };
        {
            let mut work = s.work.lock();
            while !*work && !s.stop.load(Ordering::Acquire) {
                s.work_cv
                    .wait_for(&mut work, std::time::Duration::from_millis(50));
            }
            *work = false;
        }
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        std::thread::sleep(period);
        let files: Vec<_> = s.files.lock().values().filter_map(Weak::upgrade).collect();
        for f in files {
            if let Ok(n) = f.checkpoint_committed(&s) {
                if n > 0 {
                    s.counters
                        .background
                        .background_checkpoints
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
