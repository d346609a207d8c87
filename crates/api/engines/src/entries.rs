//! The engines of this build, as registry entries.

use crate::{Engine, OptionKind, OptionSpec, OptionUse, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Result, Store};

/// Default size of a new pool file.
const SIZE_DEFAULT: u64 = 256 << 20;

/// The default pool configuration with its format-time geometry scaled to a pool of `size`
/// bytes, so that small pools keep most of their space for file data: about 32 KiB of pool
/// per inode, 1 KiB per metadata log entry and 8 KiB per data log entry (one pending block
/// version each), each within a floor, with the defaults as ceiling for the logs and a million
/// inodes at most.
pub fn pool_config_for(size: u64) -> pool::PoolConfig {
    let d = pool::PoolConfig::default();
    pool::PoolConfig {
        inode_count: (size / (32 << 10)).clamp(256, d.inode_count.max(1 << 20)),
        metadata_log_entries: (size / 1024).clamp(4096, d.metadata_log_entries.max(4096)),
        data_log_entries: (size / (8 << 10)).clamp(1024, d.data_log_entries.max(1024)),
        ..d
    }
}

const MODES: &[&str] = &["fcfs", "nc", "fgwal", "scsp", "soc", "sync"];

/// `pool`: FCFS, files in a persistent-memory pool file.
pub struct PoolEngine;
pub static POOL: PoolEngine = PoolEngine;

const POOL_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "size",
        kind: OptionKind::Size,
        when: OptionUse::Create,
        default: "256M",
        help: "size of the pool file",
    },
    OptionSpec {
        key: "inodes",
        kind: OptionKind::Count,
        when: OptionUse::Create,
        default: "",
        help: "inodes in the inode table (default: one per 32 KiB of pool, 256 at least)",
    },
    OptionSpec {
        key: "data_checksums",
        kind: OptionKind::Bool,
        when: OptionUse::Create,
        default: "false",
        help: "keep a crc32c of every file data block in its block pointer, checked on read and by fsck",
    },
    OptionSpec {
        key: "mode",
        kind: OptionKind::Choice(MODES),
        when: OptionUse::Runtime,
        default: "fcfs",
        help: "update protocol: fcfs, or a comparison mode of the FCFS evaluation",
    },
    OptionSpec {
        key: "checkpoint_threads",
        kind: OptionKind::Count,
        when: OptionUse::Runtime,
        default: "1",
        help: "background checkpointing threads (0: checkpoint on demand and at unmount)",
    },
    OptionSpec {
        key: "checkpoint_idle",
        kind: OptionKind::Duration,
        when: OptionUse::Runtime,
        default: "1s",
        help: "checkpoint everything after this long without a commit (0: never on idle)",
    },
    OptionSpec {
        key: "pending_versions_max",
        kind: OptionKind::Count,
        when: OptionUse::Runtime,
        default: "5",
        help: "longest pending list of one block before it is checkpointed",
    },
];

impl PoolEngine {
    /// The pool configuration `options` describe (geometry scaled to the size).
    pub fn config(&self, options: &Options) -> Result<(u64, pool::PoolConfig)> {
        let size = options.size("size")?.unwrap_or(SIZE_DEFAULT);
        let mut config = pool_config_for(size);
        if let Some(n) = options.count("inodes")? {
            if n < 2 {
                return Err(Error::InvalidArgument(
                    "option inodes: at least 2 (the root and one file)".into(),
                ));
            }
            config.inode_count = n;
        }
        if let Some(on) = options.flag("data_checksums")? {
            config.data_checksums = on;
        }
        if let Some(mode) = options.get("mode") {
            let mode = pool::Mode::parse(mode).ok_or_else(|| {
                Error::InvalidArgument(format!("option mode: unknown mode {mode:?}"))
            })?;
            config = config.with_mode(mode);
        }
        if let Some(n) = options.count("checkpoint_threads")? {
            config.checkpoint_threads = usize::try_from(n).unwrap_or(usize::MAX).min(64);
        }
        if let Some(d) = options.duration("checkpoint_idle")? {
            config.checkpoint_idle_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        }
        if let Some(n) = options.count("pending_versions_max")? {
            config.pending_versions_max = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        }
        Ok((size, config))
    }
}

impl PoolEngine {
    /// Format a pool of `size` bytes with a typed configuration in the empty, locked file at
    /// `path` (for [`create_with`](crate::create_with)).
    pub fn create_config(
        &self,
        path: &Path,
        size: u64,
        config: &pool::PoolConfig,
    ) -> Result<Arc<dyn Store>> {
        pool::create(path, size, config)
    }

    /// Open the locked pool file at `path` with a typed configuration.
    pub fn open_config(&self, path: &Path, config: &pool::PoolConfig) -> Result<Arc<dyn Store>> {
        pool::open(path, config)
    }
}

