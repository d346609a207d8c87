//! `journal` — the NJS journal of atomfs: a persistent-memory journal in front of files on an
//! ordinary file system.
//!
//! Home files stay ordinary files in a home directory (any [`hostfs::HostFs`]); every
//! transaction is durable once it is in the PM journal (any [`pmem::Region`]). This crate holds
//! the journal core of the NJS seed:
//!
//! - PM layout (§3.2, [`layout`]): superblock with the area pointers p_first, p_checkpoint,
//!   p_commit and p_first_free; one 16-byte journal header per 4 KiB journal block with the
//!   f/v/l flags, jh_number, write_count, j_blocknr and home block; a reserved header block for
//!   the persistent header copies of a swap.
//! - Write path (§3.1, [`Journal::write`], [`Journal::commit`]): over-writes of home blocks
//!   that hold durable bytes are journaled; blocks wholly past the durable end are appended
//!   straight to the home file and made durable (sync_data) before the commit point.
//! - Wear-aware allocation (§3.3, [`wear`]), byte-level delta updates with a DRAM version
//!   table (§3.5, [`delta`], [`versions`]), garbage collection and delayed checkpointing
//!   (§3.6), recovery (§3.7). See docs/engines/journal.md.
//!
//! A commit becomes durable by one 8-byte atomic store of p_checkpoint after the journal
//! blocks and headers are persisted.

#![deny(unsafe_code)]

#[cfg(feature = "crash-target")]
pub mod crash_target;
pub mod delta;
mod engine;
mod error;
pub mod home;
mod journal;
pub mod layout;
pub mod versions;
pub mod wear;

pub use engine::meta_log::{self, MetaFormat};
pub use engine::{
    home_namer, recorded_home, HostJournalStore, JournalStore, StoreConfig, META_NAME,
};
pub use error::{JournalError, JournalResult};
pub use journal::{Checkpointer, FsckFindings, Journal, JournalStats, Tx, CHECKPOINT_THREAD_NAME};
pub use layout::{BlockKey, BLOCK_LEN};

use std::time::Duration;

/// Variants of the engine for the seed's ablations (bench only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Byte-level delta updates (§3.5). Off: NJS-no-BJ, every version is a whole block.
    pub delta: bool,
    /// Garbage collection before checkpointing (§3.6). Off: a low journal checkpoints at once.
    pub gc: bool,
    /// Appends are journaled too instead of written home directly.
    pub all_journal: bool,
    /// Wear-aware allocation (§3.3). Off: the head of the free area is used as it is.
    pub wear: bool,
}

impl Variant {
    /// Every mechanism of the seed on.
    pub const NJS: Variant = Variant {
        delta: true,
        gc: true,
        all_journal: false,
        wear: true,
    };
}

impl Default for Variant {
    fn default() -> Self {
        Variant::NJS
    }
}

/// Limits and tunables of a journal (limits named with the qualifier last).
#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// Journal blocks of 4 KiB in the PM region (used by [`Journal::create`]).
    pub journal_blocks: u32,
    /// Garbage collection (then, if still low, a checkpoint) starts when fewer than this
    /// percentage of journal blocks are free (seed: 25).
    pub free_percent_min: u32,
    /// Period of the background checkpoint (seed: 5 s); `None`: only on demand.
    pub checkpoint_period: Option<Duration>,
    /// The least-worn free block is swapped to the head of the free area only when the head
    /// has been written more than this many times more (0: always, as in the seed). Each swap
    /// costs three persistence points; a small slack keeps wear within a few writes.
    pub wear_slack: u32,
    /// Home files kept open at once (the least recently opened beyond it are closed and
    /// reopened when needed again).
    pub open_files_max: usize,
    /// Mechanisms on or off.
    pub variant: Variant,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            journal_blocks: 32 * 1024,
            free_percent_min: 25,
            checkpoint_period: Some(Duration::from_secs(5)),
            wear_slack: 4,
            open_files_max: 1024,
            variant: Variant::NJS,
        }
    }
}

impl JournalConfig {
    /// Every limit shrunk so that tests reach the edges quickly.
    pub fn test_min() -> Self {
        JournalConfig {
            journal_blocks: 16,
            free_percent_min: 25,
            checkpoint_period: None,
            wear_slack: 1,
            open_files_max: 4,
            variant: Variant::NJS,
        }
    }
}
