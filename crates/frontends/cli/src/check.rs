//! The commands that look at a pool without changing it — `fsck` (read-only), `info`,
//! `inspect`, `salvage` — and `fsck --repair`.
//!
//! The read-only ones work on a private image: the pool file is read into DRAM and recovery
//! runs there (what it would undo, keep and drop is reported), so nothing is ever written
//! to the file. `fsck --repair` repairs a private image too and then replaces the pool
//! file with it (written beside it, synced, renamed over it): a crash during the repair
//! leaves the pool as it was.

use crate::engine::{describe, open_failure};
use crate::{render, CmdResult, Failure, InspectWhat};
use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use store::{Error, Store};

type Private = PoolStore<DramRegion>;

fn config() -> PoolConfig {
    PoolConfig::default()
}

fn to_json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

fn load(pool: &Path) -> Result<DramRegion, Failure> {
    pool::load_image(pool).map_err(|e| open_failure(pool, e))
}

/// Open a private image (recovery in DRAM), with a person-readable error.
fn open_private(pool: &Path) -> Result<Private, Failure> {
    PoolStore::open(Arc::new(load(pool)?), &config()).map_err(|e| open_failure(pool, e))
}

/// Is this an error of a damaged pool (a report, not a failure of the command)?
fn damaged(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. } | Error::BadMagic(_) | Error::UnsupportedVersion { .. }
    )
}

/// The engine of the store at `pool`, when it is not the pool engine: the read-only views
/// below read the pool engine's format; other engines' stores are opened through the
/// registry instead (their recovery runs, as at any open).
fn other_engine(pool: &Path) -> Option<&'static dyn engines::Engine> {
    engines::probe(pool).ok().filter(|e| e.name() != "pool")
}