impl Engine for PoolEngine {
    fn name(&self) -> &'static str {
        "pool"
    }
    fn description(&self) -> &'static str {
        "FCFS: multi-file transactions on persistent memory; files live in the pool file"
    }
    fn options(&self) -> &'static [OptionSpec] {
        POOL_OPTIONS
    }
    fn probe(&self, head: &[u8]) -> bool {
        // The pool engine's superblock starts with its magic (crates/engines/pool layout.rs).
        head.starts_with(b"ATOMFSPL")
    }
    fn create(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let (size, config) = self.config(options)?;
        pool::create(path, size, &config)
    }
    fn open(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let (_, config) = self.config(options)?;
        pool::open(path, &config)
    }
}

/// `mmio`: Libnvmmio, failure-atomic mmap IO on files in a home directory.
pub struct MmioEngine;
pub static MMIO: MmioEngine = MmioEngine;

const POLICIES: &[&str] = &["hybrid", "undo", "redo"];

const MMIO_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "home",
        kind: OptionKind::Path,
        when: OptionUse::Create,
        default: "",
        help: "directory on a host file system that holds the files (required; recorded in the pool file)",
    },
    OptionSpec {
        key: "size",
        kind: OptionKind::Size,
        when: OptionUse::Create,
        default: "256M",
        help: "size of the log pool file",
    },
    OptionSpec {
        key: "files_max",
        kind: OptionKind::Count,
        when: OptionUse::Create,
        default: "1024",
        help: "files open (or with unfinished logs) at once",
    },
    OptionSpec {
        key: "policy",
        kind: OptionKind::Choice(POLICIES),
        when: OptionUse::Runtime,
        default: "hybrid",
        help: "logging policy: hybrid (undo, redo for write-heavy epochs), undo or redo",
    },
    OptionSpec {
        key: "checkpoint_period",
        kind: OptionKind::Duration,
        when: OptionUse::Runtime,
        default: "100us",
        help: "background checkpoint period (0: no background thread)",
    },
];

impl MmioEngine {
    /// The mmio configuration `options` describe.
    pub fn config(&self, options: &Options) -> Result<mmio::MmioConfig> {
        let mut config = mmio::MmioConfig::default();
        if let Some(size) = options.size("size")? {
            config.log_pool_len = size;
        }
        if let Some(n) = options.count("files_max")? {
            config.files_max = u32::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::InvalidArgument("option files_max: 1..=2^32-1".into()))?;
        }
        config.policy_mode = match options.get("policy") {
            None | Some("hybrid") => mmio::PolicyMode::Hybrid,
            Some("undo") => mmio::PolicyMode::Undo,
            Some("redo") => mmio::PolicyMode::Redo,
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "option policy: unknown policy {other:?}"
                )))
            }
        };
        if let Some(period) = options.duration("checkpoint_period")? {
            config.checkpoint_period = (!period.is_zero()).then_some(period);
        }
        Ok(config)
    }
}

impl MmioEngine {
    /// Format a store whose files live in `home` with a typed configuration, its log pool
    /// in the empty, locked file at `path`.
    pub fn create_config(
        &self,
        path: &Path,
        home: &Path,
        config: &mmio::MmioConfig,
    ) -> Result<Arc<dyn Store>> {
        Ok(Arc::new(mmio::HostMmioStore::create(home, path, config)?))
    }

    /// Open the locked log pool file at `path` (and the home directory it records) with a
    /// typed configuration.
    pub fn open_config(&self, path: &Path, config: &mmio::MmioConfig) -> Result<Arc<dyn Store>> {
        Ok(Arc::new(mmio::HostMmioStore::open_recorded(path, config)?))
    }
}

impl Engine for MmioEngine {
    fn name(&self) -> &'static str {
        "mmio"
    }
    fn description(&self) -> &'static str {
        "Libnvmmio: failure-atomic mmap IO; files live in a home directory, logs in the pool file"
    }
    fn options(&self) -> &'static [OptionSpec] {
        MMIO_OPTIONS
    }
    fn probe(&self, head: &[u8]) -> bool {
        head.starts_with(b"ATFSMMIO")
    }
    fn home_for_create(&self, options: &Options) -> Result<Option<PathBuf>> {
        let home = options.path("home").ok_or_else(|| {
            Error::InvalidArgument(
                "engine mmio needs a home directory for its files (--home DIR, or option home=DIR)"
                    .into(),
            )
        })?;
        let canonical = home.canonicalize().map_err(|e| Error::Io {
            path: home.display().to_string(),
            op: "open home directory",
            source: e,
        })?;
        if !canonical.is_dir() {
            return Err(Error::NotDir(format!("home directory {}", home.display())));
        }
        Ok(Some(canonical))
    }
    fn recorded_home(&self, pool: &Path) -> Result<Option<PathBuf>> {
        mmio::recorded_home(pool)
    }
    fn create(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let home = self
            .home_for_create(options)?
            .ok_or_else(|| Error::InvalidArgument("engine mmio needs a home directory".into()))?;
        let config = self.config(options)?;
        Ok(Arc::new(mmio::HostMmioStore::create(&home, path, &config)?))
    }
    fn open(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let config = self.config(options)?;
        Ok(Arc::new(mmio::HostMmioStore::open_recorded(path, &config)?))
    }
}
