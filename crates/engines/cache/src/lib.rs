//! `cache` — the First Responder engine core of atomfs: persistent memory as a durable cache
//! in front of the home files of a file system (dissertation seed, chapter V).
//!
//! Every write is durable in PM when [`Cache::write`] returns (durable, in-order semantics);
//! reads hit PM; a flusher writes dirty chunks home. Placement is static: a file's key
//! (advanced by the stride of the [`stride::StrideTable`] at every create) and chunk index
//! name its slot, `(key + index) mod slots` — no allocator, no LRU. Each slot holds two
//! chunks with tags updated by one 8-byte atomic store; the write cases of §5.2.2 are in
//! [`slot`] and [`cache::write`]; multi-chunk writes carry a not-complete bit on their first
//! chunk and a shared timestamp, and recovery rolls incomplete ones back ([`cache::recovery`]).
//! See docs/engines/cache.md and docs/format.md ("cache").

#![deny(unsafe_code)]

pub mod backing;
pub mod cache;
pub mod counters;
#[cfg(feature = "crash-target")]
pub mod crash_target;
pub mod flusher;
pub mod format;
pub mod home;
pub mod slot;
pub mod store;
pub mod stride;

pub use backing::{Backing, MemBacking};
pub use cache::{
    Cache, HomeChange, HomeConflict, HomeConflictPolicy, HomeStampCheck, Prefer, RecoveryReport,
    Unit, UnitState,
};
pub use flusher::Flusher;
pub use slot::WriteCase;
pub use store::{recorded_home, CacheStore, HostCacheStore};

use std::time::Duration;

/// A short unique tag for scratch names (trash entries): the time in ns and the process id.
pub(crate) fn now_tag() -> String {
    format!("{:x}-{}", ::store::now_ns(), std::process::id())
}

/// Default bytes of extended attributes an entry holds: two values of the largest size.
pub const XATTR_BYTES_MAX: u64 = 2 * (::store::xattr::XATTR_SIZE_MAX as u64 + 256);

/// Limits and tunables of a cache pool (limits named with the qualifier last).
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// File records: files the cache knows at once.
    pub files_max: u64,
    /// Unit words: open transactions (and O_ATOMIC files with pending writes) at once.
    pub units_max: u64,
    /// Namespace intent records: namespace operations inside open transactions at once.
    pub intents_max: u64,
    /// A fixed stride in slots (tests force collisions with 1); `None`: the stride table.
    pub stride_fixed: Option<u64>,
    /// The smallest stride the stride table gives (files are created empty, so the table
    /// sees small sizes first; a floor keeps growing files of a transaction apart).
    pub stride_min: u64,
    /// Period of the background flush: `Some(0)` writes every chunk home before the write
    /// returns (write-through), `None` flushes only on demand (stat, sync, unmount, Case 3).
    pub flush_period: Option<Duration>,
    /// What an open does with home files changed behind the cache while PM holds dirty
    /// chunks of them: refuse (the default), or resolve them one way.
    pub home_conflict: HomeConflictPolicy,
    /// What of a home file's stamp is compared to see a change behind the cache.
    pub home_stamp: cache::home_state::HomeStampCheck,
    /// Home file descriptors kept open at most (past it, one is closed and reopened by its
    /// path when needed; a file unlinked while cached keeps its descriptor besides).
    pub home_files_open_max: usize,
    /// Bytes of extended attributes (names with their NUL, and values) one entry holds at
    /// most; past it a set answers ENOSPC (the home file system may hold less).
    pub xattr_bytes_max: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            files_max: 65536,
            units_max: 1024,
            intents_max: 1024,
            stride_fixed: None,
            stride_min: 64,
            flush_period: Some(Duration::from_millis(10)),
            home_conflict: HomeConflictPolicy::Refuse,
            home_stamp: Default::default(),
            home_files_open_max: home::OPEN_MAX,
            xattr_bytes_max: XATTR_BYTES_MAX,
        }
    }
}

impl CacheConfig {
    /// Every limit shrunk so that tests reach the edges quickly.
    pub fn test_min() -> Self {
        CacheConfig {
            files_max: 8,
            units_max: 2,
            intents_max: 2,
            stride_fixed: None,
            stride_min: 1,
            flush_period: None,
            home_conflict: HomeConflictPolicy::Refuse,
            home_stamp: Default::default(),
            home_files_open_max: 4,
            xattr_bytes_max: 256,
        }
    }
}
