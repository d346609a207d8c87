//! `mmio` — the Libnvmmio engine of atomfs: failure-atomic memory-mapped IO on host files.
//!
//! User files live in a directory of a host file system and are mapped whole. Data writes are
//! staged in per-block persistent logs in a log pool (any [`pmem::Region`]): log entries of
//! 4 KB … 2 MB, doubling with the IO size, with differential logging of partial blocks;
//! persistent index entries (offset, len, dest, policy, epoch) and per-file metadata (the
//! file's epoch); a lock-free radix tree in DRAM (`file/radix.rs`) with per-entry reader-writer locks.
//! A sync commits a file by one persisted 8-byte store (its epoch); multi-file transactions
//! commit a transaction record with one 8-byte store. Background threads checkpoint committed
//! entries home. Hybrid logging: undo by default, redo when writes are at least 40 % of the
//! accesses of the last epoch. See docs/engines/mmio.md and docs/format.md.
//!
//! Entry points: [`MmioStore::create`] / [`MmioStore::open`] on a real directory and log pool
//! file, [`MmioStore::create_on`] / [`MmioStore::open_on`] over any log pool region and any
//! `hostfs::HostFs` store directory wrapped in [`HostMedia`] (the crash tests pair a
//! [`pmem::SimRegion`] log pool with the `hostfs::SimHostFs` crash model), and the
//! Libnvmmio-style mapping API [`MmioStore::nvmmap`].

#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "crash-target")]
pub mod crash_target;
mod file;
mod host;
mod lifecycle;
pub mod log;
mod namespace;
mod recovery;
mod shared;
mod store_api;
mod transaction;

pub use file::nvmmap::NvMap;
pub use host::media::HostMedia;
pub use host::window::Window;
pub use host::{FileMedia, MediaStat};
pub use lifecycle::{recorded_home, HostMmioStore, MmioStore, RecoveryReport};
use log::layout;
pub use log::layout::Policy;

use std::time::Duration;

/// Which logging policy files use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyMode {
    /// Libnvmmio's hybrid logging: undo by default, redo for write-intensive epochs.
    Hybrid,
    /// Always undo logging.
    Undo,
    /// Always redo logging.
    Redo,
}

/// Limits and tunables of an mmio store (all limits named with the qualifier last).
#[derive(Clone, Debug)]
pub struct MmioConfig {
    /// Size of the log pool file created by [`MmioStore::create`].
    pub log_pool_len: u64,
    /// Per-file metadata slots: files open (or with unfinished logs) at once.
    pub files_max: u32,
    /// Persistent index entries: live log entries at once.
    pub index_entries_max: u32,
    /// Transaction records: multi-file commits in flight at once.
    pub tx_records_max: u32,
    /// Largest log entry (a power of two, 4 KB … 2 MB in the seed).
    pub log_entry_max: u64,
    /// Background checkpoint period (Libnvmmio: 100 µs). `None`: no background thread
    /// (checkpoints happen on demand, at policy switches, when the log fills and at unmount).
    pub checkpoint_period: Option<Duration>,
    /// Logging policy.
    pub policy_mode: PolicyMode,
    /// Hybrid logging switches a file to redo when writes are at least this percentage of the
    /// accesses of its last epoch (Libnvmmio: 40).
    pub redo_write_percent_min: u64,
    /// Files in one transaction (bounded by the transaction record).
    pub tx_files_max: usize,
    /// Open transactions at once.
    pub transactions_max: usize,
    /// Open handles at once (every `open` and `tmpfile` takes one until `release`).
    pub open_handles_max: usize,
    /// Namespace intent records (create/unlink/rename/... inside open transactions).
    pub intents_max: u32,
    /// Bytes one file may take in one uncommitted epoch (transaction, O_ATOMIC epoch, or a
    /// single call), logged or written past the committed end; beyond it writes fail with
    /// NoSpace. Bounds what a transaction may pile up on the host file system.
    pub epoch_bytes_max: u64,
    /// Write every page of the log area once when the store is opened (after recovery, when
    /// the whole log is free), so that no write later pays a first-touch page fault of a log
    /// pool file on tmpfs (emulated NVMM; real NVMM has no such faults). Off by default: it
    /// commits the pool file's memory at once.
    pub prefault_log_pool: bool,
}

