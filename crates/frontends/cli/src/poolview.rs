//! The pool engine's own views (geometry, log, block maps, pending versions, last recovery),
//! reached by downcasting the store. Engine-neutral fallbacks where the store is another one.

use serde_json::{json, Value};
use store::Store;

type MappedPool = pool::PoolStore<pmem::MappedRegion>;

fn as_pool(store: &dyn Store) -> Option<&MappedPool> {
    store.as_any().downcast_ref::<MappedPool>()
}

fn to_json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// What `recover` reports: the report of the recovery run when the pool was opened.
pub fn pool_recovery(store: &dyn Store) -> Option<Value> {
    as_pool(store).map(|p| to_json(p.last_recovery()))
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
    let get = |k: &str| report.get(k).and_then(Value::as_u64).unwrap_or(0);
    if report.get("committed_txs").is_none() {
        return String::new();
    }
    format!(
        "(redo kept: {} entries of {} committed txs; undone: {} txs, {} data entries dropped, {} undo entries applied)",
        get("redo_entries_kept"),
        get("committed_txs"),
        get("undone_txs"),
        get("data_entries_dropped"),
        get("undo_entries_applied")
    )
}
