//! The pool engine's own views (geometry, log, block maps, pending versions, last recovery),
//! reached by downcasting the store. Engine-neutral fallbacks where the store is another one.

use crate::InspectWhat;
use atomfs::Fs;
use serde_json::{json, Value};
use store::Store;

type MappedPool = pool::PoolStore<pmem::MappedRegion>;

fn as_pool(store: &dyn Store) -> Option<&MappedPool> {
    store.as_any().downcast_ref::<MappedPool>()
}

fn to_json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// Pool-specific details for `info`, when the store is a pool.
pub fn pool_details(store: &dyn Store) -> Option<Value> {
    let p = as_pool(store)?;
    let region = p.region();
    Some(json!({
        "superblock": to_json(p.superblock()),
        "log": to_json(p.log_occupancy()),
        "durability": format!("{:?}", region.durability()),
        "flush_instruction": format!("{:?}", region.flush_instruction()),
    }))
}

/// What `recover` reports: the report of the recovery run when the pool was opened.
pub fn pool_recovery(store: &dyn Store) -> Option<Value> {
    as_pool(store).map(|p| to_json(p.last_recovery()))
}

/// The `inspect` views.
pub fn pool_inspect(fs: &Fs, what: Option<&InspectWhat>) -> Result<Value, crate::Failure> {
    let store = &**fs.store();
    let Some(p) = as_pool(store) else {
        return match what {
            None => crate::engine::describe(store).map_err(Into::into),
            Some(_) => Err(crate::Failure::new(format!(
                "inspect: not available for engine {}",
                store.engine_name()
            ))),
        };
    };
    Ok(match what {
        None => json!({
            "superblock": to_json(p.superblock()),
            "log": to_json(p.log_occupancy()),
            "counters": Value::Object(store.stats().into_iter().map(|(k, v)| (k, json!(v))).collect()),
        }),
        Some(InspectWhat::Log) => json!({
            "occupancy": to_json(p.log_occupancy()),
            "entries": to_json(p.log_entries()),
        }),
        Some(InspectWhat::File { path }) => {
            let meta = fs.metadata(path)?;
            json!({
                "path": path,
                "ino": meta.ino,
                "size": meta.size,
                "nlink": meta.nlink,
                "block_map": to_json(p.block_map(meta.ino)?),
                "pending": to_json(p.pending_lists(Some(meta.ino))?),
            })
        }
        Some(InspectWhat::Pending) => json!({ "pending": to_json(p.pending_lists(None)?) }),
    })
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
