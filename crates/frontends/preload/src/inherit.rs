//! Descriptors that outlive the shim that opened them: a forked child's inherited
//! descriptors, and the ones an exec'd program finds open (`sh -c 'sort > /atomfs/out'`,
//! `{ cmd1; cmd2; } > /atomfs/log`).
//!
//! Every shim descriptor is a sealed memfd whose contents are a ticket naming the pool, the
//! inode, the status flags and the O_ATOMIC mode, written before the seals go on; its kernel
//! file offset mirrors the description's offset ([`atomfs_posix::Mirror`]), so every process
//! sharing the kernel description sees one offset, as POSIX wants. A process that finds such
//! a descriptor opens the same inode through the pool's owner (its store server) on first
//! use, with a handle of its own:
//! - a forked child, for the descriptors in the table it inherited (the parent's handles are
//!   never touched: the old entries are forgotten, not released);
//! - an exec'd program, for the memfds listed at start-up from `/proc/self/fd` whose ticket
//!   names the pool of its own `ATOMFS_POOL`.

use std::collections::HashSet;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use atomfs_posix::{self as px, OpenFile, PResult, Target};

use crate::{config, fds, ours};

const MAGIC: &[u8; 8] = b"ATOMFSD1";
/// Longest ticket read back (pool path and path inside the pool are bounded by PATH_MAX).
const TICKET_MAX: usize = 16 + 8 + 4 + 2 + 8 + 2 * 4096;

/// What a descriptor's memfd says about its open file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) ino: u64,
    pub(crate) status: i32,
    pub(crate) atomic: bool,
    pub(crate) dir: bool,
    /// `ATOMFS_POOL` of the process that opened it.
    pub(crate) pool: Vec<u8>,
    /// Path inside the pool.
    pub(crate) path: Vec<u8>,
}

impl Ticket {
    pub(crate) fn of(file: &OpenFile) -> Ticket {
        Ticket {
            ino: file.ino,
            status: file.status.load(Ordering::Relaxed),
            atomic: file.atomic.load(Ordering::Relaxed),
            dir: matches!(file.target, Target::Dir),
            pool: config().pool_path.clone().unwrap_or_default().into_bytes(),
            path: file.path.clone(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.ino.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.push(u8::from(self.atomic));
        out.push(u8::from(self.dir));
        for part in [&self.pool, &self.path] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Ticket> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let (ino, rest) = rest.split_first_chunk::<8>()?;
        let (status, rest) = rest.split_first_chunk::<4>()?;
        let (&[atomic, dir], mut rest) = rest.split_first_chunk::<2>()?;
        let mut parts = Vec::new();
        for _ in 0..2 {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            parts.push(tail.get(..len)?.to_vec());
            rest = tail.get(len..)?;
        }
        let path = parts.pop()?;
        let pool = parts.pop()?;
        if atomic > 1 || dir > 1 || !rest.is_empty() {
            return None;
        }
        Some(Ticket {
            ino: u64::from_le_bytes(*ino),
            status: i32::from_le_bytes(*status),
            atomic: atomic == 1,
            dir: dir == 1,
            pool,
            path,
        })
    }
}

/// Write `ticket` into a fresh (not yet sealed) memfd.
pub(crate) fn write_ticket(fd: c_int, ticket: &Ticket) -> PResult<()> {
    let bytes = ticket.encode();
    // SAFETY: `bytes` is valid for its length; pwrite leaves the file offset alone.
    let n = unsafe { libc::pwrite(fd, bytes.as_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        return Err(libc::EIO);
    }
    Ok(())
}

fn read_ticket(fd: c_int) -> Option<Ticket> {
    let mut buf = vec![0u8; TICKET_MAX];
    // SAFETY: `buf` is valid for its length; pread leaves the file offset alone.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    buf.truncate(usize::try_from(n).ok()?);
    Ticket::decode(&buf)
}

/// Descriptors found open at start-up that may be shim descriptors of another process.
static FOUND: Mutex<Option<HashSet<c_int>>> = Mutex::new(None);
static ANY_FOUND: AtomicBool = AtomicBool::new(false);
/// The working-directory marker found at start-up (cwd.rs), -1 for none.
static CWD_MARKER: AtomicI32 = AtomicI32::new(-1);

/// At start-up (an `.init_array` constructor): list the memfds named like the shim's.
extern "C" fn scan_at_start() {
    ours(|| {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return;
        };
        let mut found = HashSet::new();
        for entry in dir.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<c_int>().ok())
            else {
                continue;
            };
            let Ok(link) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let link = link.as_os_str().as_encoded_bytes();
            if link.starts_with(b"/memfd:atomfs-cwd") {
                CWD_MARKER.store(fd, Ordering::Release);
            } else if link.starts_with(b"/memfd:atomfs") {
                found.insert(fd);
            }
        }
        if !found.is_empty() {
            for fd in 0..3 {
                if found.contains(&fd) {
                    crate::stdio::replace_std_stream(fd);
                }
            }
            if let Ok(mut slot) = FOUND.lock() {
                *slot = Some(found);
                ANY_FOUND.store(true, Ordering::Release);
            }
        }
    })
}

