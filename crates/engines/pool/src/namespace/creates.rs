//! Inodes created by transactions that have not committed yet, and the rule that keeps each
//! of them to its transaction (docs/engines/pool.md "Uncommitted creates").
//!
//! A file or directory created by transaction T belongs to T until T ends. An abort frees
//! the inode, so a change made to it from outside T would outlive it: an auto-committed
//! write's blocks leaked (and a committed pending version naming a pointer inside a freed
//! inode), an entry naming a free inode after a link or rename, a committed file's entry
//! wiped by the abort's undo of a directory slot after an unlink. Such a change — a write or
//! `set_len` not running in T (on its own, or in an O_ATOMIC implicit transaction), binding
//! the file to another transaction, unlinking, renaming, linking or changing the attributes
//! of the inode, or adding, removing or moving an entry of a directory T created — fails with
//! `FileInTransaction(T)` (EBUSY). Reading, opening and looking up are allowed.
//!
//! The record has a lock of its own, under which no other lock is taken: the inode lock
//! cannot hold it, because a namespace operation holds its transaction's lock while it looks
//! at a file, and a writer holds the file's inode lock while it takes its transaction's. A
//! count lets the write path skip the lock while no create is pending.

use crate::alloc::U64Map;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use store::{Error, Result};

/// Inode -> id of the open transaction that created it.
#[derive(Default)]
pub(crate) struct Creates {
    owners: Mutex<U64Map<u64>>,
    /// Number of entries in `owners`, readable without the lock.
    pending: AtomicUsize,
}

impl Creates {
    /// Transaction `txid` created inode `ino` (before the inode can be named or opened).
    pub(crate) fn record(&self, ino: u64, txid: u64) {
        let mut owners = self.owners.lock();
        owners.insert(ino, txid);
        self.pending.store(owners.len(), Ordering::Release);
    }

    /// Refuse a change to `ino` made in transaction `txid` (0: outside any transaction)
    /// when another transaction created it and has not ended.
    pub(crate) fn check(&self, ino: u64, txid: u64) -> Result<()> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        match self.owners.lock().get(&ino) {
            Some(&owner) if owner != txid => Err(Error::FileInTransaction(owner)),
            _ => Ok(()),
        }
    }

    /// `check` for every inode of `inos`.
    pub(crate) fn check_all(&self, inos: &[u64], txid: u64) -> Result<()> {
        inos.iter().try_for_each(|&ino| self.check(ino, txid))
    }

    /// The transaction that created `inos` committed (after its commit point) or aborted
    /// (after the inodes were freed or marked gone): they are no longer anyone's.
    pub(crate) fn ended(&self, inos: &[u64]) {
        if inos.is_empty() {
            return;
        }
        let mut owners = self.owners.lock();
        for ino in inos {
            owners.remove(ino);
        }
        self.pending.store(owners.len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_creating_transaction_may_change_an_uncommitted_inode() {
        let creates = Creates::default();
        assert!(creates.check(5, 0).is_ok());
        creates.record(5, 7);
        assert!(creates.check(5, 7).is_ok());
        assert!(matches!(
            creates.check(5, 0),
            Err(Error::FileInTransaction(7))
        ));
        assert!(matches!(
            creates.check_all(&[4, 5], 8),
            Err(Error::FileInTransaction(7))
        ));
        assert!(creates.check(4, 0).is_ok());
        creates.ended(&[5]);
        assert!(creates.check(5, 0).is_ok());
        assert_eq!(creates.pending.load(Ordering::Relaxed), 0);
    }
}