/// fsck of a store of another engine: opened through the registry (recovery runs).
fn fsck_opened(pool: &Path) -> Result<(Value, bool), Failure> {
    let fs = crate::engine::open(pool)?;
    let report = fs.fsck()?;
    fs.unmount()?;
    let problems: Vec<Value> = report
        .problems
        .iter()
        .map(|p| json!({"what": p.what, "location": p.location}))
        .collect();
    let value = json!({
        "pool": pool.display().to_string(),
        "clean": report.is_clean(),
        "read_only": false,
        "problems": problems,
        "checked": Value::Object(report.checked.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
    });
    Ok((value, report.is_clean()))
}

fn pool_engine_only(pool: &Path, what: &str, engine: &dyn engines::Engine) -> Failure {
    Failure::new(format!(
        "{}: {what} reads the pool engine's format; this is a store of engine {}",
        pool.display(),
        engine.name()
    ))
}

/// The read-only fsck report of `pool` as JSON, and whether it is clean.
pub fn fsck_report(pool: &Path) -> Result<(Value, bool), Failure> {
    if other_engine(pool).is_some() {
        return fsck_opened(pool);
    }
    let shown = pool.display().to_string();
    let s = match PoolStore::open(Arc::new(load(pool)?), &config()) {
        Ok(s) => s,
        Err(e) if damaged(&e) => {
            let value = json!({
                "pool": shown,
                "clean": false,
                "read_only": true,
                "problems": [{"what": e.to_string(), "location": "pool header, log or metadata (the pool cannot be opened; try --repair)"}],
                "checked": {},
            });
            return Ok((value, false));
        }
        Err(e) => return Err(open_failure(pool, e)),
    };
    let report = s.fsck()?;
    let problems: Vec<Value> = report
        .problems
        .iter()
        .map(|p| json!({"what": p.what, "location": p.location}))
        .collect();
    let value = json!({
        "pool": shown,
        "clean": report.is_clean(),
        "read_only": true,
        "recovery_simulated": to_json(s.last_recovery()),
        "problems": problems,
        "checked": Value::Object(report.checked.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
    });
    Ok((value, report.is_clean()))
}

/// One line saying what recovery would do (or did).
fn recovery_line(r: &Value, verb: &str) -> String {
    let get = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    format!(
        "recovery {verb}: undo {} uncommitted tx(s) ({} undo entries, {} saved lines), keep {} redo entries of {} committed tx(s), drop {} uncommitted data entries, clear {} torn or garbage log entries, free {} orphan inode(s)\n",
        get("undone_txs"),
        get("undo_entries_applied"),
        get("line_records_applied"),
        get("redo_entries_kept"),
        get("committed_txs"),
        get("data_entries_dropped"),
        get("torn_entries"),
        get("orphans_freed"),
    )
}

/// Text form of a fsck report.
pub fn fsck_text(value: &Value) -> String {
    let mut out = String::new();
    if let Some(r) = value.get("recovery_simulated") {
        out.push_str(&recovery_line(r, "would (simulated, nothing written)"));
    }
    out.push_str(&crate::engine::fsck_text(value));
    out
}

fn exit(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `atomfs fsck POOL [--repair]`.
pub fn fsck(pool: &Path, json: bool, repair: bool) -> CmdResult {
    if repair {
        return fsck_repair(pool, json);
    }
    let (value, clean) = fsck_report(pool)?;
    if json {
        render::print(&value, true);
    } else {
        print!("{}", fsck_text(&value));
    }
    Ok(exit(clean))
}

/// `atomfs fsck --repair POOL`: repair a private image, then replace the pool file.
fn fsck_repair(pool: &Path, json: bool) -> CmdResult {
    if let Some(engine) = other_engine(pool) {
        return Err(pool_engine_only(pool, "fsck --repair", engine));
    }
    // The store's lock, held until the repaired image has replaced the file: a store in use
    // (mounted, or open in any program) is refused.
    let _lock = engines::StoreLock::acquire(pool)?;
    let region = Arc::new(load(pool)?);
    let before = pool::region_bytes(&*region);
    let report = pool::repair(region.clone(), &config()).map_err(|e| {
        Failure::new(format!(
            "{}: cannot be repaired: {e}\n  copy out what is readable with: atomfs salvage {} DIR",
            pool.display(),
            pool.display()
        ))
    })?;
    let after = pool::region_bytes(&*region);
    let written = after != before;
    if written {
        replace_file(pool, &after)?;
    }
    let mut value = to_json(&report);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("pool".into(), json!(pool.display().to_string()));
        obj.insert("clean".into(), json!(report.is_clean()));
        obj.insert("pool_written".into(), json!(written));
    }
    if json {
        render::print(&value, true);
    } else {
        print!("{}", repair_text(&value, &report));
    }
    Ok(exit(report.is_clean()))
}

fn repair_text(value: &Value, report: &pool::RepairReport) -> String {
    let pool = value["pool"].as_str().unwrap_or("pool");
    let mut out = recovery_line(&value["recovery"], "did");
    if let Some(stopped) = &report.recovery_stopped {
        out.push_str(&format!("recovery stopped at damage: {stopped}\n"));
    }
    for change in &report.changes {
        out.push_str(&format!("  repaired: {change}\n"));
    }
    if report.is_clean() {
        let n = report.changes.len();
        out.push_str(&format!("{pool}: clean after repair ({n} change(s))\n"));
    } else {
        out.push_str(&format!(
            "{pool}: {} problem(s) left after repair\n",
            report.remaining.len()
        ));
        for p in &report.remaining {
            out.push_str(&format!("  - {p}\n"));
        }
    }
    out
}

/// Write `bytes` beside `pool`, sync, rename over it, sync the directory.
fn replace_file(pool: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let dir = pool
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = pool.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{}.repair", name.unwrap_or_default()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, pool)?;
        // persist: the rename is durable once the directory is synced.
        std::fs::File::open(dir)?.sync_all()
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::new(format!(
            "{}: cannot write the repaired pool: {e}",
            pool.display()
        ))
    })
}

/// `atomfs info POOL`: never writes the pool.
pub fn info(pool: &Path, json: bool) -> CmdResult {
    if other_engine(pool).is_some() {
        let fs = crate::engine::open(pool)?;
        let mut value = describe(&**fs.store())?;
        fs.unmount()?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("pool".into(), json!(pool.display().to_string()));
        }
        render::print(&value, json);
        return Ok(ExitCode::SUCCESS);
    }
    let s = open_private(pool)?;
    let mut value = describe(&s)?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("pool".into(), json!(pool.display().to_string()));
        obj.insert("file_size".into(), json!(std::fs::metadata(pool)?.len()));
        obj.insert(
            "pool_engine".into(),
            json!({
                "superblock": to_json(s.superblock()),
                "log": to_json(s.log_occupancy()),
                "recovery_pending": to_json(s.last_recovery()),
            }),
        );
    }
    render::print(&value, json);
    Ok(ExitCode::SUCCESS)
}

