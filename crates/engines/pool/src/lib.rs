//! `pool` — the atomfs engine that keeps files in a persistent-memory pool, implementing
//! FCFS (seed 000: "NVMM-optimized write-ahead logging" with hybrid fine-grained logging, a
//! two-level volatile index and concurrently selective checkpointing).
//!
//! Layout and protocol: docs/format.md; mapping to the seed: docs/engines/pool.md.
//!
//! ```text
//! api/         PoolStore: the Store trait, handles, O_ATOMIC; the open-transaction table
//! namespace/   namespace operations, directory blocks + DRAM index, uncommitted creates,
//!              orphans
//! data/        redo into pending blocks (write, write_plan, reservation), the DRAM block
//!              map, the TLVI (pending_index, tlvi), per-block data checksums
//! log/         64-byte log entries, the transaction: undo logging, commit, abort, its
//!              states; what committed transactions still owe the log (commits)
//! modes/       the comparison protocols: NC's DRAM undo, FG-WAL's cache-line undo log
//! checkpoint/  selective checkpointing of one block, the queue and background threads
//! recovery/    format and recovery, fsck, inspect, repair, salvage
//! alloc/       volatile free lists
//! media/       on-media layout, mapped pool files, private DRAM images
//! core         state every subsystem shares (region, geometry, allocators, inode cells)
//! sharing      what transactions and checkpoint threads share: padded words,
//!              spin-then-sleep locking
//! ```

#![deny(unsafe_code)]

mod alloc;
mod api;
mod checkpoint;
mod config;
mod core;
#[cfg(feature = "crash-target")]
pub mod crash_target;
mod data;
mod log;
mod media;
mod modes;
mod namespace;
mod recovery;
mod sharing;

pub use api::pool_store::PoolStore;
pub use config::{Mode, PoolConfig};
pub use data::write::NT_COPY_MIN;
pub use media::image::{load_image, open_private, region_bytes};
pub use media::layout::{Geometry, BLOCK_SIZE, FORMAT_VERSION};
pub use media::mapped::{create, open, prefault};
pub use recovery::inspect::{
    BlockMapInfo, LogEntryInfo, LogOccupancy, PendingListInfo, SuperblockInfo, VersionInfo,
};
pub use recovery::recover::RecoveryReport;
pub use recovery::repair::{repair, Quarantined, RepairReport};
pub use recovery::salvage::{salvage, SalvageReport, SalvageSink};
