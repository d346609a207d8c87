//! The mmio engine through the front ends that reach it by its pool path alone: `atomfs mount`
//! with real programs (git, sqlite3) on the mount, and the LD_PRELOAD shim creating an mmio
//! store from ATOMFS_ENGINE / ATOMFS_OPTIONS. The files land as plain files in the home
//! directory the pool file records.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::*;
use test_support::fuse::have_fuse;
use test_support::programs::{git_round_trip, sqlite_round_trip};

#[test]
fn git_and_sqlite3_on_a_mounted_mmio_store() {
    if !have_fuse("FUSE") {
        return;
    }
    let dir = scratch("mmio-mount");
    let (pool, home) = mkfs_mmio(&dir);
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // Only the pool's path: the engine and its home directory come from the pool file.
    atomfs_ok(&["mount", pool.to_str().unwrap(), mnt.to_str().unwrap()]);
    let result = std::panic::catch_unwind(|| {
        let repo = mnt.join("repo");
        std::fs::create_dir(&repo).unwrap();
        std::fs::write(repo.join("README"), b"an mmio store\n").unwrap();
        std::fs::create_dir(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/main.c"), b"int main(void) { return 0; }\n").unwrap();
        git_round_trip(&repo);
        sqlite_round_trip(&mnt, 2000);
    });
    atomfs_ok(&["umount", mnt.to_str().unwrap()]);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    // The files are plain files in the home directory, readable without atomfs.
    if home.join("repo/README").exists() {
        assert_eq!(
            std::fs::read(home.join("repo/README")).unwrap(),
            b"an mmio store\n"
        );
    }
    let fsck = atomfs(&["fsck", pool.to_str().unwrap()]);
    assert!(fsck.ok(), "fsck: {}{}", fsck.stdout, fsck.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shim_creates_and_uses_an_mmio_store() {
    let dir = scratch("mmio-shim");
    let pool = dir.join("m.pool");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let shim = PathBuf::from(ATOMFS)
        .parent()
        .unwrap()
        .join("libatomfs_preload.so");
    let under_shim = |script: &str| {
        let out = Command::new("sh")
            .args(["-c", script])
            .env("LD_PRELOAD", &shim)
            .env("ATOMFS_POOL", &pool)
            .env("ATOMFS_PREFIX", "/atomfs")
            .env("ATOMFS_CREATE_SIZE", "0")
            .env("ATOMFS_ENGINE", "mmio")
            .env(
                "ATOMFS_OPTIONS",
                format!("home={},size=64M", home.display()),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    under_shim("mkdir /atomfs/d && printf 'through the shim' > /atomfs/d/f");
    assert_eq!(under_shim("cat /atomfs/d/f"), "through the shim");
    assert_eq!(
        std::fs::read(home.join("d/f")).unwrap(),
        b"through the shim"
    );
    let info = atomfs_ok(&["info", pool.to_str().unwrap(), "--json"]);
    assert!(info.contains("\"engine\": \"mmio"), "{info}");
    // ATOMFS_ENGINE/ATOMFS_OPTIONS matter only when creating: an existing store opens as is.
    let out = Command::new("cat")
        .arg("/atomfs/d/f")
        .env("LD_PRELOAD", &shim)
        .env("ATOMFS_POOL", &pool)
        .env("ATOMFS_PREFIX", "/atomfs")
        .env("ATOMFS_ENGINE", "pool")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through the shim");
    let _ = std::fs::remove_dir_all(&dir);
}
