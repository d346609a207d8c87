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

/// Rounds per half (fresh stores, one store across rounds) per file system in CI.
const ROUNDS: u64 = 100;

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
/// (not by the copy fallback), so the torture exercises FICLONERANGE.
fn assert_remaps_on(dir: &Path) {
    let t = target();
    let pool = dir.join("probe.pool");
    let s = t.create_pool(&pool).unwrap();
    let mode = s
        .as_any()
        .downcast_ref::<HostRemapStore>()
        .map(|r| r.checkpoint_mode());
    s.unmount().unwrap();
    drop(s);
    t.remove_pool(&pool);
    assert_eq!(mode, Some(CheckpointMode::Remap), "{}", dir.display());
}

fn kill_loop(kind: Kind, seed: u64) {
    let fs = match LoopFs::new(kind, "kill") {
        Ok(fs) => fs,
        Err(why) => return skip(&format!("{kind:?} image: {why}")),
    };
    assert_remaps_on(fs.dir());
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

#[test]
fn sigkill_torture_on_btrfs() {
    kill_loop(Kind::Btrfs, 71);
}
