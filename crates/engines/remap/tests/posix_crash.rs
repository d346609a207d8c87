//! The POSIX calls beyond files and directories at every crash point of the host crash
//! model: symlink, mknod (FIFO, device), setxattr (create, replace), removexattr, fallocate
//! (punch, zero range, allocate), rename NOREPLACE and EXCHANGE, O_TMPFILE + link, all of
//! them together in one transaction, a checkpoint that writes their records into the
//! snapshot and punches holes home, and a transaction never committed.
//!
//! Each step is one atomic unit. A crash image taken at any host sync during the step (the
//! sync hook records the crash point as the sync begins: every unsynced write may be lost
//! or torn) must recover to the tree before the step or the tree after it, fsck clean; the
//! durable image once the step returned must recover to the tree after it; the first image
//! of every crash point is recovered a second time (recovery is idempotent). Both checkpoint
//! modes; a small journal so that checkpoints run inside the steps. Longer:
//! `ATOMFS_REMAP_POSIX_CRASH_IMAGES=256 cargo test -p atomfs-remap --test posix_crash --
//! --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::posix_steps::{setup, STEPS};
use conformance::tree::{diff, snapshot, Tree};
use hostfs::{HostCrashPoint, SimConfig, SimHostFs};
use remap::{RemapConfig, RemapStore};
use std::sync::{Arc, Mutex};
use store::Store;

type S = RemapStore<SimHostFs>;

const ID: u64 = 0x5eed;

/// Crash images per crash point: enumerated up to this many, else sampled
/// (`ATOMFS_REMAP_POSIX_CRASH_IMAGES=N` for long runs).
fn host() -> SimConfig {
    let images = std::env::var("ATOMFS_REMAP_POSIX_CRASH_IMAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut c = remap::crash_target::host_config();
    c.crash.exhaustive_limit = images;
    c.crash.sample_count = images;
    c
}

fn config(copy_checkpoint: bool) -> RemapConfig {
    RemapConfig {
        copy_checkpoint,
        checkpoint_journal_len: 24 << 10,
        ..RemapConfig::test_min()
    }
}

fn tree(s: &dyn Store) -> Tree {
    snapshot(s).unwrap()
}

fn recover(image: &hostfs::HostImage, cfg: &RemapConfig) -> (SimHostFs, S) {
    let fs = SimHostFs::from_image(image, host());
    let s = RemapStore::open_on(fs.clone(), Some(ID), cfg).unwrap();
    (fs, s)
}

/// Recover every image of `point`; each must be `before` or `after`. Returns the count.
fn check_point(
    point: &HostCrashPoint,
    cfg: &RemapConfig,
    (before, after): (&Tree, &Tree),
    what: &str,
) -> u64 {
    let mut n = 0;
    for (index, image) in point.images().enumerate() {
        let (fs, s) = recover(&image, cfg);
        let got = tree(&s);
        assert!(
            got == *before || got == *after,
            "{what}, {}: neither before nor after:\n before: {:?}\n after: {:?}",
            point.describe(index as u64),
            diff(before, &got, 6),
            diff(after, &got, 6)
        );
        let report = s.fsck().unwrap();
        assert!(report.is_clean(), "{what}: {:?}", report.problems);
        if index == 0 {
            drop(s);
            let (_, again) = recover(&fs.durable_image(), cfg);
            assert_eq!(tree(&again), got, "{what}: a second recovery");
        }
        n += 1;
    }
    n
}

fn run(copy_checkpoint: bool) {
    let cfg = config(copy_checkpoint);
    let sim = SimHostFs::new(host());
    let s = RemapStore::create_on(sim.clone(), ID, &cfg).unwrap();
    setup(&s);
    let mut before = tree(&s);
    let points: Arc<Mutex<Vec<HostCrashPoint>>> = Arc::default();
    let mut images = 0;
    for &(name, step) in STEPS {
        let sink = points.clone();
        sim.set_sync_hook(Box::new(move |p: &HostCrashPoint| {
            sink.lock().unwrap().push(p.clone());
        }));
        step(&s);
        sim.take_sync_hook();
        let uncommitted = name.contains("never committed");
        let after = if uncommitted {
            before.clone()
        } else {
            tree(&s)
        };
        let what = format!("copy_checkpoint {copy_checkpoint}, step {name:?}");
        let taken: Vec<HostCrashPoint> = std::mem::take(&mut *points.lock().unwrap());
        for point in taken.iter().chain([&sim.crash_point()]) {
            images += check_point(point, &cfg, (&before, &after), &what);
        }
        let (_, durable) = recover(&sim.durable_image(), &cfg);
        assert_eq!(tree(&durable), after, "{what}: the durable image");
        before = after;
    }
    eprintln!(
        "posix_crash (copy_checkpoint {copy_checkpoint}): {} steps, {images} crash images \
         recovered",
        STEPS.len()
    );
}

#[test]
fn every_posix_call_is_atomic_at_every_crash_point_remapping() {
    run(false);
}

#[test]
fn every_posix_call_is_atomic_at_every_crash_point_copying() {
    run(true);
}