#[used]
#[link_section = ".init_array"]
static SCAN_AT_START: extern "C" fn() = scan_at_start;

/// A descriptor found at start-up, adopted now: the same inode opened through this process's
/// pool (a client of the owner's server when the owner serves). None when `fd` is not one.
pub(crate) fn adopt(fd: c_int) -> Option<Arc<OpenFile>> {
    if !ANY_FOUND.load(Ordering::Acquire) {
        return None;
    }
    let mut slot = FOUND.lock().ok()?;
    if !slot.as_mut()?.remove(&fd) {
        return None;
    }
    drop(slot);
    // Read again: the number may have been closed and reused since start-up.
    let ticket = read_ticket(fd)?;
    if Some(ticket.pool.as_slice()) != config().pool_path.as_deref().map(str::as_bytes) {
        eprintln!(
            "atomfs-preload: descriptor {fd} belongs to pool {} (this program serves {}): left alone",
            String::from_utf8_lossy(&ticket.pool),
            config().pool_path.as_deref().unwrap_or("none")
        );
        return None;
    }
    let file = crate::pool()
        .and_then(|pool| open_again(&pool, &ticket))
        .map_err(|e| {
            eprintln!(
                "atomfs-preload: descriptor {fd} ({}) could not be opened again: errno {e}",
                String::from_utf8_lossy(&ticket.path)
            )
        })
        .ok()?;
    fds().insert(fd, file.clone());
    Some(file)
}

/// The working directory a parent left (its marker found at start-up), taken up once.
pub(crate) fn adopt_cwd() {
    let fd = CWD_MARKER.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        ours(|| adopt_cwd_marker(fd));
    }
}

fn adopt_cwd_marker(fd: c_int) {
    let Some(ticket) = read_ticket(fd).filter(|t| t.dir) else {
        return;
    };
    if Some(ticket.pool.as_slice()) != config().pool_path.as_deref().map(str::as_bytes) {
        return;
    }
    match crate::pool().and_then(|pool| open_again(&pool, &ticket)) {
        Ok(dir) => crate::cwd::inherit(fd, dir),
        Err(e) => eprintln!(
            "atomfs-preload: the working directory {} could not be opened again: errno {e}",
            String::from_utf8_lossy(&ticket.path)
        ),
    }
}

/// Forget a descriptor found at start-up that the program closes unused.
pub(crate) fn closed(fd: c_int) {
    if ANY_FOUND.load(Ordering::Acquire) {
        if let Ok(mut slot) = FOUND.lock() {
            if let Some(set) = slot.as_mut() {
                set.remove(&fd);
            }
        }
    }
}

/// In a forked child: the parent's descriptor `fd` (entry `old`), opened again through the
/// parent's server. On failure, `old` itself (its calls then fail with EIO, as before).
pub(crate) fn reattach(fd: c_int, old: Arc<OpenFile>) -> Arc<OpenFile> {
    let ticket = Ticket::of(&old);
    let again = crate::child_pool().and_then(|pool| open_again(&pool, &ticket));
    match again {
        Ok(file) => {
            if let Some(previous) = fds().insert(fd, file.clone()) {
                // The parent's open file: its handle is the parent's to release.
                std::mem::forget(previous);
            }
            std::mem::forget(old);
            file
        }
        Err(_) => old,
    }
}

fn open_again(pool: &Arc<px::Pool>, t: &Ticket) -> PResult<Arc<OpenFile>> {
    let file = px::open_inode(pool, t.ino, t.status, t.atomic, &t.path)?;
    if t.dir != matches!(file.target, Target::Dir) {
        return Err(libc::EBADF);
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_round_trip_and_refuse_garbage() {
        let t = Ticket {
            ino: 42,
            status: libc::O_WRONLY | libc::O_APPEND,
            atomic: true,
            dir: false,
            pool: b"/dev/shm/p.pool".to_vec(),
            path: b"/logs/a".to_vec(),
        };
        let bytes = t.encode();
        assert_eq!(Ticket::decode(&bytes), Some(t));
        for cut in 0..bytes.len() {
            assert_eq!(Ticket::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(Ticket::decode(&extra), None);
        let mut lying = bytes.clone();
        lying[8 + 8 + 4 + 2] = 0xff;
        assert_eq!(Ticket::decode(&lying), None);
    }
}
