//! Compiles atomfs_sqlite.c (the VFS) into a static archive linked into
//! libatomfs_sqlite.so, and links that library to libatomfs.so.
//!
//! - The C entry points are renamed (`-Dsqlite3_atomfssqlite_init=...`): a Rust cdylib
//!   exports only the symbols Rust defines, so src/lib.rs defines the exported entry points
//!   and calls the C ones. The C file stays usable on its own (scripts/install-c.sh and the
//!   bench compile it with plain `cc`).
//! - libatomfs.so is the one the `atomfs-capi` dependency has just built in
//!   `target/PROFILE/deps`; at run time it is found beside libatomfs_sqlite.so (rpath
//!   `$ORIGIN`), which holds in target/PROFILE and in an installed lib directory alike.
//! - Without sqlite3ext.h (libsqlite3-dev) or a C compiler the build does not fail: it warns
//!   and builds a stub whose entry points fail, and sets `ATOMFS_SQLITE_VFS=stub` for the
//!   tests, which then skip.

use std::path::{Path, PathBuf};

const SOURCE: &str = "atomfs_sqlite.c";
const INCLUDE: &str = "../capi/include";

fn main() {
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-changed=atomfs_sqlite_names.h");
    println!("cargo::rerun-if-changed={INCLUDE}/atomfs.h");
    println!("cargo::rustc-check-cfg=cfg(atomfs_sqlite_stub)");
    let built = cc::Build::new()
        .file(SOURCE)
        .include(INCLUDE)
        .std("c99")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .define("sqlite3_atomfssqlite_init", "atomfs_sqlite_vfs_init")
        .define(
            "sqlite3_atomfs_init",
            "atomfs_sqlite_vfs_init_by_short_name",
        )
        .cargo_warnings(false)
        .try_compile("atomfs_sqlite_vfs");
    match built {
        Ok(()) => {
            link_libatomfs();
            println!("cargo::rustc-env=ATOMFS_SQLITE_VFS=built");
        }
        Err(e) => {
            println!(
                "cargo::warning=libatomfs_sqlite.so is a stub whose entry points fail: {SOURCE} did not compile \
                 (is libsqlite3-dev installed? scripts/install-deps.sh): {e}"
            );
            println!("cargo::rustc-cfg=atomfs_sqlite_stub");
            println!("cargo::rustc-env=ATOMFS_SQLITE_VFS=stub");
        }
    }
}

/// Link to the libatomfs.so of this build (target/PROFILE/deps), found at run time beside
/// the extension.
fn link_libatomfs() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    // OUT_DIR is target/PROFILE/build/atomfs-sqlite-HASH/out.
    if let Some(profile_dir) = out_dir.ancestors().nth(3) {
        let deps = profile_dir.join("deps");
        println!("cargo::rustc-link-search=native={}", deps.display());
        if !Path::new(&deps).is_dir() {
            println!("cargo::warning=no directory {}", deps.display());
        }
    }
    println!("cargo::rustc-link-lib=dylib=atomfs");
    println!("cargo::rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
}