/// `atomfs inspect POOL [WHAT]`: views of a private image after simulated recovery.
pub fn inspect(pool: &Path, what: Option<InspectWhat>, json: bool) -> CmdResult {
    if let Some(engine) = other_engine(pool) {
        return Err(pool_engine_only(pool, "inspect", engine));
    }
    let s = open_private(pool)?;
    let counters =
        |s: &Private| Value::Object(s.stats().into_iter().map(|(k, v)| (k, json!(v))).collect());
    let value = match what {
        None => json!({
            "superblock": to_json(s.superblock()),
            "log": to_json(s.log_occupancy()),
            "recovery_simulated": to_json(s.last_recovery()),
            "counters": counters(&s),
        }),
        Some(InspectWhat::Log) => json!({
            "occupancy": to_json(s.log_occupancy()),
            "recovery_simulated": to_json(s.last_recovery()),
            "entries": to_json(s.log_entries()),
        }),
        Some(InspectWhat::File { path }) => {
            let meta = store::resolve(&s, &path)?;
            json!({
                "path": path,
                "ino": meta.ino,
                "size": meta.size,
                "nlink": meta.nlink,
                "block_map": to_json(s.block_map(meta.ino)?),
                "pending": to_json(s.pending_lists(Some(meta.ino))?),
            })
        }
        Some(InspectWhat::Pending) => json!({ "pending": to_json(s.pending_lists(None)?) }),
    };
    render::print(&value, json);
    Ok(ExitCode::SUCCESS)
}

/// Salvaged files written under a host directory (holes left sparse).
struct DirSink<'a> {
    root: &'a Path,
}

impl pool::SalvageSink for DirSink<'_> {
    fn dir(&mut self, path: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(self.root.join(path))
    }

    fn file(&mut self, path: &str, _size: u64, data: &mut dyn Read) -> std::io::Result<u64> {
        let mut f = std::fs::File::create(self.root.join(path))?;
        let mut buf = vec![0u8; 1 << 16];
        let mut copied = 0u64;
        loop {
            let n = data.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if chunk.iter().all(|&b| b == 0) {
                f.seek(SeekFrom::Current(n as i64))?;
            } else {
                f.write_all(chunk)?;
            }
            copied += n as u64;
        }
        f.set_len(copied)?;
        Ok(copied)
    }
}

/// `atomfs salvage POOL DIR`: copy every readable file out; the pool is never written.
pub fn salvage(pool: &Path, out: &Path, json: bool) -> CmdResult {
    if let Some(engine) = other_engine(pool) {
        return Err(pool_engine_only(pool, "salvage", engine));
    }
    if out.exists() && std::fs::read_dir(out)?.next().is_some() {
        return Err(Failure::new(format!(
            "{} is not empty (salvage writes into an empty or new directory)",
            out.display()
        )));
    }
    std::fs::create_dir_all(out)?;
    let region = Arc::new(load(pool)?);
    let mut sink = DirSink { root: out };
    let report = pool::salvage(region, &config(), &mut sink).map_err(|e| {
        Failure::new(format!(
            "{}: nothing could be salvaged: {e}",
            pool.display()
        ))
    })?;
    let mut value = to_json(&report);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("pool".into(), json!(pool.display().to_string()));
        obj.insert("into".into(), json!(out.display().to_string()));
    }
    if json {
        render::print(&value, true);
    } else {
        println!(
            "salvaged {} file(s), {} directorie(s), {} byte(s) from {} into {}",
            report.files,
            report.directories,
            report.bytes,
            pool.display(),
            out.display()
        );
        for (path, why) in &report.unreadable {
            println!("  not read: {path}: {why}");
        }
    }
    Ok(exit(report.unreadable.is_empty()))
}
