//! Which engine serves a file system, and with which options.

use crate::{Error, Fs, Result};
use std::path::Path;

/// Engine and options for [`Fs::create`] and [`Fs::open`]. One variant per engine; only the
/// `pool` engine (FCFS) exists so far.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Config {
    /// Files live in a persistent-memory pool file (mapped; on /dev/shm its page cache is the
    /// emulated NVMM). `size` is used by [`Fs::create`] only.
    Pool { size: u64, config: pool::PoolConfig },
}

/// Default pool size for [`Config::default`].
pub const POOL_SIZE_DEFAULT: u64 = 256 << 20;

impl Default for Config {
    fn default() -> Self {
        Config::Pool {
            size: POOL_SIZE_DEFAULT,
            config: pool::PoolConfig::default(),
        }
    }
}

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

impl Config {
    /// A pool of `size` bytes with the default FCFS configuration, its geometry scaled to the
    /// size ([`pool_config_for`]).
    pub fn pool(size: u64) -> Self {
        Config::Pool {
            size,
            config: pool_config_for(size),
        }
    }

    /// The same configuration with the pool's update protocol set to `mode`.
    pub fn with_pool_mode(self, mode: pool::Mode) -> Self {
        match self {
            Config::Pool { size, config } => Config::Pool {
                size,
                config: config.with_mode(mode),
            },
        }
    }
}

/// An exclusive advisory lock on a pool file, held while a process serves it: two processes
/// mapping one pool would corrupt it.
#[derive(Debug)]
pub(crate) struct PoolLock {
    _file: std::fs::File,
}

impl PoolLock {
    pub(crate) fn take(path: &Path) -> Result<PoolLock> {
        let io = |op: &'static str| {
            move |source| Error::Io {
                path: path.display().to_string(),
                op,
                source,
            }
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .open(path)
            .map_err(io("open"))?;
        if !try_flock(&file).map_err(io("flock"))? {
            return Err(Error::Busy(format!(
                "{} is in use by another process (mounted, or open in another atomfs command)",
                path.display()
            )));
        }
        Ok(PoolLock { _file: file })
    }
}

#[allow(unsafe_code)]
fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor that `file` keeps open for the duration of the call; no
    // memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

impl Fs {
    /// Create a new file system in a new file at `path` (which must not exist).
    pub fn create(path: impl AsRef<Path>, config: Config) -> Result<Fs> {
        let path = path.as_ref();
        match config {
            Config::Pool { size, config } => {
                if path.exists() {
                    return Err(Error::Exists(path.display().to_string()));
                }
                let store = pool::create(path, size, &config)?;
                let lock = PoolLock::take(path);
                match lock {
                    Ok(lock) => Ok(Fs::owning_locked(store, Some(lock))),
                    Err(e) => {
                        let _ = store.unmount();
                        Err(e)
                    }
                }
            }
        }
    }

    /// Open an existing file system (running the engine's recovery).
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Fs> {
        let path = path.as_ref();
        match config {
            Config::Pool { config, .. } => {
                let lock = PoolLock::take(path)?;
                let store = pool::open(path, &config)?;
                Ok(Fs::owning_locked(store, Some(lock)))
            }
        }
    }
}
