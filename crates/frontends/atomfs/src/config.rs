//! Which engine serves a file system, and with which options.
//!
//! Every store is created and opened through the engine registry (crate `atomfs-engines`),
//! which also takes the store's lock: one owner process per store, whichever front end each
//! side uses (a second opener gets [`Error::Busy`](crate::Error::Busy) naming the holder).

use crate::{Fs, Result};
use engines::{Options, MMIO, POOL};
use std::path::{Path, PathBuf};

pub use engines::config::{MmioConfig, PolicyMode, PoolConfig, PoolMode};
pub use engines::pool_config_for;

/// Engine and options for [`Fs::create`] and [`Fs::open`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Config {
    /// Any registered engine, by name, with its `key=value` options (`atomfs mkfs -o`'s
    /// keys; see each engine's options in the registry). With no engine named, [`Fs::create`]
    /// makes a `pool` and [`Fs::open`] opens whatever engine made the file.
    Registry {
        engine: Option<String>,
        options: Options,
    },
    /// `pool` (FCFS): files live in a persistent-memory pool file (mapped; on /dev/shm its
    /// page cache is the emulated NVMM). `size` is used by [`Fs::create`] only.
    Pool { size: u64, config: PoolConfig },
    /// `mmio` (Libnvmmio): files live in the host directory `home`, logs in the pool file,
    /// which records `home` (used by [`Fs::create`] only; [`Fs::open`] reads it back).
    Mmio { home: PathBuf, config: MmioConfig },
}

/// Default pool size for [`Config::pool`]'s callers that want one.
pub const POOL_SIZE_DEFAULT: u64 = 256 << 20;

impl Default for Config {
    /// Create: a 256 MiB `pool`. Open: whichever engine made the file.
    fn default() -> Self {
        Config::Registry {
            engine: None,
            options: Options::new(),
        }
    }
}

impl Config {
    /// A pool of `size` bytes with the default FCFS configuration, its geometry scaled to the
    /// size ([`pool_config_for`]).
    pub fn pool(size: u64) -> Self {
        Config::Pool {
            size,
            config: pool_config_for(size),
        }
    }

    /// An mmio store over the host directory `home`, with the default configuration.
    pub fn mmio(home: impl Into<PathBuf>) -> Self {
        Config::Mmio {
            home: home.into(),
            config: MmioConfig::default(),
        }
    }

    /// The registered engine `name` with no options yet ([`Config::option`] adds them).
    pub fn engine(name: &str) -> Self {
        Config::Registry {
            engine: Some(name.to_string()),
            options: Options::new(),
        }
    }

    /// The same configuration with one more `key=value` option (registry configurations
    /// only; a typed configuration is returned unchanged).
    pub fn option(mut self, key: &str, value: impl Into<String>) -> Self {
        if let Config::Registry { options, .. } = &mut self {
            options.set(key, value);
        }
        self
    }

    /// The same configuration with the pool's update protocol set to `mode` (pool
    /// configurations only).
    pub fn with_pool_mode(self, mode: PoolMode) -> Self {
        match self {
            Config::Pool { size, config } => Config::Pool {
                size,
                config: config.with_mode(mode),
            },
            Config::Registry { engine, options } => Config::Registry {
                engine,
                options: options.with("mode", mode.name()),
            },
            other => other,
        }
    }
}

impl Fs {
    /// Create a new file system in a new file at `path` (which must not exist).
    pub fn create(path: impl AsRef<Path>, config: Config) -> Result<Fs> {
        let path = path.as_ref();
        let opened = match config {
            Config::Registry { engine, options } => {
                engines::create(path, engine.as_deref().unwrap_or("pool"), &options)?
            }
            Config::Pool { size, config } => {
                engines::create_with(path, &POOL, &Options::new(), |p| {
                    POOL.create_config(p, size, &config)
                })?
            }
            Config::Mmio { home, config } => {
                let options = Options::new().with("home", home.display().to_string());
                engines::create_with(path, &MMIO, &options, |p| {
                    MMIO.create_config(p, &home, &config)
                })?
            }
        };
        Ok(Fs::from_opened(opened))
    }

    /// Open an existing file system (running the engine's recovery).
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Fs> {
        let path = path.as_ref();
        let opened = match config {
            Config::Registry { engine, options } => {
                let opened = engines::open(path, &options)?;
                if let Some(name) = engine.filter(|n| n != opened.engine.name()) {
                    let found = opened.engine.name();
                    let _ = opened.unmount();
                    return Err(crate::Error::InvalidArgument(format!(
                        "{} is a store of engine {found}, not {name}",
                        path.display()
                    )));
                }
                opened
            }
            Config::Pool { config, .. } => {
                engines::open_with(path, &POOL, |p| POOL.open_config(p, &config))?
            }
            Config::Mmio { config, .. } => {
                engines::open_with(path, &MMIO, |p| MMIO.open_config(p, &config))?
            }
        };
        Ok(Fs::from_opened(opened))
    }
}
