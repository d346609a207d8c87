//! Pool-level commands: mkfs, recover (info, fsck, inspect: check.rs); and opening a pool with errors a
//! person can act on.

/// The read-only fsck report (check.rs), for the commands that show it on a damaged pool.
pub use crate::check::fsck_report;
use crate::render;
use crate::size::{human, parse_size};
use crate::{CmdResult, Failure};
use atomfs::{Config, Fs};
use engines::Options;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use store::{Error, Store};

/// Smallest pool `mkfs` accepts.
pub const POOL_SIZE_MIN: u64 = 8 << 20;

/// The configuration every command opens stores with: whichever engine made the file.
pub fn config() -> Config {
    Config::default()
}

/// Why a store could not be opened, in words that say what to do.
pub fn open_failure(pool: &Path, e: Error) -> Failure {
    let shown = pool.display();
    let message = match &e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!("{shown}: no such pool file (create one with: atomfs mkfs {shown} --size 512M)")
        }
        Error::BadMagic(_) => format!("{shown} is not an atomfs store ({e})"),
        Error::UnsupportedVersion { .. } => format!("{shown}: {e}"),
        Error::Corrupt { .. } => {
            format!("{shown} is corrupted: {e}\n  run `atomfs fsck {shown}` for a full report")
        }
        Error::Busy(_) => e.to_string(),
        _ => format!("{shown}: {e}"),
    };
    Failure::new(message)
}

/// Open a store (running recovery), with a person-readable error.
pub fn open(pool: &Path) -> Result<Fs, Failure> {
    Fs::open(pool, config()).map_err(|e| open_failure(pool, e))
}

/// What `atomfs mkfs` was asked for.
pub struct MkfsArgs<'a> {
    pub pool: &'a Path,
    pub engine: &'a str,
    pub size: &'a str,
    pub inodes: Option<u64>,
    /// `--data-checksums`: the registry option `data_checksums=true`.
    pub data_checksums: bool,
    pub home: Option<&'a Path>,
    pub options: &'a [String],
    pub force: bool,
}

/// The registry options `atomfs mkfs`'s flags and `-o key=value` pairs describe.
fn mkfs_options(args: &MkfsArgs<'_>, bytes: u64) -> Result<Options, Failure> {
    let mut options = Options::new();
    for text in args.options {
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            options.push_pair(pair)?;
        }
    }
    options.set("size", bytes.to_string());
    if let Some(n) = args.inodes {
        if n < 2 {
            return Err(Failure::new(
                "--inodes must be at least 2 (the root and one file)",
            ));
        }
        options.set("inodes", n.to_string());
    }
    if let Some(home) = args.home {
        options.set("home", home.display().to_string());
    }
    if args.data_checksums {
        options.set("data_checksums", "true".to_string());
    }
    let engine = engines::by_name(args.engine)?;
    if args.data_checksums && !engine.options().iter().any(|o| o.key == "data_checksums") {
        return Err(Failure::new(format!(
            "--data-checksums: engine {} keeps no data checksums",
            engine.name()
        )));
    }
    if args.home.is_some() && !engine.options().iter().any(|o| o.key == "home") {
        return Err(Failure::new(format!(
            "--home: engine {} keeps its files in the pool file and takes no home directory",
            engine.name()
        )));
    }
    if args.inodes.is_some() && !engine.options().iter().any(|o| o.key == "inodes") {
        return Err(Failure::new(format!(
            "--inodes: engine {} takes no inode count",
            engine.name()
        )));
    }
    options.validate(engine.name(), engine.options())?;
    Ok(options)
}

pub fn mkfs(args: MkfsArgs<'_>) -> CmdResult {
    let pool = args.pool;
    let bytes = parse_size(args.size).map_err(Failure::new)?;
    if bytes < POOL_SIZE_MIN {
        return Err(Failure::new(format!(
            "pool size {} is too small: the minimum is {}",
            human(bytes),
            human(POOL_SIZE_MIN)
        )));
    }
    let options = mkfs_options(&args, bytes)?;
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
    if pool.exists() && !args.force {
        return Err(Failure::new(format!(
            "{} exists (use --force to replace it)",
            pool.display()
        )));
    }
    let started = Instant::now();
    // --force takes the store's lock first: a store in use (mounted, or open in any program)
    // is refused and left as it is.
    let made = if args.force {
        engines::replace(pool, args.engine, &options)
    } else {
        engines::create(pool, args.engine, &options)
    };
    let opened = made.map_err(|e| match e {
        Error::Busy(m) => Failure::new(format!("cannot replace {}: {m}", pool.display())),
        e => Failure::new(format!("cannot create {}: {e}", pool.display())),
    })?;
    let engine = opened.engine.name();
    let fs = Fs::from_opened(opened);
    let statfs = fs.statfs()?;
    fs.unmount()?;
    println!(
        "created {} ({engine}): {} ({} blocks of {} bytes free, {} inodes) in {:.0?}",
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
        "limits": limits(store)?,
    }))
}

/// Every bounded resource of the store: its maximum, its use, the error past it.
fn limits(store: &dyn Store) -> Result<Value, Error> {
    Ok(Value::Object(
        store
            .limits()?
            .into_iter()
            .map(|l| {
                let shown = match l.used {
                    Some(used) => json!({"used": used, "max": l.max, "error": l.error}),
                    None => json!({"max": l.max, "error": l.error}),
                };
                (l.name, shown)
            })
            .collect(),
    ))
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

/// `atomfs engines`: every engine of this build and its options.
pub fn list_engines(json: bool) -> CmdResult {
    let value: Vec<Value> = engines::ENGINES
        .iter()
        .map(|e| {
            let options: Vec<Value> = e
                .options()
                .iter()
                .map(|o| {
                    json!({
                        "key": o.key,
                        "default": o.default,
                        "when": match o.when {
                            engines::OptionUse::Create => "create",
                            engines::OptionUse::Runtime => "runtime",
                        },
                        "help": o.help,
                    })
                })
                .collect();
            json!({"name": e.name(), "description": e.description(), "options": options})
        })
        .collect();
    if json {
        render::print(&Value::Array(value), true);
        return Ok(ExitCode::SUCCESS);
    }
    for e in engines::ENGINES {
        println!("{}: {}", e.name(), e.description());
        for o in e.options() {
            let default = if o.default.is_empty() {
                String::new()
            } else {
                format!(" (default {})", o.default)
            };
            let when = match o.when {
                engines::OptionUse::Create => ", at mkfs",
                engines::OptionUse::Runtime => "",
            };
            println!("  {:<22} {}{default}{when}", o.key, o.help);
        }
    }
    Ok(ExitCode::SUCCESS)
}
