//! Multi-file transactions.

use crate::fs::{path_bytes, Shared};
use crate::{File, Metadata, Result};
use std::path::Path;
use std::sync::Arc;
use store::TxId;

/// A running transaction, from [`Fs::begin`](crate::Fs::begin). Every write and `set_len`
/// through its files, and every namespace change made through it, becomes durable at
/// [`commit`](Tx::commit) all together, or is undone by [`abort`](Tx::abort). Dropping a `Tx`
/// that was neither committed nor aborted aborts it.
///
/// Isolation is the application's: other handles see the transaction's writes as they happen
/// (atomicity and durability only, as in FCFS).
#[derive(Debug)]
#[must_use = "a transaction is aborted when dropped; call commit()"]
pub struct Tx {
    shared: Arc<Shared>,
    id: TxId,
    done: bool,
}

impl Tx {
    pub(crate) fn new(shared: Arc<Shared>, id: TxId) -> Self {
        Tx {
            shared,
            id,
            done: false,
        }
    }

    /// The engine's id of this transaction.
    pub fn id(&self) -> TxId {
        self.id
    }

    /// Bind one more open file to the transaction.
    pub fn add(&self, file: &File) -> Result<()> {
        self.shared.store.tx_add(self.id, file.fh)
    }

    /// Make every change of the transaction durable, atomically.
    pub fn commit(mut self) -> Result<()> {
        self.done = true;
        self.shared.store.tx_commit(self.id)
    }

    /// Undo every change of the transaction.
    pub fn abort(mut self) -> Result<()> {
        self.done = true;
        self.shared.store.tx_abort(self.id)
    }

    /// Create a directory as part of the transaction.
    pub fn create_dir(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let store = &*self.shared.store;
        let (parent, name) = store::resolve_parent(store, path_bytes(path.as_ref()))?;
        store.mkdir(parent, &name, 0o755, Some(self.id))
    }

    /// Rename as part of the transaction.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
        let store = &*self.shared.store;
        let (parent, name) = store::resolve_parent(store, path_bytes(from.as_ref()))?;
        let (new_parent, new_name) = store::resolve_parent(store, path_bytes(to.as_ref()))?;
        store.rename(parent, &name, new_parent, &new_name, Some(self.id))
    }

    /// Remove a file as part of the transaction.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let store = &*self.shared.store;
        let (parent, name) = store::resolve_parent(store, path_bytes(path.as_ref()))?;
        store.unlink(parent, &name, Some(self.id))
    }

    /// Replace a whole file (create or truncate, then write) as part of the transaction.
    pub fn write(&self, path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
        store::path::write_file(
            &*self.shared.store,
            path_bytes(path.as_ref()),
            data,
            Some(self.id),
        )
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if !self.done {
            // Nowhere to report a failure from a destructor; an engine that cannot abort has
            // lost the store, and the next call says so.
            let _ = self.shared.store.tx_abort(self.id);
        }
    }
}
