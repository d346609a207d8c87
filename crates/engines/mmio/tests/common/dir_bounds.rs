//! Path length, tree depth and directory size checks of the host-file engines, over any
//! store (each engine's `tests/paths_and_dirs.rs` includes this file by `#[path]`):
//!
//! - a path of `store::path::PATH_MAX` (4096) bytes or more is ENAMETOOLONG before anything
//!   reaches the host; one byte less resolves, 2,047 components deep;
//! - a tree deeper than one host path can name: mmio, remap and cache name host files by
//!   their path relative to the store directory, so the host's PATH_MAX (hostfs
//!   `PATH_LEN_MAX`) is their bound on depth; past it, ENAMETOOLONG and nothing made; the
//!   journal and remap engines name home files by inode and have no such bound;
//! - entries per directory have no bound of the engine's own: the host directory holds them
//!   (20,000 here, fewer where the engine is slow, `ATOMFS_DIR_ENTRIES=1000000` for the long
//!   run); the journal and remap engines keep the namespace in their own log.
#![allow(dead_code)] // each engine uses part of it
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use store::path::{mkdir_all, resolve, PATH_MAX};
use store::{Store, ROOT_INO};

pub fn count(var: &str, short: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(short)
}

pub fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}

/// A path of PATH_MAX bytes is ENAMETOOLONG, one byte less resolves; returns the deep
/// directory's path (ending in `/`).
pub fn path_max_is_the_bound(s: &dyn Store) -> String {
    let deep = "/d".repeat((PATH_MAX - 2) / 2);
    let made = mkdir_all(s, &deep, 0o755).unwrap();
    let fits = format!("{deep}/");
    assert_eq!(fits.len(), PATH_MAX - 1);
    assert_eq!(resolve(s, &fits).unwrap().ino, made.ino);
    let err = resolve(s, format!("{deep}/x")).unwrap_err();
    assert_eq!(err.errno(), libc::ENAMETOOLONG, "{err:?}");
    assert!(s.read_dir(made.ino).unwrap().is_empty());
    clean(s);
    fits
}

/// mkdir one level below the other until the host path is too long: ENAMETOOLONG near
/// 4,096 bytes of `dd/`, nothing made by the refused call. Returns the depth reached.
pub fn host_path_max_bounds_the_depth(s: &dyn Store) -> usize {
    let (mut at, mut depth) = (ROOT_INO, 0);
    let err = loop {
        match s.mkdir(at, b"dd", 0o755, None) {
            Ok(m) => (at, depth) = (m.ino, depth + 1),
            Err(e) => break e,
        }
        assert!(depth < 10_000, "10,000 levels of 3 bytes fit a host path");
    };
    assert_eq!(err.errno(), libc::ENAMETOOLONG, "{err:?}");
    assert!(
        depth * 3 < 4096 && depth * 3 > 4000,
        "stopped at depth {depth}"
    );
    assert!(s.read_dir(at).unwrap().is_empty());
    clean(s);
    depth
}

/// For an engine that does not name host files by their store path: `depth` levels of
/// `dd` (more than one path can name) are made; the full path of the deepest is
/// ENAMETOOLONG, its directory reached by walking.
pub fn a_deeper_tree_than_a_path_is_made(s: &dyn Store, depth: usize) {
    let mut at = ROOT_INO;
    for _ in 0..depth {
        at = s.mkdir(at, b"dd", 0o755, None).unwrap().ino;
    }
    let err = resolve(s, "/dd".repeat(depth)).unwrap_err();
    assert_eq!(err.errno(), libc::ENAMETOOLONG, "{err:?}");
    walk_down(s, depth);
    clean(s);
}

/// The directory at the end of `depth` levels of `dd`.
pub fn walk_down(s: &dyn Store, depth: usize) {
    let mut at = ROOT_INO;
    for _ in 0..depth {
        at = s.lookup(at, b"dd").unwrap().ino;
    }
}

/// `ATOMFS_DIR_ENTRIES` (else `short`) files in `/big`; returns how many.
pub fn fill_directory(s: &dyn Store, short: usize) -> usize {
    let n = count("ATOMFS_DIR_ENTRIES", short);
    let d = s.mkdir(ROOT_INO, b"big", 0o755, None).unwrap().ino;
    for i in 0..n {
        s.create(d, format!("entry-{i}").as_bytes(), 0o644, None)
            .unwrap();
    }
    assert_eq!(s.read_dir(d).unwrap().len(), n);
    n
}

/// `/big` holds `n` entries; one is found and one removed.
pub fn directory_holds(s: &dyn Store, n: usize) {
    let d = s.lookup(ROOT_INO, b"big").unwrap().ino;
    assert_eq!(s.read_dir(d).unwrap().len(), n);
    s.lookup(d, format!("entry-{}", n / 2).as_bytes()).unwrap();
    s.unlink(d, b"entry-0", None).unwrap();
    clean(s);
}
