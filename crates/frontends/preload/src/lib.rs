//! `libatomfs_preload.so`: an LD_PRELOAD shim that serves the paths under `ATOMFS_PREFIX`
//! (default `/atomfs`) from the atomfs pool at `ATOMFS_POOL`, so that unmodified programs
//! store files there. Everything else goes to the real libc (`dlsym(RTLD_NEXT)`).
//! See docs/preload.md.
//!
//! - Descriptors of shim files are real kernel descriptors: each open reserves a sealed,
//!   empty memfd (no write, grow or shrink possible) and maps its number to a store handle, so
//!   numbers never collide and select/poll/close_range keep working; any I/O that reaches
//!   the kernel by a path the shim does not intercept fails (EPERM) instead of going astray.
//! - Every write outside a transaction and outside O_ATOMIC mode is atomic and durable when it
//!   returns; fsync of a file opened with `ATOMFS_O_ATOMIC` commits its writes since the
//!   last fsync. `tx_begin`/`tx_add`/`tx_commit`/`tx_abort`, `syncv` and `abortv` are exported
//!   and work on shim descriptors.
//! - When the pool cannot be opened, one clear message goes to stderr and calls for paths
//!   under the prefix fail with an errno; other paths are unaffected.
//! - Threads: all state is behind locks. fork: a child of a process that has the pool open
//!   keeps its inherited descriptor numbers but may not use the parent's pool (its calls
//!   under the prefix and on inherited shim descriptors fail with EIO; close works); a child
//!   of a process that never opened the pool opens it itself (one process at a time: the pool
//!   is locked, a concurrent second opener gets EBUSY). A forked child's inherited
//!   descriptors, and an exec'd program's (under the shim), open the same file again through
//!   the owner's store server on first use, sharing the offset (inherit.rs); without a
//!   server, or in a program not under the shim, they fail (EIO, EPERM). A fork handler only sets a flag (no locks are taken across
//!   fork), so a multithreaded program that forks while another thread is inside the shim
//!   could leave a table lock held in the child; the child then blocks on its first shim call.
//!
//! The functions with a variadic C prototype (`open`, `openat`, `fcntl`, `ioctl`) are defined
//! with their optional argument as a plain parameter: on x86-64 and AArch64 Linux an int or
//! pointer variadic argument travels in the same register as a fixed one.

#![cfg_attr(test, allow(clippy::unwrap_used))]
// `unsigned long` (c_ulong) is u64 here but u32 on 32-bit targets: the casts are for those.
#![allow(clippy::unnecessary_cast)]
#![allow(clippy::missing_safety_doc)]

mod cwd;
mod dirs;
mod fds;
mod inherit;
mod paths;
mod real;
mod route;
mod special;
mod stdio;
mod tempfiles;
mod umask;
mod xattrs;

use std::cell::Cell;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use atomfs_posix::{FdTable, OpenFile, PResult, Pool};

/// Prefix served when `ATOMFS_PREFIX` is not set.
pub const PREFIX_DEFAULT: &str = "/atomfs";

/// `ATOMFS_CREATE_SIZE` values below this (e.g. `1`) ask for the default size.
pub const CREATE_SIZE_MIN: u64 = 1 << 20;

