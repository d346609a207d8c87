//! `pool` — the atomfs engine that keeps files in a persistent-memory pool, implementing
//! FCFS (seed 000: "NVMM-optimized write-ahead logging" with hybrid fine-grained logging, a
//! two-level volatile index and concurrently selective checkpointing).
//!
//! Layout and protocol: docs/format.md; mapping to the seed: docs/engines/pool.md.
//!
//! ```text
//! PoolStore (store_impl, txn)      Store trait, handles, transaction table, O_ATOMIC
//!   ns, dir                        namespace operations, directory blocks + DRAM index
//!   creates                        uncommitted creates: kept to their transaction
//!   data, modes, tlvi              data path: redo into pending blocks, TLVI reads
//!   plan                           a write's read-only plan and its reservation
//!   blockmap                       DRAM copy of a file's block map for the plans
//!   nc, lines                      NC's DRAM undo, FG-WAL's cache-line undo log
//!   tx, entry                      undo log, commit / abort, 64-byte log entries
//!   checkpoint                     selective checkpointing, background threads
//!   checksum                       optional per-block data crc32c kept in the block pointer
//!   recovery, fsck, inspect        open/recover, check, read-only views
//!   image                          private DRAM images of a pool file (read-only checks)
//!   repair, repair_*, salvage      fsck --repair, and copying files out of a damaged pool
//!   core, layout, alloc            shared state, on-media layout, volatile allocators
//!   sharing                        what transactions and checkpoint threads share: padded
//!                                  words, spin-then-sleep locking
//! ```

#![deny(unsafe_code)]

mod alloc;
mod blockmap;
mod checkpoint;
mod checksum;
mod config;
mod core;
#[cfg(feature = "crash-target")]
pub mod crash_target;
mod creates;
mod data;
mod dir;
mod entry;
mod fsck;
mod image;
mod inspect;
mod layout;
mod lines;
mod logged;
mod mapped;
mod modes;
mod nc;
mod ns;
mod orphan;
mod plan;
mod radix;
mod recovery;
mod repair;
mod repair_dirs;
mod repair_inodes;
mod repair_lost;
mod salvage;
mod sharing;
mod store_impl;
mod tlvi;
mod tx;
mod txn;

pub use config::{Mode, PoolConfig};
pub use data::NT_COPY_MIN;
pub use image::{load_image, open_private, region_bytes};
pub use inspect::{
    BlockMapInfo, LogEntryInfo, LogOccupancy, PendingListInfo, SuperblockInfo, VersionInfo,
};
pub use layout::{Geometry, BLOCK_SIZE, FORMAT_VERSION};
pub use mapped::{create, open, prefault};
pub use recovery::RecoveryReport;
pub use repair::{repair, Quarantined, RepairReport};
pub use salvage::{salvage, SalvageReport, SalvageSink};
pub use store_impl::PoolStore;
