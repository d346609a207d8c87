//! [`Journal`]: the NJS journal over a PM region and a home directory.
//!
//! One mutex guards the journal's DRAM state (area pointers, version table, free list);
//! a checkpoint holds it only to take its snapshot and to advance p_first, and writes home
//! without it, so commits go on meanwhile (they wait only when the journal is full).

mod background;
mod checkpoint;
mod commit;
mod extents;
mod fsck;
mod gc;
mod media;
mod recovery;
mod swap;
mod tx;

pub use background::{Checkpointer, CHECKPOINT_THREAD_NAME};
pub use fsck::FsckFindings;
pub use tx::Tx;

use crate::home::{HomeFiles, HomeNamer};
use crate::layout::{Geometry, Superblock};
use crate::versions::VersionTable;
use crate::wear::WearList;
use crate::{JournalConfig, JournalError, JournalResult};
use hostfs::HostFs;
use parking_lot::Mutex;
use pmem::Region;

/// Where a checkpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CheckpointPhase {
    Idle,
    /// Writing the latest versions of positions before `upto` home; GC must wait.
    WritingHome {
        upto: u64,
    },
}

/// Counters of a journal (reported by `stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    pub commits: u64,
    /// Journal blocks written whole.
    pub full_blocks: u64,
    /// Journal blocks written as a byte delta onto their old version.
    pub delta_blocks: u64,
    /// Bytes written by delta updates.
    pub delta_bytes: u64,
    /// Bytes appended straight to home files.
    pub appended_bytes: u64,
    /// Swaps of the wear-aware allocator.
    pub wear_swaps: u64,
    /// Swaps of old versions out of the checkpoint area (delta updates).
    pub delta_swaps: u64,
    pub gc_runs: u64,
    pub gc_swaps: u64,
    pub checkpoints: u64,
    pub checkpointed_blocks: u64,
    /// Background checkpoints that failed (and were retried).
    pub checkpoint_errors: u64,
}

/// The journal's DRAM state.
struct State {
    p_first: u64,
    p_checkpoint: u64,
    p_commit: u64,
    versions: VersionTable,
    free: WearList,
    phase: CheckpointPhase,
    stats: JournalStats,
}

impl State {
    fn free_blocks(&self, g: &Geometry) -> u64 {
        self.p_first + g.blocks() as u64 - self.p_commit
    }
}

/// The NJS journal (see the crate documentation).
pub struct Journal<R: Region, H: HostFs> {
    region: R,
    geometry: Geometry,
    config: JournalConfig,
    home: HomeFiles<H>,
    state: Mutex<State>,
    /// Held for a whole checkpoint: one at a time.
    checkpointing: Mutex<()>,
    /// The background checkpointer's wake-up channel, when one runs.
    wake: Mutex<Option<std::sync::Arc<background::Wake>>>,
}

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Format `region` as an empty journal of `config.journal_blocks` blocks (at most what
    /// fits) and open it.
    pub fn create(
        region: R,
        host: H,
        namer: HomeNamer,
        config: JournalConfig,
    ) -> JournalResult<Self> {
        let fit = Geometry::fitting(region.len()).ok_or_else(|| {
            JournalError::Config(format!("PM region of {} bytes is too small", region.len()))
        })?;
        let blocks = config.journal_blocks.min(fit.blocks());
        let geometry = Geometry::new(blocks)
            .ok_or_else(|| JournalError::Config(format!("journal of {blocks} blocks")))?;
        media::format(&region, geometry);
        Self::open(region, host, namer, config)
    }

    /// Open a journal, running recovery (§3.7).
    pub fn open(
        region: R,
        host: H,
        namer: HomeNamer,
        config: JournalConfig,
    ) -> JournalResult<Self> {
        if config.free_percent_min >= 100 {
            return Err(JournalError::Config(
                "free_percent_min must be below 100".into(),
            ));
        }
        let geometry = Superblock::read(&region)?.geometry();
        let open_files_max = config.open_files_max;
        let journal = Journal {
            region,
            geometry,
            config,
            home: HomeFiles::new(host, namer, open_files_max),
            state: Mutex::new(State {
                p_first: 0,
                p_checkpoint: 0,
                p_commit: 0,
                versions: VersionTable::new(),
                free: WearList::new(),
                phase: CheckpointPhase::Idle,
                stats: JournalStats::default(),
            }),
            checkpointing: Mutex::new(()),
            wake: Mutex::new(None),
        };
        {
            let mut st = journal.state.lock();
            journal.recover(&mut st)?;
        }
        Ok(journal)
    }

    pub fn region(&self) -> &R {
        &self.region
    }

    pub fn home(&self) -> &HomeFiles<H> {
        &self.home
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    pub fn config(&self) -> &JournalConfig {
        &self.config
    }

    pub fn stats(&self) -> JournalStats {
        self.state.lock().stats
    }

    /// Free journal blocks now.
    pub fn free_blocks(&self) -> u64 {
        self.state.lock().free_blocks(&self.geometry)
    }

    /// Home blocks with a version in the journal.
    pub fn journaled_blocks(&self) -> usize {
        self.state.lock().versions.len()
    }

    /// Write count of every journal block, indexed by j_blocknr (the seed's Fig. 14).
    pub fn write_counts(&self) -> Vec<u32> {
        let _st = self.state.lock();
        let mut counts = vec![0u32; self.geometry.blocks() as usize];
        for slot in 0..self.geometry.blocks() {
            if let Ok(h) = self.header(slot) {
                if let Some(c) = counts.get_mut(h.j_blocknr as usize) {
                    *c = h.write_count;
                }
            }
        }
        counts
    }

    /// Free-space threshold below which GC (then a checkpoint) runs.
    fn low_water(&self) -> u64 {
        self.geometry.blocks() as u64 * self.config.free_percent_min as u64 / 100
    }
}
