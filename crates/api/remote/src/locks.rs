//! Advisory file locks shared by every process using a store: the owner's own calls and its
//! clients' (through the server). POSIX record-lock rules: read and write locks on byte
//! ranges, held per owner, a write lock conflicting with any other owner's lock on an
//! overlapping range, a read lock with another owner's write lock; setting a lock replaces
//! the owner's own locks on the range (splitting them), unlocking removes them. Requests
//! never block here: a caller that wants to wait (F_SETLKW) retries.
//!
//! An owner is (connection, id): connection 0 is the owner process itself, a client's is its
//! connection's number, so no client can name another's locks. A client's locks go when its
//! connection ends (as a dead process's locks do).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use store::Ino;

/// What a lock request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Read,
    Write,
    Unlock,
}

impl LockKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            LockKind::Read => 0,
            LockKind::Write => 1,
            LockKind::Unlock => 2,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<LockKind> {
        [LockKind::Read, LockKind::Write, LockKind::Unlock]
            .into_iter()
            .find(|k| k.code() == c)
    }
}

/// Who holds a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockOwner {
    /// 0: the store's owner process; else the client connection's number.
    pub conn: u64,
    /// The owner within it (a process id for POSIX locks, a description for OFD locks).
    pub id: u64,
}

/// A byte range: `start`, and `len` bytes (0: to the end of any file, as in `struct flock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockRange {
    pub start: u64,
    pub len: u64,
}

impl LockRange {
    fn end(self) -> u64 {
        if self.len == 0 {
            u64::MAX
        } else {
            self.start.saturating_add(self.len)
        }
    }
}

/// The lock that stands in a request's way (what F_GETLK reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub kind: LockKind,
    pub range: LockRange,
    /// Process id its holder gave.
    pub pid: u32,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    owner: LockOwner,
    write: bool,
    start: u64,
    /// Exclusive; `u64::MAX` for "to the end".
    end: u64,
    pid: u32,
}

impl Held {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start < end && start < self.end
    }
    fn conflict(&self) -> Conflict {
        Conflict {
            kind: if self.write {
                LockKind::Write
            } else {
                LockKind::Read
            },
            range: LockRange {
                start: self.start,
                len: if self.end == u64::MAX {
                    0
                } else {
                    self.end - self.start
                },
            },
            pid: self.pid,
        }
    }
}

/// The locks of one store.
#[derive(Default)]
pub struct LockTable {
    by_ino: Mutex<HashMap<Ino, Vec<Held>>>,
}

impl LockTable {
    /// Set (or remove, for [`LockKind::Unlock`]) `owner`'s lock on `range` of `ino`; the
    /// lock in the way when another owner's conflicts (nothing changes then).
    pub fn set(
        &self,
        ino: Ino,
        owner: LockOwner,
        pid: u32,
        kind: LockKind,
        range: LockRange,
    ) -> Result<(), Conflict> {
        let (start, end) = (range.start, range.end());
        let mut map = self.by_ino.lock().unwrap_or_else(|p| p.into_inner());
        let held = map.entry(ino).or_default();
        if let Some(c) = first_conflict(held, owner, kind, start, end) {
            return Err(c);
        }
        // The owner's own locks on the range go (split around it), then the new one comes.
        let mut kept = Vec::with_capacity(held.len() + 2);
        for h in held.drain(..) {
            if h.owner != owner || !h.overlaps(start, end) {
                kept.push(h);
                continue;
            }
            if h.start < start {
                kept.push(Held { end: start, ..h });
            }
            if h.end > end {
                kept.push(Held { start: end, ..h });
            }
        }
        if kind != LockKind::Unlock && start < end {
            kept.push(Held {
                owner,
                write: kind == LockKind::Write,
                start,
                end,
                pid,
            });
        }
        assert!(
            kept.iter().all(|h| h.start < h.end),
            "lock table: an empty range was kept"
        );
        if kept.is_empty() {
            map.remove(&ino);
        } else {
            *held = kept;
        }
        Ok(())
    }

