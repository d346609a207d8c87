//! Pools: one store per pool file per process, however often and from wherever it is opened.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use store::{Error, Store};

/// Size of a pool created by the shim when `ATOMFS_CREATE_SIZE` is set but not a number.
pub const CREATE_SIZE_DEFAULT: u64 = 256 << 20;

/// An open pool: a store and the file it lives in. The store is unmounted when the last
/// reference (pool handle or open file) goes.
pub struct Pool {
    /// Process-unique, never reused.
    pub id: u64,
    pub path: PathBuf,
    pub store: Arc<dyn Store>,
    /// `<pool>.lock`, flock'ed exclusively while the pool is open: one process at a time.
    lock: PoolLock,
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

/// Open the pool file at `path`. When it does not exist and `create_size` is given, create
/// it with that size (the engine may round it); `exclusive` makes an existing file an error
/// (`EEXIST`), as `atomfs_pool_create` wants.
pub fn open_pool(
    path: &Path,
    create_size: Option<u64>,
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
        let lock = lock_pool(&canonical)?;
        let store = open_store(&canonical)?;
        return Ok(register(&mut registry, path, canonical, store, lock));
    }
    let Some(size) = create_size else {
        return Err(Error::NotFound(format!(
            "{} (set ATOMFS_CREATE_SIZE to create it)",
            path.display()
        )));
    };
    let lock = lock_pool(path)?;
    if path.exists() {
        return Err(Error::Exists(format!(
            "{} (created by another process meanwhile)",
            path.display()
        )));
    }
    let store = match create_store(path, size) {
        Ok(store) => store,
        Err(e) => {
            // Leave no half-made pool file behind for the next open to trip over.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    let canonical = path
        .canonicalize()
        .map_err(|e| io_error(path, "canonicalize", e))?;
    Ok(register(&mut registry, path, canonical, store, lock))
}

/// Take the pool's lock file (`<pool>.lock` beside it) exclusively, without waiting:
/// `Busy` when another process has the pool open. The engines map the pool file and keep
/// their indexes in DRAM, so two processes must never open one pool at once.
fn lock_pool(path: &Path) -> Result<PoolLock, Error> {
    use std::os::unix::io::AsRawFd;
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{}: not a file name", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = parent
        .canonicalize()
        .map_err(|e| io_error(parent, "canonicalize", e))?;
    let mut lock_name = name.to_os_string();
    lock_name.push(".lock");
    let lock_path = dir.join(lock_name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io_error(&lock_path, "open", e))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(Error::Busy(format!(
                "{} is open in another process",
                path.display()
            )));
        }
        return Err(io_error(&lock_path, "flock", e));
    }
    // Keep the lock's descriptor out of the way of the application's own numbers (shells
    // dup2 onto low descriptors); the flock stays with the duplicate.
    let fd = std::os::unix::io::IntoRawFd::into_raw_fd(file);
    let lock = PoolLock {
        fd: AtomicI32::new(fd),
    };
    lock.relocate_from(fd);
    Ok(lock)
}

/// The descriptor holding a pool's flock. Its number can be moved ([`relocate_internal_fd`])
/// when the application wants that number (dup2 onto it, close of it).
struct PoolLock {
    fd: AtomicI32,
}

impl PoolLock {
    /// Move the descriptor to a number at or above [`internal_fd_floor`] other than `avoid`.
    fn relocate_from(&self, avoid: i32) -> bool {
        let fd = self.fd.load(Ordering::Relaxed);
        // SAFETY: duplicating a descriptor this lock owns; F_DUPFD_CLOEXEC picks a free number.
        let mut new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, internal_fd_floor()) };
        if new == avoid && new >= 0 {
            // SAFETY: as above, from one past the number to avoid.
            let again = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, avoid + 1) };
            // SAFETY: closing the duplicate just made.
            unsafe { libc::close(new) };
            new = again;
        }
        if new < 0 {
            return false;
        }
        self.fd.store(new, Ordering::Relaxed);
        // SAFETY: the old number is this lock's; the flock lives on in `new`.
        unsafe { libc::close(fd) };
        true
    }
}

impl Drop for PoolLock {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this lock.
        unsafe { libc::close(self.fd.load(Ordering::Relaxed)) };
    }
}

/// Lowest descriptor number for the layer's own descriptors: 64 below the soft
/// RLIMIT_NOFILE, capped at 4096 (shells use 10 and up, 255; few programs go that high).
fn internal_fd_floor() -> i32 {
    // SAFETY: getrlimit with a valid out pointer.
    let mut limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let soft = i64::try_from(limit.rlim_cur).unwrap_or(i64::MAX);
    soft.saturating_sub(64).clamp(16, 4096) as i32
}

/// Whether `fd` is a descriptor this layer holds for itself (a pool lock).
pub fn is_internal_fd(fd: i32) -> bool {
    with_locks(|lock| lock.fd.load(Ordering::Relaxed) == fd)
}

/// Move this layer's descriptor numbered `fd` elsewhere, so the application can use the
/// number (the LD_PRELOAD shim calls this before a dup2 onto it or a close of it).
/// Returns whether `fd` was one of ours.
pub fn relocate_internal_fd(fd: i32) -> bool {
    with_locks(|lock| lock.fd.load(Ordering::Relaxed) == fd && lock.relocate_from(fd))
}

fn with_locks(mut f: impl FnMut(&PoolLock) -> bool) -> bool {
    let registry = registry().lock().unwrap_or_else(|p| p.into_inner());
    registry
        .values()
        .filter_map(Weak::upgrade)
        .any(|pool| f(&pool.lock))
}

fn register(
    registry: &mut HashMap<PathBuf, Weak<Pool>>,
    spelled: &Path,
    canonical: PathBuf,
    store: Arc<dyn Store>,
    lock: PoolLock,
) -> Arc<Pool> {
    let pool = Arc::new(Pool {
        id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
        path: canonical.clone(),
        store,
        lock,
    });
    registry.insert(canonical, Arc::downgrade(&pool));
    registry.insert(spelled.to_path_buf(), Arc::downgrade(&pool));
    pool
}

/// Open a pool file with the engine its first bytes name.
fn open_store(path: &Path) -> Result<Arc<dyn Store>, Error> {
    let mut head = [0u8; 16];
    let mut file = std::fs::File::open(path).map_err(|e| io_error(path, "open", e))?;
    let n = file
        .read(&mut head)
        .map_err(|e| io_error(path, "read", e))?;
    // The pool engine's superblock starts with its magic (crates/engines/pool layout.rs).
    if n >= 8 && &head[..8] == b"ATOMFSPL" {
        return pool::open(path, &pool::PoolConfig::default());
    }
    Err(Error::BadMagic(format!(
        "{}: not an atomfs pool this build can open",
        path.display()
    )))
}

/// Create a pool file with the engine `ATOMFS_ENGINE` names (default and only one so far:
/// `pool`, FCFS).
fn create_store(path: &Path, size: u64) -> Result<Arc<dyn Store>, Error> {
    match std::env::var("ATOMFS_ENGINE").as_deref() {
        Ok("pool") | Err(_) => pool::create(path, size, &pool::PoolConfig::default()),
        Ok(other) => Err(Error::InvalidArgument(format!(
            "ATOMFS_ENGINE={other}: the known engine is pool"
        ))),
    }
}