struct Config {
    /// Normalised prefix, without trailing slash ("/atomfs").
    prefix: Vec<u8>,
    /// Every spelling of the prefix the shim serves: `prefix`, then (when it differs) the
    /// same path with the symbolic links of its existing part resolved, as `getcwd` and
    /// `/proc/self/fd` spell it.
    prefixes: Vec<Vec<u8>>,
    pool_path: Option<String>,
    create_size: Option<u64>,
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let prefix = std::env::var_os("ATOMFS_PREFIX")
            .map(std::os::unix::ffi::OsStringExt::into_vec)
            .filter(|p| p.starts_with(b"/"))
            .unwrap_or_else(|| PREFIX_DEFAULT.as_bytes().to_vec());
        let create_size = std::env::var("ATOMFS_CREATE_SIZE").ok().map(|s| {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            };
            // "1", "yes", "0": anything below 1 MiB means "create it, default size".
            parsed
                .filter(|&n| n >= CREATE_SIZE_MIN)
                .unwrap_or(atomfs_posix::CREATE_SIZE_DEFAULT)
        });
        let prefix = paths::normalize(&prefix);
        let mut prefixes = vec![prefix.clone()];
        if let Some(real) = resolved(&prefix).filter(|r| *r != prefix) {
            prefixes.push(real);
        }
        Config {
            prefixes,
            prefix,
            pool_path: std::env::var("ATOMFS_POOL").ok().filter(|p| !p.is_empty()),
            create_size,
        }
    })
}

/// `prefix` with the symbolic links of its longest existing ancestor resolved (the rest,
/// which does not exist on the host, kept as written). Read once, when the shim starts.
fn resolved(prefix: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(prefix));
    let mut rest: Vec<Vec<u8>> = Vec::new();
    let mut base = path;
    loop {
        // The shim's own calls go to libc (canonicalize stats and reads links).
        if let Ok(real) = ours(|| std::fs::canonicalize(base)) {
            let mut out = real.into_os_string().into_vec();
            for part in rest.iter().rev() {
                out.push(b'/');
                out.extend_from_slice(part);
            }
            return Some(paths::normalize(&out));
        }
        rest.push(base.file_name()?.as_bytes().to_vec());
        base = base.parent()?;
    }
}

/// The pool, opened at first use. On failure: one message on stderr, then the errno. In a
/// child forked from the pool's owner: the child's own connection to the owner's server.
fn pool() -> PResult<Arc<Pool>> {
    static POOL: OnceLock<Result<Arc<Pool>, c_int>> = OnceLock::new();
    if FORKED.load(Ordering::Relaxed) {
        return child_pool();
    }
    POOL.get_or_init(|| {
        let cfg = config();
        let prefix = String::from_utf8_lossy(&cfg.prefix);
        let Some(path) = &cfg.pool_path else {
            eprintln!("atomfs-preload: ATOMFS_POOL is not set; calls under {prefix} fail with ENODEV");
            return Err(libc::ENODEV);
        };
        // ATOMFS_ENGINE and ATOMFS_OPTIONS say how to create a store that does not exist yet
        // (read only then; an existing store is opened with the engine that made it).
        let create = match cfg.create_size.map(atomfs_posix::CreateSpec::from_env).transpose() {
            Ok(create) => create,
            Err(e) => {
                eprintln!("atomfs-preload: {e}; calls under {prefix} fail with EINVAL");
                return Err(libc::EINVAL);
            }
        };
        // From now on the shim creates files: know the umask they get (see umask.rs).
        atomfs_posix::umask::track();
        match atomfs_posix::open_pool(std::path::Path::new(path), create, false) {
            Ok(pool) => {
                POOL_OPEN.store(true, Ordering::Relaxed);
                serve(&pool);
                Ok(pool)
            }
            Err(e) => {
                let errno = e.errno();
                let name = std::io::Error::from_raw_os_error(errno);
                eprintln!("atomfs-preload: cannot open pool {path}: {e}; calls under {prefix} fail ({name})");
                Err(errno)
            }
        }
    })
    .clone()
}

