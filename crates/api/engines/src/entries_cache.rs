//! `cache`: First Responder — the files live in a home directory, every write is durable in
//! the persistent-memory cache (the pool file) when it returns, a flusher writes them home.

use crate::{Engine, OptionKind, OptionSpec, OptionUse, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Result, Store};

/// `cache`: First Responder, PM as a durable cache in front of a home directory.
pub struct CacheEngine;
pub static CACHE: CacheEngine = CacheEngine;

const CACHE_OPTIONS: &[OptionSpec] = &[
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
        help: "size of the cache pool file (slots of two 4 KiB chunks)",
    },
    OptionSpec {
        key: "files_max",
        kind: OptionKind::Count,
        when: OptionUse::Create,
        default: "65536",
        help: "files the cache knows at once (one record each)",
    },
    OptionSpec {
        key: "flush_period",
        kind: OptionKind::Duration,
        when: OptionUse::Runtime,
        default: "10ms",
        help: "background flush period (0: every write goes home before it returns)",
    },
    OptionSpec {
        key: "stride",
        kind: OptionKind::Count,
        when: OptionUse::Runtime,
        default: "0",
        help: "a fixed stride in slots between files' keys (0: the stride table)",
    },
];

const SIZE_DEFAULT: u64 = 256 << 20;

impl CacheEngine {
    /// The cache configuration and pool size `options` describe.
    pub fn config(&self, options: &Options) -> Result<(u64, cache::CacheConfig)> {
        let mut config = cache::CacheConfig::default();
        let size = options.size("size")?.unwrap_or(SIZE_DEFAULT);
        if let Some(n) = options.count("files_max")? {
            if n == 0 {
                return Err(Error::InvalidArgument(
                    "option files_max: at least 1".into(),
                ));
            }
            config.files_max = n;
        }
        if let Some(period) = options.duration("flush_period")? {
            config.flush_period = Some(period);
        }
        if let Some(stride) = options.count("stride")? {
            config.stride_fixed = (stride > 0).then_some(stride);
        }
        Ok((size, config))
    }
}

impl Engine for CacheEngine {
    fn name(&self) -> &'static str {
        "cache"
    }
    fn description(&self) -> &'static str {
        "First Responder: files live in a home directory; every write is durable in the PM cache (the pool file) when it returns, flushed home in the background"
    }
    fn options(&self) -> &'static [OptionSpec] {
        CACHE_OPTIONS
    }
    fn probe(&self, head: &[u8]) -> bool {
        head.starts_with(b"ATFSCACH")
    }
    fn home_for_create(&self, options: &Options) -> Result<Option<PathBuf>> {
        let home = options.path("home").ok_or_else(|| {
            Error::InvalidArgument(
                "engine cache needs a home directory for its files (--home DIR, or option home=DIR)"
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
        cache::recorded_home(pool)
    }
    fn create(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let home = self
            .home_for_create(options)?
            .ok_or_else(|| Error::InvalidArgument("engine cache needs a home directory".into()))?;
        let (size, config) = self.config(options)?;
        Ok(Arc::new(cache::HostCacheStore::create(
            &home, path, size, &config,
        )?))
    }
    fn open(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let (_, config) = self.config(options)?;
        Ok(Arc::new(cache::HostCacheStore::open_recorded(
            path, &config,
        )?))
    }
}
