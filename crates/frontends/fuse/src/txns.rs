//! The transactions of a mount: which handles each binds, and which process's namespace calls
//! join it.
//!
//! A transaction begins by ioctl on a descriptor of the mount (`IOC_TX_BEGIN`). The process
//! that issued it (its thread group: FUSE requests carry the calling thread's id, mapped to its
//! process through `/proc`) then has its namespace calls — create, mkdir, mknod, symlink, link,
//! unlink, rmdir, rename, setattr, setxattr, removexattr — join the transaction: they commit
//! and abort with it, as they do in the Rust API's `Tx`. A file the transaction creates is
//! bound to it through every handle that process opens on it, so its writes join too; the
//! other files join by `IOC_TX_ADD`, as before.
//!
//! A handle bound by ioctl ([`Binding::Ioctl`]) aborts its transaction when it is closed
//! before the commit (as the death of the program would); a handle bound because its file was
//! created by the transaction ([`Binding::Created`]) is merely unbound when closed.

use std::collections::{HashMap, HashSet};
use store::Ino;

/// How a handle came to be bound to a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// By `IOC_TX_BEGIN` / `IOC_TX_ADD` on its descriptor: closing it aborts the transaction.
    Ioctl,
    /// Opened by the transaction's process on a file the transaction created.
    Created,
}

/// Something a transaction changed that the kernel may have cached: forgotten at an abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Touched {
    Inode(Ino),
    Entry(Ino, Vec<u8>),
}

/// One open transaction.
#[derive(Debug, Default)]
pub(crate) struct OpenTx {
    /// Handles bound to it (file handles, or the directory handle it was begun on).
    pub(crate) handles: Vec<u64>,
    /// The process whose namespace calls join it.
    process: Option<u32>,
    /// Inodes it created.
    pub(crate) created: HashSet<Ino>,
    /// Names and inodes it changed.
    pub(crate) touched: Vec<Touched>,
}

/// The open transactions of a mount.
#[derive(Debug, Default)]
pub(crate) struct Txns {
    open: HashMap<u64, OpenTx>,
    /// Process (thread group id) → the transaction its namespace calls join (the last begun).
    by_process: HashMap<u32, u64>,
}

impl Txns {
    /// A transaction begun on `handle` by `process` (None: no process's calls join it).
    pub(crate) fn begin(&mut self, tx: u64, handle: u64, process: Option<u32>) {
        let fresh = self
            .open
            .insert(
                tx,
                OpenTx {
                    handles: vec![handle],
                    process,
                    ..OpenTx::default()
                },
            )
            .is_none();
        assert!(fresh, "transaction {tx} begun twice");
        if let Some(p) = process {
            self.by_process.insert(p, tx);
        }
    }

    /// One more handle bound to `tx`.
    pub(crate) fn bind(&mut self, tx: u64, handle: u64) {
        self.open.entry(tx).or_default().handles.push(handle);
    }

    /// A handle of `tx` was closed (its binding ends; the transaction goes on).
    pub(crate) fn unbind(&mut self, tx: u64, handle: u64) {
        if let Some(t) = self.open.get_mut(&tx) {
            t.handles.retain(|h| *h != handle);
        }
    }

    /// The transaction ended: everything it bound, created and touched.
    pub(crate) fn end(&mut self, tx: u64) -> OpenTx {
        let t = self.open.remove(&tx).unwrap_or_default();
        if let Some(p) = t.process {
            if self.by_process.get(&p) == Some(&tx) {
                self.by_process.remove(&p);
            }
        }
        t
    }

    /// The transaction the calls of the thread `pid` join, if its process began one.
    pub(crate) fn of_thread(&self, pid: u32) -> Option<u64> {
        if self.by_process.is_empty() {
            return None;
        }
        if let Some(tx) = self.by_process.get(&pid) {
            return Some(*tx);
        }
        self.by_process.get(&thread_group(pid)?).copied()
    }

    /// `tx` changed `what`.
    pub(crate) fn touch(&mut self, tx: u64, what: Touched) {
        if let Some(t) = self.open.get_mut(&tx) {
            t.touched.push(what);
        }
    }

    /// `tx` created `ino`.
    pub(crate) fn created(&mut self, tx: u64, ino: Ino) {
        if let Some(t) = self.open.get_mut(&tx) {
            t.created.insert(ino);
            t.touched.push(Touched::Inode(ino));
        }
    }

    /// Whether `tx` created `ino`.
    pub(crate) fn is_created(&self, tx: u64, ino: Ino) -> bool {
        self.open.get(&tx).is_some_and(|t| t.created.contains(&ino))
    }

    /// Every open transaction (for the abort at unmount).
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.open.keys().copied().collect()
    }
}

/// The process (thread group) of thread `pid`, from `/proc/PID/status`.
pub(crate) fn thread_group(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_joins_its_last_transaction_until_it_ends() {
        let mut t = Txns::default();
        let me = std::process::id();
        assert_eq!(t.of_thread(me), None);
        t.begin(7, 100, Some(me));
        assert_eq!(t.of_thread(me), Some(7));
        t.begin(8, 101, None);
        t.bind(7, 102);
        t.created(7, 55);
        assert!(t.is_created(7, 55) && !t.is_created(8, 55));
        t.unbind(7, 100);
        let ended = t.end(7);
        assert_eq!(ended.handles, vec![102]);
        assert!(ended.touched.contains(&Touched::Inode(55)));
        assert_eq!(t.of_thread(me), None);
        assert_eq!(t.ids(), vec![8]);
    }

    #[test]
    fn a_thread_maps_to_its_process() {
        let me = std::process::id();
        let tid = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        })
        .join()
        .expect("thread");
        assert_eq!(thread_group(tid), None, "an exited thread has no status");
        assert_eq!(thread_group(me), Some(me));
        let mut t = Txns::default();
        t.begin(3, 1, Some(me));
        let (tx, rx) = std::sync::mpsc::channel();
        let th = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() as u32 }).expect("send");
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        let tid = rx.recv().expect("tid");
        assert_ne!(tid, me);
        assert_eq!(t.of_thread(tid), Some(3), "a thread of the process joins");
        th.join().expect("thread");
    }
}
