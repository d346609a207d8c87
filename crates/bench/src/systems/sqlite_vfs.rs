//! The atomfs SQLite VFS for the `sqlite` suite: `libatomfs_sqlite.so` (crates/frontends/sqlite,
//! docs/sqlite.md), loaded into the system libsqlite3 once per process as any application
//! would load it.
//!
//! Where it comes from, first match wins:
//! 1. `ATOMFS_SQLITE_EXT=PATH` — an existing build (e.g. `scripts/install-c.sh` puts one in
//!    /usr/local/lib);
//! 2. built now with `cc`, as `scripts/install-c.sh` and the front end's tests build it, from
//!    crates/frontends/sqlite/atomfs_sqlite.c against the `libatomfs.so` cargo built with this
//!    binary (atomfs-bench depends on atomfs-capi, so `target/PROFILE/deps/libatomfs.so` is
//!    always the current one; `ATOMFS_LIB_DIR=DIR` points elsewhere);
//! 3. /usr/local/lib/libatomfs_sqlite.so.
//!
//! Otherwise the atomfs system is skipped, saying what is missing.

use crate::error::{BenchError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../frontends/sqlite/atomfs_sqlite.c"
);
const INCLUDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../frontends/capi/include");
const INSTALLED: &str = "/usr/local/lib/libatomfs_sqlite.so";

/// Directories that may hold the `libatomfs.so` built with this binary.
fn lib_dir_candidates() -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os("ATOMFS_LIB_DIR") {
        return vec![PathBuf::from(dir)];
    }
    let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    // target/P/atomfs-bench -> target/P/deps; test binaries live in target/P/deps.
    let mut dirs = vec![exe_dir.join("deps"), exe_dir.clone()];
    if let Some(parent) = exe_dir.parent() {
        dirs.push(parent.to_path_buf());
    }
    dirs
}

/// Build the extension into `dir` from the workspace's source; Err says why not.
fn build(dir: &Path) -> std::result::Result<(PathBuf, String), String> {
    if !Path::new(SOURCE).is_file() {
        return Err(format!("no source at {SOURCE}"));
    }
    let lib_dir = lib_dir_candidates()
        .into_iter()
        .find(|d| d.join("libatomfs.so").is_file())
        .ok_or("libatomfs.so not found next to atomfs-bench (cargo build -p atomfs-bench builds it; or set ATOMFS_LIB_DIR)")?;
    let out = dir.join("libatomfs_sqlite.so");
    let result = Command::new("cc")
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-fPIC", "-shared"])
        .arg(format!("-I{INCLUDE}"))
        .arg(SOURCE)
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-latomfs")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !result.status.success() {
        return Err(format!(
            "cc failed building libatomfs_sqlite.so (is libsqlite3-dev installed?): {}",
            String::from_utf8_lossy(&result.stderr).trim()
        ));
    }
    Ok((
        out,
        format!(
            "libatomfs_sqlite.so built with cc -O2 from crates/frontends/sqlite/atomfs_sqlite.c \
             against {}",
            lib_dir.join("libatomfs.so").display()
        ),
    ))
}

/// Find or build the extension and load it into libsqlite3; Ok says which one was loaded.
fn find_and_load() -> std::result::Result<String, String> {
    if let Some(p) = std::env::var_os("ATOMFS_SQLITE_EXT") {
        let p = PathBuf::from(p);
        crate::systems::sqlite::load_extension(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        return Ok(format!("{} (ATOMFS_SQLITE_EXT)", p.display()));
    }
    let dir = crate::scratch_dir_path("sqlite-ext");
    std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let built = build(&dir);
    let loaded = match &built {
        Ok((path, how)) => crate::systems::sqlite::load_extension(path)
            .map(|()| how.clone())
            .map_err(|e| e.to_string()),
        Err(why) => Err(why.clone()),
    };
    // Loaded libraries stay mapped after their file is gone.
    let _ = std::fs::remove_dir_all(&dir);
    match loaded {
        Ok(how) => Ok(how),
        Err(why) if Path::new(INSTALLED).is_file() => {
            crate::systems::sqlite::load_extension(Path::new(INSTALLED))
                .map(|()| format!("{INSTALLED} (not built here: {why})"))
                .map_err(|e| format!("{why}; {INSTALLED}: {e}"))
        }
        Err(why) => Err(why),
    }
}

/// Make the VFS `atomfs` available (once per process); Ok describes the extension used,
/// `Skipped` says why it is not available.
pub fn ensure_loaded() -> Result<String> {
    static LOADED: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    if !crate::systems::sqlite::available() {
        return Err(crate::systems::sqlite::not_built());
    }
    LOADED
        .get_or_init(find_and_load)
        .clone()
        .map_err(|why| BenchError::Skipped(format!("SQLite VFS atomfs unavailable: {why}")))
}
