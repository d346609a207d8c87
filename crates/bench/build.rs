//! Builds the PMDK baseline (csrc/pmdk_tx.c) when libpmemobj is installed and sets
//! `cfg(has_pmdk)`; without it the crate still builds and the `pmdk` system reports
//! "skipped: libpmemobj not installed".

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_pmdk)");
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
