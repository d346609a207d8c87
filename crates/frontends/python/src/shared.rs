//! What a store and its files and transactions share: the open store and its lock.

use crate::fork;
use engines::{OpenedStore, StoreLock};
use pyo3::prelude::*;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use store::{Error, Result, Store};

/// One open store. Checkpointed and closed by [`Shared::close`], or when the last Python
/// object using it goes away.
pub struct Shared {
    /// Never dropped in a forked child (see [`fork`]): its engine's memory is the parent's.
    store: ManuallyDrop<Arc<dyn Store>>,
    /// The store's lock: `None` once closed. Taken only with the GIL released (a close holds
    /// it through the final checkpoint).
    lock: Mutex<Option<StoreLock>>,
    /// Set once closed, for the `closed` property (read with the GIL held).
    closed: AtomicBool,
    pub engine: &'static str,
    pub path: std::path::PathBuf,
    /// The fork generation this store was opened in.
    generation: u64,
}

impl Shared {
    pub fn new(opened: OpenedStore) -> Arc<Shared> {
        Arc::new(Shared {
            store: ManuallyDrop::new(opened.store),
            lock: Mutex::new(Some(opened.lock)),
            closed: AtomicBool::new(false),
            engine: opened.engine.name(),
            path: opened.path,
            generation: fork::generation(),
        })
    }

    fn inherited(&self) -> bool {
        self.generation != fork::generation()
    }

    /// The store, unless this process is a forked child of the one that opened it.
    pub fn store(&self) -> Result<&dyn Store> {
        if self.inherited() {
            return Err(Error::Busy(format!(
                "{} was opened by the parent of this forked process; open stores after the fork",
                self.path.display()
            )));
        }
        Ok(&**self.store)
    }

    /// Checkpoint and close the store, then release its lock. Closing twice is a no-op. In a
    /// forked child, closing an inherited store only forgets it (closes the child's copies of
    /// the lock's descriptors; the parent keeps the lock and the store).
    pub fn close(&self) -> Result<()> {
        let mut lock = self.lock.lock().map_err(|_| Error::Closed)?;
        if lock.is_none() {
            return Ok(());
        }
        let result = if self.inherited() {
            Ok(())
        } else {
            self.store.unmount()
        };
        *lock = None;
        self.closed.store(true, Ordering::Release);
        result
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether `other` is this same store.
    pub fn same(self: &Arc<Self>, other: &Arc<Shared>) -> bool {
        Arc::ptr_eq(self, other)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.inherited() {
            // The child must not touch the parent's engine: leak it (and let the descriptors
            // of the inherited lock close; the parent's own descriptor keeps the flock).
            return;
        }
        if !self.is_closed() {
            // A destructor cannot report; `Store.close()` does. The checkpoint may take a
            // while: let other Python threads run.
            let closed = Python::try_attach(|py| py.detach(|| self.close()));
            if closed.is_none() {
                // The interpreter is shutting down: close without releasing anything.
                let _ = self.close();
            }
        }
        // SAFETY: `store` is dropped exactly once, here, and never used after; the early return
        // above leaks it instead in a forked child.
        unsafe { ManuallyDrop::drop(&mut self.store) };
    }
}

/// Bytes of a path as the host sees them.
pub fn host_path(path: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(path))
}
