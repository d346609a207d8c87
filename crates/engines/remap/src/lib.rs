//! `remap` — the ACCFS engine of atomfs: single-write data journaling with checkpoint by
//! remapping (SHARE on the SSD in the seed; FICLONERANGE on XFS and Btrfs here).
//!
//! A store is a directory on the host file system holding a journal file (the store's path,
//! what the registry probes), a snapshot file `<journal>.meta` and one home file per inode in
//! `<journal>.files/`. Every commit — a call outside a transaction, `tx_commit`, the `fsync`
//! of an O_ATOMIC file, `syncv` — appends one record to the journal (metadata operations and
//! the data blocks, each written once) and makes it durable with one `sync_data` (SDJ, §4).
//! The A-tree ([`atree`]) keeps, per file, the newest version of each home block: committed
//! pairs point into the journal, pending (A-flagged) pairs hold data not yet committed
//! (SADJ, §4.3). A checkpoint remaps each home range onto its journal blocks instead of
//! copying, syncs the home files, then writes the "checkpointed" mark (a snapshot of a new
//! generation) and reclaims the journal. Recovery redoes the committed records of the
//! snapshot's generation and checkpoints again: zero-copy and idempotent.
//!
//! See docs/engines/remap.md and docs/format.md ("remap").

#![deny(unsafe_code)]

pub mod atree;
#[cfg(feature = "crash-target")]
pub mod crash_target;
pub mod format;
pub mod ftl;
pub mod journal;
mod namespace;
mod store;

pub use crate::store::{recorded_home, Counters, HostRemapStore, RemapStore};

/// How a checkpoint moves committed blocks home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointMode {
    /// FICLONERANGE of journal blocks onto the home file (zero-copy).
    Remap,
    /// Read from the journal, write the home file (file systems without reflink).
    Copy,
}

/// Default [`RemapConfig::exchange_blocks_min`]: 1 MiB of changed blocks.
pub const EXCHANGE_BLOCKS_MIN: u64 = 256;
/// Default [`RemapConfig::exchange_share_percent`]: whole-file rewrites only. Measured
/// (docs/engines/remap.md, "Exchange commits"; `examples/exchange.rs`): on XFS over a loop
/// device, staging + swap + checkpoint costs 1.5–3× journal + remap + checkpoint for a
/// partial rewrite of scattered blocks and about the same for a contiguous one; it only
/// matches or beats the journal when every block is rewritten (no clone into the stage).
pub const EXCHANGE_SHARE_PERCENT: u64 = 100;

/// Limits and choices of a remap store.
#[derive(Clone, Debug)]
pub struct RemapConfig {
    /// Checkpoint by copy where the file system cannot remap (chosen at create, recorded).
    pub copy_checkpoint: bool,
    /// Checkpoint once the journal reaches this many bytes (when nothing holds it back).
    pub checkpoint_journal_len: u64,
    /// Exchange commit (XFS_IOC_EXCHANGE_RANGE, where the file system offers it): a commit
    /// that changes at least this many blocks of one file ...
    pub exchange_blocks_min: u64,
    /// ... and at least this percentage of the file's blocks stages the file's new content
    /// and swaps it in, instead of journaling the blocks (store/exchange.rs).
    pub exchange_share_percent: u64,
    /// Handles open at once (EMFILE past it).
    pub open_files_max: u64,
    /// Transactions open at once (EMFILE past it).
    pub open_transactions_max: u64,
    /// Uncommitted blocks one file may hold in memory (an open transaction's or an O_ATOMIC
    /// file's writes before the commit): a write past it fails with ENOSPC and changes
    /// nothing; commit (fsync) or abort frees them.
    pub pending_blocks_max: u64,
    /// Bytes of extended attributes (names and values) one inode may hold: they live in
    /// memory and every commit that changes them logs the inode's whole set. ENOSPC past it.
    pub xattr_bytes_max: u64,
}

/// Default [`RemapConfig::open_files_max`].
pub const OPEN_FILES_MAX: u64 = 65_536;
/// Default [`RemapConfig::open_transactions_max`].
pub const OPEN_TRANSACTIONS_MAX: u64 = 1024;
/// Default [`RemapConfig::pending_blocks_max`]: 1 GiB of uncommitted data per file.
pub const PENDING_BLOCKS_MAX: u64 = 262_144;
/// Default [`RemapConfig::xattr_bytes_max`]: 256 KiB per inode (four largest values).
pub const XATTR_BYTES_MAX: u64 = 256 << 10;

impl Default for RemapConfig {
    fn default() -> Self {
        RemapConfig {
            copy_checkpoint: false,
            checkpoint_journal_len: 64 << 20,
            exchange_blocks_min: EXCHANGE_BLOCKS_MIN,
            exchange_share_percent: EXCHANGE_SHARE_PERCENT,
            open_files_max: OPEN_FILES_MAX,
            open_transactions_max: OPEN_TRANSACTIONS_MAX,
            pending_blocks_max: PENDING_BLOCKS_MAX,
            xattr_bytes_max: XATTR_BYTES_MAX,
        }
    }
}

impl RemapConfig {
    /// Every limit shrunk so that tests reach checkpoints quickly.
    pub fn test_min() -> Self {
        RemapConfig {
            copy_checkpoint: false,
            checkpoint_journal_len: 64 << 10,
            exchange_blocks_min: 2,
            exchange_share_percent: EXCHANGE_SHARE_PERCENT,
            open_files_max: 8,
            open_transactions_max: 4,
            pending_blocks_max: 64,
            xattr_bytes_max: 4096,
        }
    }
}

/// A host file system error as a Store error.
pub(crate) fn host_err(e: hostfs::HostFsError) -> ::store::Error {
    let errno = e.errno();
    let msg = e.to_string();
    match errno {
        libc::ENOENT => ::store::Error::NotFound(msg),
        libc::EEXIST => ::store::Error::Exists(msg),
        libc::ENOSPC => ::store::Error::NoSpace(msg),
        libc::EOPNOTSUPP => ::store::Error::Unsupported(msg),
        libc::EINVAL => ::store::Error::InvalidArgument(msg),
        _ => ::store::Error::Io {
            path: msg,
            op: "host file system",
            source: std::io::Error::from_raw_os_error(errno),
        },
    }
}
