//! Builds the C parts of the baselines against the system's libraries, each only when its
//! library is installed:
//! - the PMDK baseline (csrc/pmdk_tx.c, libpmemobj) and `cfg(has_pmdk)`; without it the
//!   `pmdk` system reports "skipped: libpmemobj not installed";
//! - the SQLite driver (csrc/sqlite_bench.c, the system libsqlite3) and `cfg(has_sqlite)`;
//!   without it the `sqlite` suite reports "skipped: libsqlite3 not installed".

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_pmdk)");
    println!("cargo::rustc-check-cfg=cfg(has_sqlite)");
    pmdk();
    sqlite();
}

fn pmdk() {
    println!("cargo::rerun-if-changed=csrc/pmdk_tx.c");
    println!("cargo::rerun-if-env-changed=ATOMFS_BENCH_NO_PMDK");
    if std::env::var_os("ATOMFS_BENCH_NO_PMDK").is_some() {
        println!("cargo::warning=ATOMFS_BENCH_NO_PMDK set: PMDK baseline disabled");
        return;
    }
    let lib = match pkg_config::Config::new()
        .atleast_version("1.4")
        .probe("libpmemobj")
    {
        Ok(lib) => lib,
        Err(e) => {
            println!("cargo::warning=libpmemobj not found ({e}); PMDK baseline disabled");
            return;
        }
    };
    let mut build = cc::Build::new();
    build.file("csrc/pmdk_tx.c").opt_level(2).warnings(true);
    for dir in &lib.include_paths {
        build.include(dir);
    }
    build.compile("atomfs_bench_pmdk");
    // pkg_config already printed the link lines for libpmemobj (and libpmem).
    println!("cargo::rustc-cfg=has_pmdk");
}

fn sqlite() {
    println!("cargo::rerun-if-changed=csrc/sqlite_bench.c");
    println!("cargo::rerun-if-env-changed=ATOMFS_BENCH_NO_SQLITE");
    if std::env::var_os("ATOMFS_BENCH_NO_SQLITE").is_some() {
        println!("cargo::warning=ATOMFS_BENCH_NO_SQLITE set: sqlite suite disabled");
        return;
    }
    // 3.20: sqlite3_prepare_v3 (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION is from 3.13).
    let lib = match pkg_config::Config::new()
        .atleast_version("3.20")
        .probe("sqlite3")
    {
        Ok(lib) => lib,
        Err(e) => {
            println!("cargo::warning=libsqlite3 not found ({e}); sqlite suite disabled");
            return;
        }
    };
    let mut build = cc::Build::new();
    build
        .file("csrc/sqlite_bench.c")
        .opt_level(2)
        .warnings(true);
    for dir in &lib.include_paths {
        build.include(dir);
    }
    build.compile("atomfs_bench_sqlite");
    println!("cargo::rustc-cfg=has_sqlite");
}
