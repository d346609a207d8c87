//! The mmio engine under the shared crash harness (crates/testing/crash): seeded workloads of
//! transactions (with namespace operations), legacy calls and O_ATOMIC units; crash images at
//! every fence; recovery (also crashed and recovered again); the ModelStore oracle. The
//! simulated media (namespace + file extents) and the log pool share one SimRegion, so the
//! harness's region images are whole-system crash images.
//!
//! CI scale here (about a minute in the dev profile); longer runs:
//! `ATOMFS_MMIO_CRASH_WORKLOADS=500 cargo test -p atomfs-mmio --release --test crash_harness -- --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crash::mmio_target::MmioTarget;
use crash::{run_seeds, DriverConfig, WorkloadConfig};
use mmio::PolicyMode;
use std::sync::Arc;

fn run(mode: PolicyMode, seeds: std::ops::RangeInclusive<u64>, threads: usize) {
    let extra: u64 = std::env::var("ATOMFS_MMIO_CRASH_WORKLOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seeds = *seeds.start()..=seeds.end() + extra;
    let cfg = DriverConfig {
        images_per_fence: 6,
        images_per_workload: 150,
        ..Default::default()
    };
    let report = run_seeds(
        Arc::new(MmioTarget::new(mode)),
        seeds,
        WorkloadConfig {
            seed: 0,
            units: 16,
            threads,
        },
        &cfg,
    );
    eprintln!(
        "{} (units rolled back for lack of space: {})",
        report.summary(),
        report.space_rollbacks
    );
    assert!(
        report.images >= 500,
        "too few crash images: {}",
        report.images
    );
    assert!(
        report.violations.is_empty(),
        "{} violations, first: {}",
        report.violations.len(),
        report.violations[0]
    );
}

#[test]
fn mmio_hybrid_crash_ci() {
    run(PolicyMode::Hybrid, 1..=12, 1);
}

#[test]
fn mmio_undo_crash_ci() {
    run(PolicyMode::Undo, 101..=106, 1);
}

#[test]
fn mmio_redo_crash_ci() {
    run(PolicyMode::Redo, 201..=206, 1);
}

#[test]
fn mmio_crash_two_threads() {
    run(PolicyMode::Hybrid, 301..=304, 2);
}
