//! The rest of the POSIX file API through ordinary libc calls under the shim
//! (`tests/c/shim_posix.c`): on a pool, where a part the pool does not offer yet
//! (`conformance::cases::awaited("pool")`) is checked to fail cleanly, and in full on the
//! reference model — the program's pool file is locked by this test, so the shim becomes a
//! client of the server this test runs for a `ModelStore` on the pool's socket.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::cc::{compile, have_cc, lib_dir};
use test_support::checked as ok;

fn build(dir: &Path) -> Option<PathBuf> {
    if !have_cc() {
        test_support::unavailable("shim POSIX calls", "no C compiler");
        return None;
    }
    let exe = dir.join("shim_posix");
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = crate_dir.join("tests/c/shim_posix.c");
    compile(
        &src,
        &exe,
        &crate_dir.join("../capi/include"),
        &["-std=c99"],
    );
    Some(exe)
}

/// A fresh pool file in `dir`, closed.
fn pool_file(dir: &Path) -> PathBuf {
    let pool = dir.join("pool");
    let opts = engines::Options::new().with("size", (32u64 << 20).to_string());
    let opened = engines::create(&pool, "pool", &opts).expect("create pool");
    opened.store.unmount().expect("unmount");
    pool
}

fn run(exe: &Path, pool: &Path, awaited: &[conformance::cases::Feature]) -> String {
    let list: Vec<String> = awaited.iter().map(|f| format!("{f:?}")).collect();
    let out = Command::new(exe)
        .arg(list.join(","))
        .env("LD_PRELOAD", lib_dir().join("libatomfs_preload.so"))
        .env("ATOMFS_POOL", pool)
        .env("ATOMFS_PREFIX", "/atomfs")
        .env("ATOMFS_SERVE", "0")
        .output()
        .expect("run shim_posix");
    let text = ok(&out, "shim_posix");
    assert!(text.contains("checks ok"), "{text}");
    text
}

#[test]
fn posix_calls_under_the_shim_on_a_pool() {
    let dir = test_support::scratch("preload-posix-pool");
    let Some(exe) = build(&dir) else { return };
    let pool = pool_file(&dir);
    run(&exe, &pool, conformance::cases::awaited("pool"));
}

#[test]
fn posix_calls_under_the_shim_on_the_reference_model() {
    let dir = test_support::scratch("preload-posix-model");
    let Some(exe) = build(&dir) else { return };
    let pool = pool_file(&dir);
    let _lock = engines::StoreLock::acquire(&pool).expect("lock the pool file");
    let model = std::sync::Arc::new(conformance::ModelStore::new());
    let server = remote::serve(model.clone(), &remote::socket_for(&pool)).expect("serve");
    let out = run(&exe, &pool, &[]);
    assert!(!out.contains("awaited"), "{out}");
    assert_eq!(
        store::path::read_file(&*model, "/pub").expect("published"),
        b"published"
    );
    server.stop();
}

#[test]
fn posix_calls_under_the_shim_on_mmio() {
    let dir = test_support::scratch("preload-posix-mmio");
    let Some(exe) = build(&dir) else { return };
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let pool = dir.join("pool");
    let opts = engines::Options::new()
        .with("home", home.display().to_string())
        .with("size", (32u64 << 20).to_string());
    let opened = engines::create(&pool, "mmio", &opts).expect("create mmio");
    opened.store.unmount().expect("unmount");
    drop(opened);
    run(&exe, &pool, conformance::cases::awaited("mmio"));
}
