//! `atomfs info` lists every bounded resource of a store with its maximum, its use and the
//! error past it — here on a pool, and on a host-file engine's store through the registry.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use support::*;

#[test]
fn info_shows_every_limit_with_its_use() {
    let dir = scratch("info-limits");
    let pool = dir.join("p.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "32M"]);
    std::fs::write(dir.join("f"), "x").unwrap();
    atomfs_ok(&["put", s(&pool), s(&dir.join("f")), "/f"]);
    let out = atomfs_ok(&["info", s(&pool), "--json"]);
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    let limits = &info["limits"];
    for (name, error) in [
        ("file name bytes", "ENAMETOOLONG"),
        ("inodes", "ENOSPC"),
        ("data blocks", "ENOSPC"),
        ("open files", "EMFILE"),
        ("open transactions", "EMFILE"),
        ("metadata log entries", "ENOSPC"),
        ("data log entries", "ENOSPC"),
    ] {
        let (_, entry) = limits
            .as_object()
            .and_then(|m| m.iter().find(|(k, _)| k.starts_with(name)))
            .unwrap_or_else(|| panic!("no {name} in {limits}"));
        assert_eq!(entry["error"], error, "{name}: {entry}");
        assert!(
            entry["max"].as_u64().is_some_and(|m| m > 0),
            "{name}: {entry}"
        );
    }
    // The root and /f: two inodes in use.
    assert_eq!(limits["inodes"]["used"], 2, "{limits}");
    let (home_pool, _) = mkfs_mmio(&dir);
    let out = atomfs_ok(&["info", s(&home_pool), "--json"]);
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["limits"]["file name bytes"]["max"], 255, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
