//! `fsck --repair`: recover a pool, then repair what can be repaired so that it opens and
//! passes fsck, reporting every change.
//!
//! Steps, each on the region it is given (the CLI gives a private copy and replaces the
//! pool file with the result only at the end, so a crash during repair leaves the pool as
//! it was):
//! 1. the superblock must validate (nothing else says where anything is: refused if not);
//! 2. recovery runs as at open (undo of uncommitted transactions, torn entries cleared);
//!    where a damaged structure stops it, what it did so far stays done;
//! 3. the inode pass (repair_inodes.rs): damaged inodes quarantined, sizes and block counts
//!    fixed;
//! 4. the directory pass (repair_dirs.rs): bad entries removed, link counts and parent
//!    fields set, lost inodes found; redo entries that name what changed are dropped;
//! 5. the pool is opened; salvaged file bytes are written to `/lost+found/#INO`, and lost
//!    inodes are linked there under the same kind of name (repair_lost.rs);
//! 6. the pool is opened once more and checked: the problems left, if any, are reported.
//!
//! Allocators live in DRAM and are rebuilt at every open, so leaked or doubly free blocks,
//! inodes and log slots need no repair of their own: the open in step 5 rebuilds them from
//! the repaired metadata.

use crate::api::pool_store::PoolStore;
use crate::config::PoolConfig;
use crate::recovery::recover::{bare_core, recover, RecoveryReport};
use pmem::Region;
use std::sync::Arc;
use store::{Result, Store};

/// A damaged inode taken out of the tree.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Quarantined {
    pub ino: u64,
    /// Why it could not be kept.
    pub reason: String,
    /// Bytes of file data copied out of it (0 for a directory: its entries' targets are
    /// linked into `/lost+found` instead).
    pub bytes_salvaged: u64,
    /// Pointers of its tree that could not be followed.
    pub blocks_unreadable: u64,
    /// Where its salvaged bytes are now (empty when nothing was written).
    pub path: String,
}

/// Everything `repair` did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RepairReport {
    /// What recovery undid, kept and dropped.
    pub recovery: RecoveryReport,
    /// Recovery stopped at this damage (repair then went on).
    pub recovery_stopped: Option<String>,
    /// Every change, in words, in the order made.
    pub changes: Vec<String>,
    pub quarantined: Vec<Quarantined>,
    /// Paths under `/lost+found` of the inodes linked there.
    pub lost_found: Vec<String>,
    /// Problems fsck still finds after the repair (empty: the pool is clean).
    pub remaining: Vec<String>,
}

impl RepairReport {
    pub(crate) fn change(&mut self, what: String) {
        self.changes.push(what);
    }

    /// Did the repair leave a pool that passes fsck?
    pub fn is_clean(&self) -> bool {
        self.remaining.is_empty()
    }
}

/// Repair the pool on `region` (module comment). Errors: the superblock does not validate,
/// or the repaired pool still cannot be opened (the error says why).
pub fn repair<R: Region>(region: Arc<R>, cfg: &PoolConfig) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    {
        let mut core = bare_core(region.clone(), cfg)?;
        crate::recovery::repair_inodes::reset_root_kind(&core, &mut report);
        if let Err(e) = recover(&mut core, cfg, &mut report.recovery) {
            report.recovery_stopped = Some(e.to_string());
        }
    }
    let (pass, dirs) = {
        let core = bare_core(region.clone(), cfg)?;
        let pass = crate::recovery::repair_inodes::inode_pass(&core, &mut report);
        let dirs = crate::recovery::repair_dirs::dir_pass(&core, &pass, &mut report);
        crate::recovery::repair_dirs::data_log_pass(&core, &pass, &mut report);
        // persist: every repair of the metadata is in place before the pool is opened.
        core.region.persist(0, core.region.len());
        (pass, dirs)
    };
    let store = PoolStore::open(region.clone(), cfg)?;
    let orphans = store.last_recovery().orphans_freed;
    if orphans > 0 {
        report.change(format!("{orphans} orphan inode(s) (no link left) freed"));
    }
    let placed =
        crate::recovery::repair_lost::place(&store, &pass.salvaged, &dirs.lost, &mut report);
    store.unmount()?;
    drop(store);
    if let Some(placed) = placed {
        let core = bare_core(region.clone(), cfg)?;
        crate::recovery::repair_lost::link(&core, &placed, &mut report);
        core.region.persist(0, core.region.len());
    }
    let store = PoolStore::open(region, cfg)?;
    let fsck = store.fsck()?;
    store.unmount()?;
    report.remaining = fsck
        .problems
        .iter()
        .map(|p| format!("{} (at {})", p.what, p.location))
        .collect();
    Ok(report)
}
