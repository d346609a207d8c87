//! Pool-level commands: mkfs, recover (info, fsck, inspect: check.rs); and opening a pool with errors a
//! person can act on.

/// The read-only fsck report (check.rs), for the commands that show it on a damaged pool.
pub use crate::check::fsck_report;
use crate::render;
use crate::size::{human, parse_size};
use crate::{CmdResult, Failure};
use atomfs::{Config, Fs};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use store::{Error, Store};

/// Smallest pool `mkfs` accepts.
pub const POOL_SIZE_MIN: u64 = 8 << 20;

/// The configuration every command opens pools with.
pub fn config() -> Config {
    Config::Pool {
        size: 0,
        config: atomfs::pool::PoolConfig::default(),
    }
}

/// Why a pool could not be opened, in words that say what to do.
pub fn open_failure(pool: &Path, e: Error) -> Failure {
    let shown = pool.display();
    let message = match &e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!("{shown}: no such pool file (create one with: atomfs mkfs {shown} --size 512M)")
        }
        Error::BadMagic(_) => format!("{shown} is not an atomfs pool ({e})"),
        Error::UnsupportedVersion { .. } => format!("{shown}: {e}"),
        Error::Corrupt { .. } => {
            format!("{shown} is corrupted: {e}\n  run `atomfs fsck {shown}` for a full report")
        }
        Error::Busy(_) => e.to_string(),
        _ => format!("{shown}: {e}"),
    };
    Failure::new(message)
}

/// Open a pool (running recovery), with a person-readable error.
pub fn open(pool: &Path) -> Result<Fs, Failure> {
    Fs::open(pool, config()).map_err(|e| open_failure(pool, e))
}

pub fn mkfs(pool: &Path, size: &str, inodes: Option<u64>, force: bool) -> CmdResult {
    let bytes = parse_size(size).map_err(Failure::new)?;
    if bytes < POOL_SIZE_MIN {
        return Err(Failure::new(format!(
            "pool size {} is too small: the minimum is {}",
            human(bytes),
            human(POOL_SIZE_MIN)
        )));
    }
    if let Some(parent) = pool.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(Failure::new(format!(
                "directory {} does not exist",
                parent.display()
            )));
        }
        let avail = free_bytes(parent).unwrap_or(u64::MAX);
        if bytes > avail {
            return Err(Failure::new(format!(
                "pool size {} exceeds the {} free on {}",
                human(bytes),
                human(avail),
                parent.display()
            )));
        }
    }
    if pool.exists() {
        if !force {
            return Err(Failure::new(format!(
                "{} exists (use --force to replace it)",
                pool.display()
            )));
        }
        std::fs::remove_file(pool)?;
    }
    let mut config = atomfs::pool_config_for(bytes);
    if let Some(n) = inodes {
        if n < 2 {
            return Err(Failure::new(
                "--inodes must be at least 2 (the root and one file)",
            ));
        }
        config.inode_count = n;
    }
    let started = Instant::now();
    let fs = Fs::create(
        pool,
        Config::Pool {
            size: bytes,
            config,
        },
    )
    .map_err(|e| {
        let _ = std::fs::remove_file(pool);
        Failure::new(format!("cannot create {}: {e}", pool.display()))
    })?;
    let statfs = fs.statfs()?;
    fs.unmount()?;
    println!(
        "created {}: {} ({} blocks of {} bytes free, {} inodes) in {:.0?}",
        pool.display(),
        human(bytes),
        statfs.blocks_free,
        statfs.block_size,
        statfs.inodes_total,
        started.elapsed()
    );
    Ok(ExitCode::SUCCESS)
}

fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct we pass; the path is a valid C string for the
    // duration of the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

fn counters(list: Vec<(String, u64)>) -> Value {
    Value::Object(list.into_iter().map(|(k, v)| (k, json!(v))).collect())
}

/// Engine-neutral description of an open store.
pub fn describe(store: &dyn Store) -> Result<Value, Error> {
    let s = store.statfs()?;
    Ok(json!({
        "engine": store.engine_name(),
        "statfs": {
            "block_size": s.block_size,
            "blocks_total": s.blocks_total,
            "blocks_free": s.blocks_free,
            "bytes_total": s.blocks_total * s.block_size,
            "bytes_free": s.blocks_free * s.block_size,
            "inodes_total": s.inodes_total,
            "inodes_free": s.inodes_free,
            "name_max": s.name_max,
        },
        "counters": counters(store.stats()),
    }))
}

/// Text form of a fsck report.
pub fn fsck_text(value: &Value) -> String {
    let mut out = String::new();
    let clean = value["clean"].as_bool().unwrap_or(false);
    let pool = value["pool"].as_str().unwrap_or("pool");
    if let Some(checked) = value["checked"].as_object() {
        let parts: Vec<String> = checked.iter().map(|(k, v)| format!("{v} {k}")).collect();
        if !parts.is_empty() {
            out.push_str(&format!("checked {}\n", parts.join(", ")));
        }
    }
    if clean {
        out.push_str(&format!("{pool}: clean\n"));
    } else {
        let problems = value["problems"].as_array().cloned().unwrap_or_default();
        out.push_str(&format!("{pool}: {} problem(s)\n", problems.len()));
        for p in problems {
            out.push_str(&format!(
                "  - {} (at {})\n",
                p["what"].as_str().unwrap_or("?"),
                p["location"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}

pub fn recover(pool: &Path, json: bool) -> CmdResult {
    let started = Instant::now();
    let fs = open(pool)?;
    let opened = started.elapsed();
    let mut value = json!({
        "pool": pool.display().to_string(),
        "open_micros": opened.as_micros() as u64,
    });
    if let (Some(obj), Some(report)) = (
        value.as_object_mut(),
        crate::poolview::pool_recovery(&**fs.store()),
    ) {
        obj.insert("recovery".into(), report);
    }
    let report = fs.fsck()?;
    fs.unmount()?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("fsck_clean".into(), json!(report.is_clean()));
    }
    render::print(&value, json);
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
