//! The cache engine's own commands: `recover --prefer pm|home` (home files changed behind
//! the cache while it held unwritten chunks of them) and `flush` (every dirty chunk home).

use crate::engine::open_failure;
use crate::{render, CmdResult, Failure};
use atomfs::Fs;
use cache::{HomeConflictPolicy, HostCacheStore, Prefer};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use store::Store;

/// Which copy wins in `atomfs recover --prefer`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PreferArg {
    /// The cache's copy: its chunks are written over the home file.
    Pm,
    /// The home file as it is: the cache's chunks of it are dropped.
    Home,
}

impl PreferArg {
    fn prefer(self) -> Prefer {
        match self {
            PreferArg::Pm => Prefer::Pm,
            PreferArg::Home => Prefer::Home,
        }
    }
}

fn count(store: &dyn Store, name: &str) -> u64 {
    store
        .stats()
        .into_iter()
        .find(|(k, _)| k == name)
        .map_or(0, |(_, v)| v)
}

/// `atomfs recover POOL --prefer pm|home`: open a cache store resolving every home file
/// changed behind it that way, then check it.
pub fn recover_prefer(pool: &Path, json: bool, prefer: PreferArg) -> CmdResult {
    let engine = engines::probe(pool).map_err(|e| open_failure(pool, e))?;
    if engine.name() != "cache" {
        return Err(Failure::new(format!(
            "{}: --prefer chooses between a cache store's PM copy and its home files; this is a store of engine {}",
            pool.display(),
            engine.name()
        )));
    }
    let (_, mut config) = engines::CACHE.config(&engines::Options::new())?;
    config.home_conflict = HomeConflictPolicy::Resolve(prefer.prefer());
    let opened = engines::open_with(pool, &engines::CACHE, |p| {
        Ok(Arc::new(HostCacheStore::open_recorded(p, &config)?) as Arc<dyn Store>)
    })
    .map_err(|e| open_failure(pool, e))?;
    let fs = Fs::from_opened(opened);
    if fs
        .store()
        .as_any()
        .downcast_ref::<HostCacheStore>()
        .is_none()
    {
        return Err(Failure::new(format!(
            "{}: the store is open in another process (mounted or served); stop it first",
            pool.display()
        )));
    }
    let resolved = count(&**fs.store(), "home_conflicts_resolved");
    let report = fs.fsck()?;
    fs.unmount()?;
    let value = json!({
        "pool": pool.display().to_string(),
        "prefer": format!("{prefer:?}").to_lowercase(),
        "home_conflicts_resolved": resolved,
        "fsck_clean": report.is_clean(),
    });
    render::print(&value, json);
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `atomfs flush POOL`: every dirty chunk of a cache store written home, the home files
/// synced — in this process, or through the process serving the store (a mount, `atomfs
/// serve`).
pub fn flush(pool: &Path, json: bool) -> CmdResult {
    let fs = crate::engine::open(pool)?;
    let store = fs.store();
    if store.engine_name() != "cache" {
        return Err(Failure::new(format!(
            "{}: flush writes a cache store's chunks home; this is a store of engine {}",
            pool.display(),
            store.engine_name()
        )));
    }
    let value = match store.as_any().downcast_ref::<HostCacheStore>() {
        Some(s) => json!({
            "pool": pool.display().to_string(),
            "chunks_flushed": s.flush_home()?,
        }),
        None => {
            // A client of the serving process: a syncv of no files is the cache engine's
            // sync of the whole store (every dirty chunk home, synced).
            store.syncv(&[])?;
            json!({
                "pool": pool.display().to_string(),
                "through": "the serving process (syncv of no files: every dirty chunk home, synced)",
            })
        }
    };
    fs.unmount()?;
    render::print(&value, json);
    Ok(ExitCode::SUCCESS)
}
