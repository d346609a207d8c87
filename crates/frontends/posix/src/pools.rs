//! Pools: one store per pool file per process, however often and from wherever it is opened.
//!
//! Stores are created and opened through the engine registry (crate `atomfs-engines`), which
//! takes the one lock every front end takes: a second process opening the same store — through
//! this layer, the Rust API, the FUSE server or the CLI — gets EBUSY naming the holder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use engines::{Options, StoreLock};
use store::{Error, Store};

/// Size of a pool created by the shim when `ATOMFS_CREATE_SIZE` is set but not a number.
pub const CREATE_SIZE_DEFAULT: u64 = 256 << 20;

/// Which engine, with which options, makes a store that does not exist yet.
#[derive(Clone, Debug)]
pub struct CreateSpec {
    /// A registered engine's name (`pool`, `mmio`, ...).
    pub engine: String,
    /// The engine's `key=value` options (`size` among them).
    pub options: Options,
}

impl CreateSpec {
    /// The engine named by `ATOMFS_ENGINE` (default `pool`) with the options of
    /// `ATOMFS_OPTIONS` (`key=value,...`), sized `size` unless the options give a size.
    pub fn from_env(size: u64) -> Result<CreateSpec, Error> {
        let engine = std::env::var("ATOMFS_ENGINE").unwrap_or_else(|_| "pool".into());
        let mut options = Options::parse(&std::env::var("ATOMFS_OPTIONS").unwrap_or_default())?;
        if options.get("size").is_none() {
            options.set("size", size.to_string());
        }
        Ok(CreateSpec { engine, options })
    }
}

/// An open pool: a store and the file it lives in. The store is unmounted when the last
/// reference (pool handle or open file) goes.
pub struct Pool {
    /// Process-unique, never reused.
    pub id: u64,
    pub path: PathBuf,
    pub store: Arc<dyn Store>,
    /// The registry's lock on the pool file (and home directory): one process at a time.
    lock: StoreLock,
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Nothing is left to report to; every durable call already made its data durable.
        let _ = self.store.unmount();
    }
}

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Pool>>> {
    static REGISTRY: std::sync::OnceLock<Mutex<HashMap<PathBuf, Weak<Pool>>>> =
        std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

fn io_error(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

/// Open the pool file at `path`. When it does not exist and `create` is given, create it
/// as `create` says; `exclusive` makes an existing file an error (`EEXIST`), as
/// `atomfs_pool_create` wants.
pub fn open_pool(
    path: &Path,
    create: Option<CreateSpec>,
    exclusive: bool,
) -> Result<Arc<Pool>, Error> {
    let mut registry = registry().lock().unwrap_or_else(|p| p.into_inner());
    registry.retain(|_, weak| weak.strong_count() > 0);
    // Fast path: this very spelling was opened before and is still open (the SQLite VFS
    // asks for its pool at every transaction; canonicalize costs a syscall per component).
    if !exclusive {
        if let Some(pool) = registry.get(path).and_then(Weak::upgrade) {
            return Ok(pool);
        }
    }
    let exists = path.exists();
    if exists && exclusive {
        return Err(Error::Exists(path.display().to_string()));
    }
    if exists {
        let canonical = path
            .canonicalize()
            .map_err(|e| io_error(path, "canonicalize", e))?;
        if let Some(pool) = registry.get(&canonical).and_then(Weak::upgrade) {
            registry.insert(path.to_path_buf(), Arc::downgrade(&pool));
            return Ok(pool);
        }
        let opened = engines::open(&canonical, &Options::new())?;
        return Ok(register(&mut registry, path, canonical, opened));
    }
    let Some(spec) = create else {
        return Err(Error::NotFound(format!(
            "{} (set ATOMFS_CREATE_SIZE to create it)",
            path.display()
        )));
    };
    let opened = engines::create(path, &spec.engine, &spec.options).map_err(|e| match e {
        Error::Exists(m) => Error::Exists(format!("{m} (created by another process meanwhile)")),
        other => other,
    })?;
    let canonical = path
        .canonicalize()
        .map_err(|e| io_error(path, "canonicalize", e))?;
    Ok(register(&mut registry, path, canonical, opened))
}

/// In a child forked from a process that had pools open: forget them and their running
/// transactions — they are the parent's, to be neither used nor closed here — so that the
/// next open starts afresh (as a client of the parent's store server when it serves). False
/// when a table was locked at the fork (a thread of the parent was inside it).
pub fn forget_inherited() -> bool {
    let Ok(mut registry) = registry().try_lock() else {
        return false;
    };
    // Weak references only: forgetting them drops no pool.
    std::mem::forget(std::mem::take(&mut *registry));
    drop(registry);
    crate::tx::forget_inherited()
}

/// Lowest descriptor number for the layer's own descriptors: 64 below the soft
/// RLIMIT_NOFILE, capped at 4096 (shells use 10 and up, 255; few programs go that high).
pub fn internal_fd_floor() -> i32 {
    // SAFETY: getrlimit with a valid out pointer.
    let mut limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let soft = i64::try_from(limit.rlim_cur).unwrap_or(i64::MAX);
    soft.saturating_sub(64).clamp(16, 4096) as i32
}

/// Whether `fd` is a descriptor this layer holds for itself (a pool lock, or the connection
/// of a client of another process's store server).
pub fn is_internal_fd(fd: i32) -> bool {
    with_pools(|pool| pool.lock.holds_fd(fd) || client_of(pool).is_some_and(|c| c.fd() == Some(fd)))
}

/// Move this layer's descriptor numbered `fd` elsewhere, so the application can use the
/// number (the LD_PRELOAD shim calls this before a dup2 onto it or a close of it).
/// Returns whether `fd` was one of ours.
pub fn relocate_internal_fd(fd: i32) -> bool {
    let floor = internal_fd_floor();
    with_pools(|pool| {
        pool.lock.relocate_fd(fd, floor)
            || client_of(pool).is_some_and(|c| c.relocate_fd(fd, floor))
    })
}

/// The client, when the pool is reached through another process's store server.
fn client_of(pool: &Pool) -> Option<&remote::RemoteStore> {
    pool.store.as_any().downcast_ref::<remote::RemoteStore>()
}

fn with_pools(mut f: impl FnMut(&Pool) -> bool) -> bool {
    let registry = registry().lock().unwrap_or_else(|p| p.into_inner());
    registry
        .values()
        .filter_map(Weak::upgrade)
        .any(|pool| f(&pool))
}

fn register(
    registry: &mut HashMap<PathBuf, Weak<Pool>>,
    spelled: &Path,
    canonical: PathBuf,
    opened: engines::OpenedStore,
) -> Arc<Pool> {
    // Keep the lock's descriptors out of the way of the application's own numbers (shells
    // dup2 onto low descriptors); the flock stays with the duplicate.
    let floor = internal_fd_floor();
    for fd in opened.lock.fds() {
        opened.lock.relocate_fd(fd, floor);
    }
    if let Some(client) = opened.store.as_any().downcast_ref::<remote::RemoteStore>() {
        if let Some(fd) = client.fd() {
            client.relocate_fd(fd, floor);
        }
    }
    let pool = Arc::new(Pool {
        id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
        path: canonical.clone(),
        store: opened.store,
        lock: opened.lock,
    });
    registry.insert(canonical, Arc::downgrade(&pool));
    registry.insert(spelled.to_path_buf(), Arc::downgrade(&pool));
    pool
}
