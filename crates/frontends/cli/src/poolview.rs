//! The pool engine's own views (geometry, log, block maps, pending versions, last recovery),
//! reached by downcasting the store. Engine-neutral fallbacks where the store is another one.

use crate::InspectWhat;
use atomfs::Fs;
use serde_json::{json, Value};
use store::Store;

/// Pool-specific details for `info`, when the store is a pool.
pub fn pool_details(_store: &dyn Store) -> Option<Value> {
    None
}

/// What `recover` reports: the report of the recovery run when the pool was opened.
pub fn pool_recovery(_store: &dyn Store) -> Option<Value> {
    None
}

/// The `inspect` views.
pub fn pool_inspect(fs: &Fs, what: Option<&InspectWhat>) -> Result<Value, crate::Failure> {
    let store = &**fs.store();
    match what {
        None => crate::engine::describe(store).map_err(Into::into),
        Some(InspectWhat::File { path }) => {
            let meta = fs.metadata(path)?;
            Ok(
                json!({"path": path, "ino": meta.ino, "size": meta.size, "allocated": meta.allocated, "nlink": meta.nlink}),
            )
        }
        Some(other) => Err(crate::Failure::new(format!(
            "inspect {other:?}: not available for engine {}",
            store.engine_name()
        ))),
    }
}

/// Bytes written to (emulated) NVMM so far, when the engine counts them.
pub fn nvmm_bytes(store: &dyn Store) -> Option<u64> {
    let stats = store.stats();
    let total: Vec<u64> = stats
        .iter()
        .filter(|(name, _)| {
            name.contains("bytes") && (name.contains("written") || name.contains("stored"))
        })
        .map(|(_, v)| *v)
        .collect();
    (!total.is_empty()).then(|| total.iter().sum())
}

/// One line out of a recovery report.
pub fn recovery_summary(report: &Value) -> String {
    let get = |k: &str| report.get(k).and_then(Value::as_u64);
    match (get("undone_txs"), get("committed_txs")) {
        (Some(u), Some(c)) => format!("({u} tx undone, {c} committed kept)"),
        _ => String::new(),
    }
}
