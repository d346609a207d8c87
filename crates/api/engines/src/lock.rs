//! The one lock protocol of atomfs: one owner per store, whichever front end opens it.
//!
//! An engine keeps a store's indexes, allocators and checkpoint threads in the DRAM of the
//! process that opened it, so two processes serving one store at once corrupt it. Every front
//! end and tool (the Rust API, the C API, the LD_PRELOAD shim, the SQLite VFS, the FUSE server,
//! the CLI) opens stores through this registry, which takes an exclusive, non-blocking `flock`
//! on the pool file itself — and, for an engine that keeps files in a home directory, on that
//! directory too — before the engine maps anything, and holds it for the life of the open
//! store. A second opener, in this process or another, gets [`Error::Busy`] (EBUSY) saying
//! "POOL is in use by process PID (COMMAND)". `atomfs mkfs --force` takes the same lock before
//! it replaces a store, so a mounted store is never replaced under its server.
//!
//! `flock` locks belong to the open file description: they survive `dup` and `fork` of the
//! descriptor and vanish when the owner exits, however it exits (SIGKILL included), so a
//! crashed owner never leaves a stale lock behind.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::{AsRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use store::{Error, Result};

/// Exclusive locks on a store's pool file (and home directory), released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    held: Vec<Held>,
}

#[derive(Debug)]
struct Held {
    path: PathBuf,
    /// The descriptor holding the flock. Its number can move ([`StoreLock::relocate_fd`]).
    fd: AtomicI32,
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this lock and closed once, here.
        unsafe { libc::close(self.fd.load(Ordering::Relaxed)) };
    }
}

fn io(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

impl StoreLock {
    /// Lock the existing file or directory at `path`, without waiting.
    pub fn acquire(path: &Path) -> Result<StoreLock> {
        let mut lock = StoreLock { held: Vec::new() };
        lock.also(path)?;
        Ok(lock)
    }

    /// No lock: what a client of another process's server holds (that process owns the
    /// store and its lock).
    pub fn none() -> StoreLock {
        StoreLock { held: Vec::new() }
    }

    /// Whether this process owns the store (holds its lock), rather than being a client.
    pub fn owns(&self) -> bool {
        !self.held.is_empty()
    }

    /// Lock an already open file (one this process just created): no other process can have
    /// it locked, so this only fails on an I/O error.
    pub fn acquire_file(path: &Path, file: File) -> Result<StoreLock> {
        let mut lock = StoreLock { held: Vec::new() };
        lock.hold(path, file)?;
        Ok(lock)
    }

    /// Lock one more path (a host-file engine's home directory) under the same lock.
    pub fn also(&mut self, path: &Path) -> Result<()> {
        let file = File::open(path).map_err(|e| io(path, "open", e))?;
        self.hold(path, file)
    }

    fn hold(&mut self, path: &Path, file: File) -> Result<()> {
        // SAFETY: flock on a descriptor `file` keeps open for the call; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Busy(busy_message(path, &file)));
            }
            return Err(io(path, "flock", e));
        }
        self.held.push(Held {
            path: path.to_path_buf(),
            fd: AtomicI32::new(file.into_raw_fd()),
        });
        Ok(())
    }

    /// The paths this lock holds, the pool file first.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.held.iter().map(|h| h.path.as_path())
    }

    /// The descriptors holding the locks.
    pub fn fds(&self) -> Vec<i32> {
        self.held
            .iter()
            .map(|h| h.fd.load(Ordering::Relaxed))
            .collect()
    }

    /// Whether `fd` is one of this lock's descriptors.
    pub fn holds_fd(&self, fd: i32) -> bool {
        self.held.iter().any(|h| h.fd.load(Ordering::Relaxed) == fd)
    }

    /// Move this lock's descriptor numbered `fd` to a free number at or above `floor` (and
    /// never `fd` itself), so that the application can use the number (the LD_PRELOAD shim
    /// does this before a program's `dup2` onto it or `close` of it). Returns whether `fd`
    /// was one of this lock's and was moved.
    pub fn relocate_fd(&self, fd: i32, floor: i32) -> bool {
        let Some(held) = self
            .held
            .iter()
            .find(|h| h.fd.load(Ordering::Relaxed) == fd)
        else {
            return false;
        };
        // SAFETY: duplicating a descriptor this lock owns; F_DUPFD_CLOEXEC picks a free number
        // at or above its argument.
        let mut new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
        if new == fd {
            // SAFETY: as above, from one past the number to avoid.
            let again = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, fd + 1) };
            // SAFETY: closing the duplicate just made (it is `fd` itself only if `fd` was
            // free, which it is not: this lock holds it).
            unsafe { libc::close(new) };
            new = again;
        }
        if new < 0 {
            return false;
        }
        held.fd.store(new, Ordering::Relaxed);
        // SAFETY: the old number is this lock's; the flock lives on in `new` (same open file
        // description).
        unsafe { libc::close(fd) };
        true
    }
}

