//! `NativeTx`: one running transaction.

use crate::errors::IntoPy;
use crate::file::NativeFile;
use crate::shared::Shared;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use store::{Error, Result, TxId};

/// One transaction (see the Python class `atomfs.Transaction`). Aborted when dropped unless it
/// was committed or aborted.
#[pyclass(module = "atomfs._native", frozen)]
pub struct NativeTx {
    shared: Arc<Shared>,
    id: TxId,
    done: AtomicBool,
}

impl NativeTx {
    pub fn new(shared: Arc<Shared>, id: TxId) -> Self {
        NativeTx {
            shared,
            id,
            done: AtomicBool::new(false),
        }
    }

    /// The id, for a call on the store `shared`, while the transaction runs.
    pub fn id_for(&self, shared: &Arc<Shared>) -> Result<TxId> {
        if !shared.same(&self.shared) {
            return Err(Error::CrossStore("a transaction of another store".into()));
        }
        if self.done.load(Ordering::Acquire) {
            return Err(Error::NoSuchTransaction(self.id.0));
        }
        Ok(self.id)
    }

    /// End the transaction with `end` (commit or abort), once.
    fn end(
        &self,
        py: Python<'_>,
        end: impl FnOnce(&dyn store::Store, TxId) -> Result<()> + Send,
    ) -> PyResult<()> {
        py.detach(|| {
            let store = self.shared.store()?;
            if self.done.swap(true, Ordering::AcqRel) {
                return Err(Error::NoSuchTransaction(self.id.0));
            }
            end(store, self.id)
        })
        .py(py)
    }
}

#[pymethods]
impl NativeTx {
    #[getter]
    fn id(&self) -> u64 {
        self.id.0
    }

    /// Whether the transaction was committed or aborted.
    #[getter]
    fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Bind one more open file to the transaction.
    fn add(&self, py: Python<'_>, file: Bound<'_, NativeFile>) -> PyResult<()> {
        let file = file.get();
        py.detach(|| {
            let fh = file.handle_for(&self.shared)?;
            let id = self.id_for(&self.shared)?;
            self.shared.store()?.tx_add(id, fh)
        })
        .py(py)
    }

    /// Make every change of the transaction durable, atomically.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.end(py, |s, id| s.tx_commit(id))
    }

    /// Undo every change of the transaction.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.end(py, |s, id| s.tx_abort(id))
    }
}

impl Drop for NativeTx {
    fn drop(&mut self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            if let Ok(store) = self.shared.store() {
                // Nowhere to report from a destructor; a store that cannot abort has failed
                // and its next call says so.
                let _ = store.tx_abort(self.id);
            }
        }
    }
}
