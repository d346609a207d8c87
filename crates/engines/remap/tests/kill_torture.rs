//! SIGKILL torture on real XFS (reflink=1) and Btrfs images, loop-mounted from /dev/shm
//! (root; CI runs as root): a child process (this test binary, test `victim`) runs the crash
//! harness's seeded workload — transactions with namespace operations, legacy calls, O_ATOMIC
//! units — on a store whose home is on the image, with the smallest journal limit so that
//! checkpoints by FICLONERANGE run all the time, and reports every acknowledged unit through
//! its stdout pipe. The parent SIGKILLs it at a random moment (also inside pool creation and
//! recovery), opens the store (recovery), and checks that the state is the model after the
//! acknowledged units or after one more (the one in flight) — every acknowledged unit whole,
//! nothing torn — and that fsck is clean. Half the rounds use fresh stores, half keep one
//! store across rounds (kills land in recovery too).
//!
//! CI scale: `ROUNDS` per half per file system (about 20–40 s in all). Longer:
//! `ATOMFS_REMAP_KILL_ROUNDS=500 cargo test -p atomfs-remap --release --test kill_torture -- --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::{skip, Kind, LoopFs};
use crash::torture::{run_child, torture, KillTarget, TortureConfig};
use remap::crash_target::RemapTarget;
use remap::{CheckpointMode, HostRemapStore};
use std::path::Path;
use std::process::Command;
use store::Store;

/// Rounds per half (fresh stores, one store across rounds) per file system in CI.
const ROUNDS: u64 = 70;

fn target() -> RemapTarget {
    RemapTarget::by_name("remap-reflink").unwrap()
}

/// The victim: runs only when the parent below started this binary for it.
#[test]
fn victim() {
    let (Ok(pool), Ok(seed)) = (
        std::env::var("ATOMFS_REMAP_KILL_POOL"),
        std::env::var("ATOMFS_REMAP_KILL_SEED"),
    ) else {
        return;
    };
    run_child(&target(), Path::new(&pool), seed.parse().unwrap()).unwrap();
}

fn child(pool: &Path, seed: u64) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "victim", "--nocapture", "--test-threads=1"])
        .env("ATOMFS_REMAP_KILL_POOL", pool)
        .env("ATOMFS_REMAP_KILL_SEED", seed.to_string());
    cmd
}

/// A store created on `dir` the way the victim creates its own checkpoints by remapping
/// (not by the copy fallback), so the torture exercises FICLONERANGE; with `exchange`, a
/// rewrite of a whole file there is an exchange commit (XFS_IOC_EXCHANGE_RANGE).
fn assert_remaps_on(dir: &Path, exchange: bool) {
    let t = target();
    let pool = dir.join("probe.pool");
    let s = t.create_pool(&pool).unwrap();
    let r = s.as_any().downcast_ref::<HostRemapStore>().unwrap();
    assert_eq!(
        r.checkpoint_mode(),
        CheckpointMode::Remap,
        "{}",
        dir.display()
    );
    if exchange {
        let f = store::OpenOptions::new()
            .write(true)
            .create(true)
            .open(r, "/f", None)
            .unwrap();
        s.write(f, 0, &[7u8; 16384]).unwrap();
        s.release(f).unwrap();
        assert_eq!(r.counters().exchanges, 1, "{}", dir.display());
    }
    s.unmount().unwrap();
    drop(s);
    t.remove_pool(&pool);
}

fn kill_loop(kind: Kind, seed: u64) {
    let fs = match LoopFs::new(kind, "kill") {
        Ok(fs) => fs,
        Err(why) => return skip(&format!("{kind:?} image: {why}")),
    };
    let exchange = kind == Kind::XfsExchange;
    if exchange && !exchange_range_on(fs.dir()) {
        return skip("the kernel offers no XFS_IOC_EXCHANGE_RANGE (Linux 6.10+) on this image");
    }
    assert_remaps_on(fs.dir(), exchange);
    let rounds = std::env::var("ATOMFS_REMAP_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS);
    let cfg = TortureConfig {
        seed,
        rounds,
        dir: fs.dir().to_path_buf(),
        kill_after_ms_max: 120,
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let fresh = torture(&target(), &child, &cfg);
    let shared = TortureConfig {
        continue_pool: true,
        seed: seed + 1,
        ..cfg
    };
    let again = torture(&target(), &child, &shared);
    eprintln!(
        "{kind:?}: {} / {} (one store across rounds), {:?}",
        fresh.summary(),
        again.summary(),
        started.elapsed()
    );
    for (what, report) in [("fresh stores", &fresh), ("one store", &again)] {
        if let Some(first) = report.violations.first() {
            panic!(
                "{kind:?}, {what}: {} violations, first: {first}",
                report.violations.len()
            );
        }
    }
    assert!(
        fresh.kills + again.kills >= 2 * rounds * 9 / 10,
        "too few children were killed: {} + {} of {} rounds",
        fresh.kills,
        again.kills,
        2 * rounds
    );
    assert!(
        fresh.images + again.images >= rounds,
        "too few recovered stores checked: {} + {}",
        fresh.images,
        again.images
    );
}

#[test]
fn sigkill_torture_on_xfs() {
    kill_loop(Kind::Xfs, 41);
}

/// With the `exchange` feature the workload's whole-file rewrites are exchange commits:
/// kills land between staging, record, swap and checkpoint.
#[test]
fn sigkill_torture_on_xfs_with_exchange_range() {
    kill_loop(Kind::XfsExchange, 57);
}

fn exchange_range_on(dir: &Path) -> bool {
    let pool = dir.join("caps.pool");
    let home = dir.join("caps.home");
    std::fs::create_dir_all(&home).unwrap();
    let s = HostRemapStore::create(&pool, &home, &remap::RemapConfig::default()).unwrap();
    let caps = s.capabilities();
    s.unmount().unwrap();
    drop(s);
    let _ = std::fs::remove_file(&pool);
    let _ = std::fs::remove_dir_all(&home);
    caps.exchange_range
}

#[test]
fn sigkill_torture_on_btrfs() {
    kill_loop(Kind::Btrfs, 71);
}
