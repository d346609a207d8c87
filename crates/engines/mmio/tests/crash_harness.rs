//! The mmio engine (hybrid, undo and redo logging) under the shared crash harness
//! (crates/testing/crash): seeded workloads of transactions (with namespace operations),
//! legacy calls and O_ATOMIC units; crash images at every fence; recovery (also crashed and
//! recovered again); the ModelStore oracle; and SIGKILLed child processes on a real directory
//! and log pool file in /dev/shm. On the simulator the media (namespace + file extents) and the
//! log pool share one SimRegion, so the harness's region images are whole-system crash images.
//! The targets are `mmio::crash_target`'s, by the names `atomfs crashtest --engine` takes.
//! Every engine's tests/crash_harness.rs is this table (see `crash::suite`).
//!
//! CI scale here (about a minute in the dev profile); longer runs:
//! `ATOMFS_CRASH_WORKLOADS=500 cargo test -p atomfs-mmio --release --test crash_harness -- --nocapture`.

use crash::suite::{Seeds, Sim, Torture};

/// `workloads` single-thread workloads from seed `first`, at least 500 crash images.
const fn ci(first: u64, workloads: u64, threads: usize) -> Sim {
    Sim {
        seeds: Seeds::Count { first, workloads },
        units: 16,
        threads,
        images_per_fence: 6,
        images_per_workload: 150,
        images_min: 500,
    }
}

crash::crash_tests! {
    targets: mmio::crash_target::MmioTarget::by_name, repro "mmio";
    sim mmio_hybrid_crash_ci("mmio-hybrid", ci(1, 12, 1));
    sim mmio_undo_crash_ci("mmio-undo", ci(101, 6, 1));
    sim mmio_redo_crash_ci("mmio-redo", ci(201, 6, 1));
    sim mmio_crash_two_threads("mmio-hybrid", ci(301, 4, 2));
    // 50 SIGKILLs on fresh stores (a directory of host files and a log pool), then 50 on one
    // store kept across rounds.
    torture mmio_torture("mmio", Torture { seed: 5, rounds: 50, kill_after_ms_max: 60 });
}

/// Hybrid logging must reach redo under the harness: the workloads keep files open across
/// units (a reopen starts in undo, and the harness used to close every file after each unit,
/// so `mmio-hybrid` wrote in undo only and its redo paths were never crash-checked).
#[test]
fn mmio_hybrid_writes_in_redo_under_the_harness() {
    let report = ci(1, 3, 1).report(crash_target("mmio-hybrid"));
    assert!(
        report.images >= 300,
        "too few crash images: {}",
        report.summary()
    );
    let redo = report.store_stats.get("write in redo").copied();
    assert!(
        redo.unwrap_or(0) > 0,
        "mmio-hybrid never wrote in redo: {:?}",
        report.store_stats
    );
    assert!(report.violations.is_empty(), "{}", report.violations[0]);
}