/// The owner serves the pool to its forked children (and to other programs), unless
/// `ATOMFS_SERVE=0`: a server on `POOL.sock` whose threads are the shim's own. The socket is
/// removed when this process exits.
fn serve(pool: &Arc<Pool>) {
    static SERVER: OnceLock<remote::Server> = OnceLock::new();
    static SOCKET: OnceLock<(u32, std::ffi::CString)> = OnceLock::new();
    extern "C" fn remove_socket() {
        if let Some((pid, path)) = SOCKET.get() {
            if *pid == std::process::id() {
                // SAFETY: a NUL-terminated path; unlink has no other preconditions.
                unsafe { libc::unlink(path.as_ptr()) };
            }
        }
    }
    fn internal_thread() {
        BUSY.with(|b| b.set(true));
    }
    if std::env::var("ATOMFS_SERVE").is_ok_and(|v| v == "0")
        || pool.store.as_any().is::<remote::RemoteStore>()
    {
        return;
    }
    let socket = remote::socket_for(&pool.path);
    let options = remote::ServeOptions {
        on_thread: Some(internal_thread),
        fd_floor: Some(atomfs_posix::internal_fd_floor()),
        ..Default::default()
    };
    match remote::serve_with(pool.store.clone(), &socket, options) {
        Ok(server) => {
            let _ = SERVER.set(server);
            if let Ok(c) = std::ffi::CString::new(socket.as_os_str().as_encoded_bytes()) {
                if SOCKET.set((std::process::id(), c)).is_ok() {
                    // SAFETY: registering a plain extern "C" function with no captured state.
                    unsafe { libc::atexit(remove_socket) };
                }
            }
        }
        Err(e) => eprintln!(
            "atomfs-preload: not serving {} to other processes: {e}",
            pool.path.display()
        ),
    }
}

/// This process's own pool in a forked child: (pid, pool). A child of a child finds its
/// parent's entry here and forgets it (never closing it: it is the parent's connection).
static CHILD: std::sync::Mutex<Option<ChildPool>> = std::sync::Mutex::new(None);

/// The pid that opened it, and the pool (or why it could not be opened).
type ChildPool = (u32, Result<Arc<Pool>, c_int>);

/// Whether this process (a forked child) opened its own pool.
static CHILD_OPEN: AtomicBool = AtomicBool::new(false);

fn child_pool() -> PResult<Arc<Pool>> {
    let me = std::process::id();
    // Locked at the fork by another thread of the parent: unusable here.
    let Ok(mut slot) = CHILD.try_lock() else {
        forked_message();
        return Err(libc::EIO);
    };
    if let Some((pid, pool)) = slot.as_ref() {
        if *pid == me {
            return pool.clone();
        }
    }
    if let Some(inherited) = slot.take() {
        std::mem::forget(inherited);
    }
    let opened = ours(open_as_child);
    if opened.is_ok() {
        CHILD_OPEN.store(true, Ordering::Relaxed);
    }
    *slot = Some((me, opened.clone()));
    opened
}

/// Open the pool afresh in a forked child: the parent's pools and transactions forgotten,
/// then the pool opened through the registry — a client of the parent's server.
fn open_as_child() -> PResult<Arc<Pool>> {
    let cfg = config();
    let Some(path) = &cfg.pool_path else {
        return Err(libc::ENODEV);
    };
    if !atomfs_posix::forget_inherited() {
        forked_message();
        return Err(libc::EIO);
    }
    atomfs_posix::open_pool(std::path::Path::new(path), None, false).map_err(|e| {
        forked_message();
        eprintln!("atomfs-preload: the pool's owner does not serve it ({e})");
        libc::EIO
    })
}

/// Whether `file` belongs to this process's pool (in a forked child: not to the parent's).
fn own_file(file: &OpenFile) -> bool {
    if !FORKED.load(Ordering::Relaxed) {
        return true;
    }
    let me = std::process::id();
    CHILD.try_lock().ok().is_some_and(|slot| {
        slot.as_ref().is_some_and(|(pid, pool)| {
            *pid == me && pool.as_ref().is_ok_and(|p| p.id == file.pool.id)
        })
    })
}

fn forked_message() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "atomfs-preload: this process was forked from the one that owns the pool; \
             its descriptors under {} from before the fork fail with EIO (new opens go \
             through the owner's server)",
            String::from_utf8_lossy(&config().prefix)
        )
    });
}

/// Shim descriptors: kernel descriptor number → open file.
fn fds() -> &'static FdTable {
    static FDS: OnceLock<FdTable> = OnceLock::new();
    FDS.get_or_init(|| {
        register_atfork();
        TABLE_PID.store(this_pid(), Ordering::Relaxed);
        FdTable::new()
    })
}

