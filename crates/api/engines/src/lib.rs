//! The engine registry of atomfs.
//!
//! Every front end (the Rust API, the C API and its LD_PRELOAD shim, the SQLite VFS, the FUSE
//! server, the CLI) and every tool reaches an engine through this crate and names no engine
//! crate itself:
//!
//! ```text
//! front ends, CLI, bench  ──>  engines (this crate: registry + lock)  ──>  pool, mmio, ...
//! ```
//!
//! A store is named by one path, its pool file (persistent memory: a file on /dev/shm or on
//! DAX). The first bytes of that file say which engine made it ([`probe`]); an engine that
//! keeps the user's files in a host directory records the directory in its pool file, so
//! opening needs nothing but the path. Each engine declares its options as typed, documented
//! `key=value` pairs ([`OptionSpec`]), checked before anything is created or opened.
//!
//! Every store is opened under [`StoreLock`] (module [`lock`]): one owner process per store,
//! whichever front end each side uses.
//!
//! Adding an engine: implement [`Engine`] in a module of this crate (or in the engine's crate)
//! and add one line to [`ENGINES`].

pub mod access;
mod entries;
mod entries_cache;
mod entries_journal;
mod entries_remap;
pub mod lock;
mod options;

pub use access::Access;
pub use entries::{pool_config_for, MmioEngine, PoolEngine, MMIO, POOL};
pub use entries_cache::{CacheEngine, CACHE};
pub use entries_journal::{JournalEngine, JOURNAL};
pub use entries_remap::{RemapEngine, REMAP};
pub use lock::StoreLock;
pub use options::{parse_duration, parse_size, OptionKind, OptionSpec, OptionUse, Options};

/// Engine configuration types, for front ends that take typed configurations.
pub mod config {
    pub use cache::CacheConfig;
    pub use journal::{
        JournalConfig, StoreConfig as JournalStoreConfig, Variant as JournalVariant,
    };
    pub use mmio::{MmioConfig, PolicyMode};
    pub use pool::{Mode as PoolMode, PoolConfig};
    pub use remap::RemapConfig;
}

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Result, Store};

/// How many bytes of a pool file [`probe`] reads: an engine recognises its store from them.
pub const PROBE_LEN: usize = 4096;

/// Mode of a pool file created by the registry unless [`Access::mode`] says otherwise:
/// readable and writable by its owner only.
pub const POOL_FILE_MODE: u32 = access::MODE_DEFAULT;

/// One engine, as the registry knows it.
pub trait Engine: Send + Sync {
    /// Short name (`pool`, `mmio`, ...), as given to `--engine`.
    fn name(&self) -> &'static str;
    /// One line for people: the seed system and where the data lives.
    fn description(&self) -> &'static str;
    /// Every option the engine takes.
    fn options(&self) -> &'static [OptionSpec];
    /// Whether `head` (the first up to [`PROBE_LEN`] bytes of a pool file) is a store of this
    /// engine.
    fn probe(&self, head: &[u8]) -> bool;
    /// The home directory a new store keeps its files in (`None`: the engine keeps everything
    /// in the pool file). Errors when a host-file engine is given no usable directory.
    fn home_for_create(&self, options: &Options) -> Result<Option<PathBuf>> {
        let _ = options;
        Ok(None)
    }
    /// The home directory recorded in an existing pool file.
    fn recorded_home(&self, pool: &Path) -> Result<Option<PathBuf>> {
        let _ = pool;
        Ok(None)
    }
    /// Format a new store in the empty pool file at `pool`, which the caller created and
    /// holds locked.
    fn create(&self, pool: &Path, options: &Options) -> Result<Arc<dyn Store>>;
    /// Open (and recover) the store in the pool file at `pool`, which the caller holds locked.
    fn open(&self, pool: &Path, options: &Options) -> Result<Arc<dyn Store>>;
}

/// Every engine of this build, in the order [`probe`] tries them.
pub static ENGINES: &[&dyn Engine] = &[&POOL, &MMIO, &JOURNAL, &REMAP, &CACHE];