/// "PATH is in use by process PID (COMMAND)", the holder read from /proc/locks.
fn busy_message(path: &Path, file: &File) -> String {
    let holder = file
        .metadata()
        .ok()
        .and_then(|m| lock_holder(m.dev(), m.ino()));
    match holder {
        Some(pid) => {
            let command = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            format!("{} is in use by process {pid} ({command})", path.display())
        }
        None => format!("{} is in use by another process", path.display()),
    }
}

/// The pid that holds a lock on the inode `(dev, ino)`, from /proc/locks.
pub fn lock_holder(dev: u64, ino: u64) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let wanted = format!("{major:02x}:{minor:02x}:{ino}");
    table
        .lines()
        .filter(|line| !line.contains("->")) // waiters, not holders
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // "1: FLOCK ADVISORY WRITE 1234 00:1a:5678 0 EOF"
            let id = fields.get(5)?;
            same_inode(id, &wanted)
                .then(|| fields.get(4)?.parse().ok())
                .flatten()
        })
}

/// /proc/locks prints the device numbers with at least two hex digits; compare numerically.
fn same_inode(field: &str, wanted: &str) -> bool {
    let parse = |s: &str| -> Option<(u64, u64, u64)> {
        let mut parts = s.split(':');
        let major = u64::from_str_radix(parts.next()?, 16).ok()?;
        let minor = u64::from_str_radix(parts.next()?, 16).ok()?;
        let ino = parts.next()?.parse().ok()?;
        Some((major, minor, ino))
    };
    matches!((parse(field), parse(wanted)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("atomfs-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn a_second_lock_is_busy_and_names_this_process() {
        let dir = scratch("busy");
        let pool = dir.join("p.pool");
        std::fs::write(&pool, b"x").expect("write");
        let first = StoreLock::acquire(&pool).expect("first lock");
        let second = StoreLock::acquire(&pool);
        let Err(Error::Busy(message)) = second else {
            panic!("second lock was not busy: {second:?}");
        };
        let pid = std::process::id();
        assert!(
            message.contains(&format!("process {pid} (")),
            "holder not named: {message}"
        );
        drop(first);
        assert!(
            StoreLock::acquire(&pool).is_ok(),
            "lock not released on drop"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_relocated_descriptor_keeps_the_lock() {
        let dir = scratch("relocate");
        let pool = dir.join("p.pool");
        std::fs::write(&pool, b"x").expect("write");
        let lock = StoreLock::acquire(&pool).expect("lock");
        let fd = lock.held[0].fd.load(Ordering::Relaxed);
        assert!(lock.holds_fd(fd));
        assert!(lock.relocate_fd(fd, 100));
        assert!(!lock.holds_fd(fd));
        assert!(matches!(StoreLock::acquire(&pool), Err(Error::Busy(_))));
        drop(lock);
        assert!(StoreLock::acquire(&pool).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn directories_lock_too() {
        let dir = scratch("dir");
        let lock = StoreLock::acquire(&dir).expect("lock dir");
        assert!(matches!(StoreLock::acquire(&dir), Err(Error::Busy(_))));
        drop(lock);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