impl Default for MmioConfig {
    fn default() -> Self {
        MmioConfig {
            log_pool_len: 256 << 20,
            files_max: 1024,
            index_entries_max: 65536,
            tx_records_max: 64,
            log_entry_max: 2 << 20,
            checkpoint_period: Some(Duration::from_micros(100)),
            policy_mode: PolicyMode::Hybrid,
            redo_write_percent_min: 40,
            tx_files_max: layout::TX_FILES_MAX,
            transactions_max: 1024,
            open_handles_max: 65_536,
            intents_max: 1024,
            epoch_bytes_max: 1 << 40,
            prefault_log_pool: false,
        }
    }
}

impl MmioConfig {
    /// Every limit shrunk so that tests reach the edges quickly.
    pub fn test_min() -> Self {
        MmioConfig {
            log_pool_len: 1 << 20,
            files_max: 16,
            index_entries_max: 128,
            tx_records_max: 4,
            log_entry_max: 16 << 10,
            checkpoint_period: None,
            policy_mode: PolicyMode::Hybrid,
            redo_write_percent_min: 40,
            tx_files_max: 4,
            transactions_max: 8,
            open_handles_max: 1024,
            intents_max: 16,
            epoch_bytes_max: 4 << 20,
            prefault_log_pool: false,
        }
    }
}

/// Errors of the engine's own (non-Store) interface; converted to [`store::Error`].
#[derive(Debug, thiserror::Error)]
pub enum MmioError {
    #[error("log pool is not an atomfs mmio log pool (bad magic)")]
    BadMagic,
    #[error("log pool format version {0} (this build reads version {VER})", VER = layout::VERSION)]
    Version(u32),
    #[error("corrupt log pool: {what} at offset {offset:#x}")]
    Corrupt { what: String, offset: u64 },
    #[error("bad configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] store::Error),
}

impl MmioError {
    pub fn corrupt(what: impl Into<String>, offset: u64) -> Self {
        MmioError::Corrupt {
            what: what.into(),
            offset,
        }
    }
}

pub type MmioResult<T> = Result<T, MmioError>;

impl From<MmioError> for store::Error {
    fn from(e: MmioError) -> Self {
        match e {
            MmioError::BadMagic => store::Error::BadMagic("mmio log pool".into()),
            MmioError::Version(found) => store::Error::UnsupportedVersion {
                what: "mmio log pool".into(),
                found,
                supported: layout::VERSION,
            },
            MmioError::Corrupt { what, offset } => store::Error::Corrupt { what, offset },
            MmioError::Config(s) => store::Error::InvalidArgument(s),
            MmioError::Store(e) => e,
        }
    }
}

/// An io::Error from the host file system, as a Store error naming the path.
pub(crate) fn io_err(path: &std::path::Path, op: &'static str, e: std::io::Error) -> store::Error {
    let p = path.display().to_string();
    match e.raw_os_error() {
        Some(libc::ENOENT) => store::Error::NotFound(p),
        Some(libc::EEXIST) => store::Error::Exists(p),
        Some(libc::ENOTDIR) => store::Error::NotDir(p),
        Some(libc::EISDIR) => store::Error::IsDir(p),
        Some(libc::ENOTEMPTY) => store::Error::NotEmpty(p),
        Some(libc::EFBIG) => store::Error::FileTooLarge(p),
        Some(libc::ENOSPC) => store::Error::NoSpace(p),
        Some(libc::EINVAL) => store::Error::InvalidArgument(format!("{p}: {op}")),
        Some(libc::ENODATA) => store::Error::NoAttribute(format!("{p}: {op}")),
        Some(libc::E2BIG) => store::Error::TooLarge(format!("{p}: {op}")),
        Some(libc::ERANGE) => store::Error::OutOfRange(format!("{p}: {op}")),
        Some(libc::ELOOP) => store::Error::SymlinkLoop(p),
        Some(libc::EOPNOTSUPP) => store::Error::Unsupported(format!("{op} on {p} by the host")),
        _ => store::Error::Io {
            path: p,
            op,
            source: e,
        },
    }
}