/// The names of every engine, comma-separated (for messages and help texts).
pub fn names() -> String {
    ENGINES
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The engine called `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Engine> {
    ENGINES
        .iter()
        .copied()
        .find(|e| e.name() == name)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("unknown engine {name:?} (known: {})", names()))
        })
}

/// The engine whose store the file at `path` holds.
pub fn probe(path: &Path) -> Result<&'static dyn Engine> {
    let head = read_head(path)?;
    probe_head(path, &head)
}

fn probe_head(path: &Path, head: &[u8]) -> Result<&'static dyn Engine> {
    ENGINES
        .iter()
        .copied()
        .find(|e| e.probe(head))
        .ok_or_else(|| {
            Error::BadMagic(format!(
                "no engine recognised {} (tried: {})",
                path.display(),
                names()
            ))
        })
}

fn read_head(path: &Path) -> Result<Vec<u8>> {
    let mut file = File::open(path).map_err(|e| io(path, "open", e))?;
    let meta = file.metadata().map_err(|e| io(path, "stat", e))?;
    if !meta.is_file() {
        return Err(Error::InvalidArgument(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    let mut head = Vec::with_capacity(PROBE_LEN);
    (&mut file)
        .take(PROBE_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| io(path, "read", e))?;
    Ok(head)
}

fn io(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

/// An open store and the lock that makes this process its only owner. Drop the store (or
/// unmount it) before the lock: [`OpenedStore::unmount`] does both in that order.
pub struct OpenedStore {
    pub store: Arc<dyn Store>,
    pub engine: &'static dyn Engine,
    pub lock: StoreLock,
    /// The pool file.
    pub path: PathBuf,
}

impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("engine", &self.engine.name())
            .field("path", &self.path)
            .finish()
    }
}

impl OpenedStore {
    /// Checkpoint and close the store, then release the lock.
    pub fn unmount(self) -> Result<()> {
        let result = self.store.unmount();
        drop(self.store);
        drop(self.lock);
        result
    }
}

/// Create a new store of engine `engine` at `path` (which must not exist) with `options`.
pub fn create(path: &Path, engine: &str, options: &Options) -> Result<OpenedStore> {
    let engine = by_name(engine)?;
    options.validate(engine.name(), engine.options())?;
    create_with(path, engine, options, |path| engine.create(path, options))
}

/// Replace whatever store is at `path` by a new one (`atomfs mkfs --force`): the old store's
/// lock is taken first, so a store in use by any process is refused with [`Error::Busy`] and
/// left untouched. A missing file is simply created.
pub fn replace(path: &Path, engine: &str, options: &Options) -> Result<OpenedStore> {
    let engine = by_name(engine)?;
    options.validate(engine.name(), engine.options())?;
    Access::from_env().check_link(path)?;
    if !path.exists() {
        return create(path, engine.name(), options);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io(path, "open", e))?;
    let meta = file.metadata().map_err(|e| io(path, "stat", e))?;
    if !meta.is_file() {
        return Err(Error::InvalidArgument(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    let mut lock = StoreLock::acquire(path)?;
    // The old store's home directory, if any, must not be in use either.
    if let Ok(head) = read_head(path) {
        if let Ok(old) = probe_head(path, &head) {
            if let Ok(Some(home)) = old.recorded_home(path) {
                if home.is_dir() {
                    lock.also(&home)?;
                }
            }
        }
    }
    // Formatting starts from an empty file, as create's does.
    file.set_len(0).map_err(|e| io(path, "truncate", e))?;
    drop(file);
    finish_create(path, engine, options, lock, |path| {
        engine.create(path, options)
    })
}

/// Create a store at `path` with a typed configuration: `make` formats the empty, locked file.
pub fn create_with(
    path: &Path,
    engine: &'static dyn Engine,
    options: &Options,
    make: impl FnOnce(&Path) -> Result<Arc<dyn Store>>,
) -> Result<OpenedStore> {
    let access = Access::from_env();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(access.mode)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Error::Exists(path.display().to_string()),
            _ => io(path, "create", e),
        })?;
    // Exactly the mode asked for, whatever the umask (it can only have narrowed it).
    if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(access.mode)) {
        let _ = std::fs::remove_file(path);
        return Err(io(path, "chmod", e));
    }
    let lock = match StoreLock::acquire_file(path, file) {
        Ok(lock) => lock,
        Err(e) => {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    finish_create(path, engine, options, lock, make)
}

/// Lock the new store's home directory (if the engine has one) beside its pool file, then
/// format: on any error the pool file is removed, so no half-made store is left behind.
fn finish_create(
    path: &Path,
    engine: &'static dyn Engine,
    options: &Options,
    mut lock: StoreLock,
    make: impl FnOnce(&Path) -> Result<Arc<dyn Store>>,
) -> Result<OpenedStore> {
    let result = (|| {
        create_missing_home(engine, options)?;
        if let Some(home) = engine.home_for_create(options)? {
            if !lock.paths().any(|p| p == home) {
                lock.also(&home).map_err(|e| home_error(path, &home, e))?;
            }
        }
        make(path)
    })();
    match result {
        Ok(store) => Ok(OpenedStore {
            store,
            engine,
            lock,
            path: path.to_path_buf(),
        }),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

/// Create a host-file engine's home directory when it does not exist yet (its parent must),
/// with [`Access::dir_mode`] (0700 by default).
fn create_missing_home(engine: &dyn Engine, options: &Options) -> Result<()> {
    if !engine.options().iter().any(|o| o.key == "home") {
        return Ok(());
    }
    let Some(home) = options.path("home") else {
        return Ok(());
    };
    if std::fs::symlink_metadata(&home).is_ok() {
        return Ok(());
    }
    let mode = Access::from_env().dir_mode();
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(&home)
        .map_err(|e| io(&home, "create home directory", e))?;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io(&home, "chmod", e))
}

fn home_error(pool: &Path, home: &Path, e: Error) -> Error {
    match e {
        Error::Busy(m) => Error::Busy(m),
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::NotFound(format!(
                "home directory {} of {} does not exist",
                home.display(),
                pool.display()
            ))
        }
        other => other,
    }
}

/// Open the store at `path` with whichever engine made it, running its recovery.
pub fn open(path: &Path, options: &Options) -> Result<OpenedStore> {
    open_checked(path, options, None, |engine, path| {
        engine.open(path, options)
    })
}

/// Open the store at `path`, which must be one of `engine`'s, with a typed configuration:
/// `make` opens the locked file.
pub fn open_with(
    path: &Path,
    engine: &'static dyn Engine,
    make: impl FnOnce(&Path) -> Result<Arc<dyn Store>>,
) -> Result<OpenedStore> {
    open_checked(path, &Options::new(), Some(engine), |_, path| make(path))
}

/// The store at `path` through its owner's server (`atomfs serve`, `atomfs mount`, or any
/// front end serving it), or the owner's `Busy` error when nothing answers there.
fn client_of(
    path: &Path,
    expected: Option<&'static dyn Engine>,
    busy: String,
) -> Result<OpenedStore> {
    let socket = remote::socket_for(path);
    let client = match remote::RemoteStore::connect(&socket) {
        Ok(client) => client,
        // A server answered but speaks another version of the protocol (an older or newer
        // atomfs serves the store): say so, not only that the store is busy.
        Err(Error::UnsupportedVersion {
            found, supported, ..
        }) => {
            return Err(Error::Busy(format!(
                "{busy}; its server at {} speaks protocol version {supported}, this build {found} \
                 (run the same atomfs build on both sides)",
                socket.display()
            )))
        }
        Err(_) => return Err(Error::Busy(busy)),
    };
    let engine = probe(path)?;
    if let Some(expected) = expected.filter(|e| e.name() != engine.name()) {
        return Err(Error::InvalidArgument(format!(
            "{} is a store of engine {}, not {}",
            path.display(),
            engine.name(),
            expected.name()
        )));
    }
    Ok(OpenedStore {
        store: Arc::new(client),
        engine,
        lock: StoreLock::none(),
        path: path.to_path_buf(),
    })
}

fn open_checked(
    path: &Path,
    options: &Options,
    expected: Option<&'static dyn Engine>,
    make: impl FnOnce(&'static dyn Engine, &Path) -> Result<Arc<dyn Store>>,
) -> Result<OpenedStore> {
    let access = Access::from_env();
    access.check_link(path)?;
    let mut lock = match StoreLock::acquire(path) {
        Ok(lock) => lock,
        // Owned by another process: its client if it serves the store.
        Err(Error::Busy(why)) => return client_of(path, expected, why),
        Err(e) => return Err(e),
    };
    let meta = std::fs::metadata(path).map_err(|e| io(path, "stat", e))?;
    access.check_owner(path, &meta)?;
    let engine = probe(path)?;
    if let Some(expected) = expected {
        if expected.name() != engine.name() {
            return Err(Error::InvalidArgument(format!(
                "{} is a store of engine {}, not {}",
                path.display(),
                engine.name(),
                expected.name()
            )));
        }
    }
    options.validate(engine.name(), engine.options())?;
    if let Some(home) = engine.recorded_home(path)? {
        lock.also(&home).map_err(|e| home_error(path, &home, e))?;
        let meta = std::fs::metadata(&home).map_err(|e| io(&home, "stat", e))?;
        access.check_owner(&home, &meta)?;
    }
    let store = make(engine, path)?;
    Ok(OpenedStore {
        store,
        engine,
        lock,
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests;
