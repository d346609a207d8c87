//! Who may open a store: a new pool file is its owner's alone (0600, or `--mode`), a symbolic
//! link at the pool path is not followed unless asked, another user's store is refused unless
//! allowed.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::os::unix::fs::PermissionsExt;
use support::*;
use test_support::unavailable;

#[test]
fn modes_symlinks_and_foreign_owners() {
    let dir = scratch("access");
    let pool = dir.join("a.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "16M"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&pool), 0o600);
    let wide = dir.join("wide.pool");
    atomfs_ok(&["mkfs", s(&wide), "--size", "16M", "--mode", "0640"]);
    assert_eq!(mode(&wide), 0o640);
    let r = atomfs(&[
        "mkfs",
        s(&dir.join("x.pool")),
        "--size",
        "16M",
        "--mode",
        "999",
    ]);
    assert!(!r.ok() && r.stderr.contains("invalid mode"), "{}", r.stderr);

    let link = dir.join("link.pool");
    std::os::unix::fs::symlink(&pool, &link).unwrap();
    let r = atomfs(&["ls", s(&link)]);
    assert!(
        !r.ok() && r.stderr.contains("symbolic link"),
        "{}",
        r.stderr
    );
    atomfs_ok(&["ls", s(&link), "--follow-symlinks"]);

    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        unavailable("foreign owner", "needs root to give a pool to another user");
        return;
    }
    std::os::unix::fs::chown(&pool, Some(65534), Some(65534)).unwrap();
    let r = atomfs(&["ls", s(&pool)]);
    assert!(
        !r.ok() && r.stderr.contains("owned by uid 65534"),
        "{}",
        r.stderr
    );
    atomfs_ok(&["ls", s(&pool), "--allow-foreign-owner"]);
    let _ = std::fs::remove_dir_all(&dir);
}