/// Set in a child after fork when the parent had the pool open: the pool is the parent's.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether this process opened the pool.
static POOL_OPEN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread runs shim code: libc calls made by the shim itself (the store
    /// writing its pool file, ...) go straight to the real libc.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside the shim already.
fn busy() -> bool {
    BUSY.with(|b| b.get())
}

/// Run shim code: marks the thread busy, so that libc calls the shim itself makes (the
/// store writing its pool file, ...) go straight to the real libc.
fn ours<T>(f: impl FnOnce() -> T) -> T {
    struct Guard(bool);
    impl Drop for Guard {
        fn drop(&mut self) {
            BUSY.with(|b| b.set(self.0));
        }
    }
    let _guard = Guard(BUSY.with(|b| b.replace(true)));
    f()
}

/// The process the shim's tables belong to: set at start-up and by the fork handler in a
/// child. A vfork child (or posix_spawn's, or any clone that runs no fork handlers) shares
/// the parent's memory until it execs: it sees another pid here and leaves the tables alone
/// (its close, dup2 and dup3 go straight to the kernel), or it would take the parent's
/// descriptors away from it.
static TABLE_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn this_pid() -> u32 {
    // SAFETY: getpid has no preconditions (a system call: glibc keeps no cache to go stale
    // in a vfork child).
    unsafe { libc::getpid() as u32 }
}

/// Whether this is a child sharing its parent's memory (see [`TABLE_PID`]).
fn in_shared_child() -> bool {
    let owner = TABLE_PID.load(Ordering::Relaxed);
    owner != 0 && owner != this_pid()
}

/// In the child after fork: the pool stays the parent's. Only atomic stores here: a fork
/// handler must not take locks.
extern "C" fn after_fork_child() {
    TABLE_PID.store(this_pid(), Ordering::Relaxed);
    umask::after_fork_child();
    if POOL_OPEN.load(Ordering::Relaxed) || CHILD_OPEN.load(Ordering::Relaxed) {
        FORKED.store(true, Ordering::Relaxed);
    }
}

/// Register the fork handler, once.
fn register_atfork() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registering plain extern "C" handlers with no captured state.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_child)) };
    });
}

fn set_errno(e: c_int) {
    // SAFETY: this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// The C convention: the value, or -1 (as `T`) with errno set.
fn ret<T: From<i8>>(r: PResult<T>) -> T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        T::from(-1)
    })
}

/// The open file behind a shim descriptor, if `fd` is one (None: pass to the real libc). A
/// descriptor inherited across fork or exec is opened again through the pool's owner first
/// (see inherit.rs).
fn shim_file(fd: c_int) -> Option<Arc<OpenFile>> {
    if fd < 0 || busy() {
        return None;
    }
    ours(|| match fds().get(fd) {
        Ok(file) if own_file(&file) => Some(file),
        Ok(inherited) => Some(inherit::reattach(fd, inherited)),
        Err(_) => inherit::adopt(fd),
    })
}

/// Whether `fd` is a shim descriptor, as it stands (nothing is opened again).
fn is_shim_fd(fd: c_int) -> bool {
    fd >= 0 && !busy() && ours(|| fds().contains(fd))
}

/// Like [`shim_file`], but `EIO` for a descriptor a forked child inherited (its file is
/// the parent's).
fn usable(file: &OpenFile) -> PResult<&OpenFile> {
    if !own_file(file) {
        forked_message();
        return Err(libc::EIO);
    }
    Ok(file)
}

/// Borrow a C string (None for NULL).
unsafe fn bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL C string by the caller's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

pub use cwd::*;
pub use dirs::*;
pub use fds::*;
pub use paths::*;
pub use special::*;
pub use stdio::*;
pub use tempfiles::*;
pub use umask::umask;
pub use xattrs::*;
