//! Transaction ids of the C calls (`tx_begin`, `tx_add`, `tx_commit`, `tx_abort`).
//!
//! Ids are process-wide, start at 1 and are never reused, so a finished or unknown id is
//! always recognised (`EINVAL`); 0 is never a transaction. A transaction begun with no file
//! takes its pool from the first file `tx_add` binds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use store::TxId;

use crate::{same_pool_handles, OpenFile, PResult, Pool};

/// Most files one `tx_begin` call binds.
pub const TX_FILES_MAX: usize = 4096;

#[derive(Default)]
struct Running {
    /// The pool and store transaction, once the first file is bound.
    bound: Option<(Arc<Pool>, TxId)>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn table() -> &'static Mutex<HashMap<u64, Running>> {
    static TABLE: OnceLock<Mutex<HashMap<u64, Running>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<u64, Running>> {
    table().lock().unwrap_or_else(|p| p.into_inner())
}

/// In a child forked from a process with running transactions: forget them (they are the
/// parent's; aborting them here would undo the parent's work). False when the table was
/// locked at the fork (a thread of the parent was inside it): it cannot be used then.
pub fn forget_inherited() -> bool {
    match table().try_lock() {
        Ok(mut table) => {
            std::mem::forget(std::mem::take(&mut *table));
            true
        }
        Err(_) => false,
    }
}

/// Begin a transaction over `files` (possibly none yet). `EXDEV` when they belong to
/// different pools, `EBUSY` when one is bound to a running transaction already.
pub fn tx_begin(files: &[Arc<OpenFile>]) -> PResult<u64> {
    if files.len() > TX_FILES_MAX {
        return Err(libc::EINVAL);
    }
    let bound = if files.is_empty() {
        None
    } else {
        let (pool, fhs) = same_pool_handles(files)?;
        let tx = pool.store.tx_begin(&fhs).map_err(|e| e.errno())?;
        Some((pool, tx))
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock().insert(id, Running { bound });
    Ok(id)
}

/// Bind one more file to a running transaction.
pub fn tx_add(id: u64, file: &OpenFile) -> PResult<()> {
    let fh = file.fh()?;
    let mut table = lock();
    let running = table.get_mut(&id).ok_or(libc::EINVAL)?;
    match &running.bound {
        Some((pool, tx)) => {
            if file.pool.id != pool.id {
                return Err(libc::EXDEV);
            }
            pool.store.tx_add(*tx, fh).map_err(|e| e.errno())
        }
        None => {
            let tx = file.pool.store.tx_begin(&[fh]).map_err(|e| e.errno())?;
            running.bound = Some((file.pool.clone(), tx));
            Ok(())
        }
    }
}

/// Commit: every change of the transaction is durable when this returns 0. If the store
/// cannot commit, the transaction is aborted and its id is finished all the same.
pub fn tx_commit(id: u64) -> PResult<()> {
    let Some((pool, tx)) = take(id)?.bound else {
        return Ok(());
    };
    pool.store.tx_commit(tx).map_err(|e| {
        let _ = pool.store.tx_abort(tx);
        e.errno()
    })
}

/// Abort: none of the transaction's changes remain.
pub fn tx_abort(id: u64) -> PResult<()> {
    let Some((pool, tx)) = take(id)?.bound else {
        return Ok(());
    };
    pool.store.tx_abort(tx).map_err(|e| e.errno())
}

fn take(id: u64) -> PResult<Running> {
    lock().remove(&id).ok_or(libc::EINVAL)
}
