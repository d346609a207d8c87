//! Builds the C parts of the baselines against the system's libraries, each only when its
//! library is installed:
//! - the PMDK baseline (csrc/pmdk_tx.c, libpmemobj) and `cfg(has_pmdk)`; without it the
//!   `pmdk` system reports "skipped: libpmemobj not installed";
//! - the SQLite driver (csrc/sqlite_bench.c, the system libsqlite3) and `cfg(has_sqlite)`;
//!   without it the `sqlite` suite reports that it was built without libsqlite3.

/// One C part: its source, the pkg-config package (and lowest version) it is built against,
/// the cfg it sets, and the environment variable that switches it off.
struct CPart {
    source: &'static str,
    package: &'static str,
    version_min: &'static str,
    cfg: &'static str,
    disable_env: &'static str,
    what: &'static str,
}

const PARTS: &[CPart] = &[
    CPart {
        source: "csrc/pmdk_tx.c",
        package: "libpmemobj",
        version_min: "1.4",
        cfg: "has_pmdk",
        disable_env: "ATOMFS_BENCH_NO_PMDK",
        what: "PMDK baseline",
    },
    // 3.20: sqlite3_prepare_v3 (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION is from 3.13).
    CPart {
        source: "csrc/sqlite_bench.c",
        package: "sqlite3",
        version_min: "3.20",
        cfg: "has_sqlite",
        disable_env: "ATOMFS_BENCH_NO_SQLITE",
        what: "sqlite suite",
    },
];

fn main() {
    for part in PARTS {
        println!("cargo::rustc-check-cfg=cfg({})", part.cfg);
        build(part);
    }
}

fn build(part: &CPart) {
    println!("cargo::rerun-if-changed={}", part.source);
    println!("cargo::rerun-if-env-changed={}", part.disable_env);
    if std::env::var_os(part.disable_env).is_some() {
        println!(
            "cargo::warning={} set: {} disabled",
            part.disable_env, part.what
        );
        return;
    }
    let lib = match pkg_config::Config::new()
        .atleast_version(part.version_min)
        .probe(part.package)
    {
        Ok(lib) => lib,
        Err(e) => {
            println!(
                "cargo::warning={} not found ({e}); {} disabled",
                part.package, part.what
            );
            return;
        }
    };
    let mut build = cc::Build::new();
    build.file(part.source).opt_level(2).warnings(true);
    for dir in &lib.include_paths {
        build.include(dir);
    }
    let name = std::path::Path::new(part.source)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("c_part");
    build.compile(&format!("atomfs_bench_{name}"));
    // pkg_config already printed the link lines for the library (and its dependencies).
    println!("cargo::rustc-cfg={}", part.cfg);
}