    /// The lock that would stand in the way of `owner` taking `kind` on `range` (F_GETLK).
    pub fn test(
        &self,
        ino: Ino,
        owner: LockOwner,
        kind: LockKind,
        range: LockRange,
    ) -> Option<Conflict> {
        let map = self.by_ino.lock().unwrap_or_else(|p| p.into_inner());
        let held = map.get(&ino)?;
        first_conflict(held, owner, kind, range.start, range.end())
    }

    /// Drop every lock `owner` holds on `ino` (a POSIX lock owner closed a descriptor of it).
    pub fn release(&self, ino: Ino, owner: LockOwner) {
        let mut map = self.by_ino.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = map.get_mut(&ino) {
            held.retain(|h| h.owner != owner);
            if held.is_empty() {
                map.remove(&ino);
            }
        }
    }

    /// Drop every lock of a connection (a client went away).
    pub fn release_connection(&self, conn: u64) {
        let mut map = self.by_ino.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, held| {
            held.retain(|h| h.owner.conn != conn);
            !held.is_empty()
        });
    }
}

fn first_conflict(
    held: &[Held],
    owner: LockOwner,
    kind: LockKind,
    start: u64,
    end: u64,
) -> Option<Conflict> {
    if kind == LockKind::Unlock {
        return None;
    }
    held.iter()
        .find(|h| {
            h.owner != owner && h.overlaps(start, end) && (h.write || kind == LockKind::Write)
        })
        .map(Held::conflict)
}

/// The lock table of the store whose server socket is `socket` (see [`crate::socket_for`]),
/// shared in this process by the server and the owner's own callers.
pub fn table_for(socket: &Path) -> Arc<LockTable> {
    static TABLES: OnceLock<Mutex<HashMap<PathBuf, Arc<LockTable>>>> = OnceLock::new();
    let tables = TABLES.get_or_init(Default::default);
    let mut map = tables.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(socket.to_path_buf()).or_default().clone()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    const A: LockOwner = LockOwner { conn: 0, id: 1 };
    const B: LockOwner = LockOwner { conn: 3, id: 1 };

    fn r(start: u64, len: u64) -> LockRange {
        LockRange { start, len }
    }

    #[test]
    fn readers_share_writers_exclude() {
        let t = LockTable::default();
        assert!(t.set(7, A, 10, LockKind::Read, r(0, 100)).is_ok());
        assert!(t.set(7, B, 20, LockKind::Read, r(50, 100)).is_ok());
        let c = t.set(7, B, 20, LockKind::Write, r(0, 10)).unwrap_err();
        assert_eq!((c.kind, c.pid, c.range), (LockKind::Read, 10, r(0, 100)));
        // Another inode is free; the same owner may upgrade where no one else reads.
        assert!(t.set(8, B, 20, LockKind::Write, r(0, 0)).is_ok());
        assert!(t.set(7, A, 10, LockKind::Write, r(0, 40)).is_ok());
        assert_eq!(
            t.test(7, B, LockKind::Read, r(10, 1)).map(|c| c.kind),
            Some(LockKind::Write)
        );
        assert_eq!(t.test(7, B, LockKind::Read, r(40, 10)), None);
    }

    #[test]
    fn unlocking_splits_and_release_clears() {
        let t = LockTable::default();
        t.set(1, A, 1, LockKind::Write, r(0, 0)).unwrap();
        t.set(1, A, 1, LockKind::Unlock, r(100, 10)).unwrap();
        assert!(t.set(1, B, 2, LockKind::Write, r(100, 10)).is_ok());
        assert!(t.set(1, B, 2, LockKind::Write, r(99, 2)).is_err());
        assert!(
            t.set(1, B, 2, LockKind::Read, r(1 << 40, 1)).is_err(),
            "to the end"
        );
        t.release(1, A);
        assert!(t.set(1, B, 2, LockKind::Write, r(0, 0)).is_ok());
        t.release_connection(3);
        assert_eq!(t.test(1, A, LockKind::Write, r(0, 0)), None);
        assert!(t.by_ino.lock().unwrap().is_empty());
    }
}
