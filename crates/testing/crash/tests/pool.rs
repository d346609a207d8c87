//! CI-scale crash test of the `pool` engine (FCFS): at least 5,000 crash images over at least
//! 50 workloads. Needs `--features pool` (see Cargo.toml). Longer runs:
//! `ATOMFS_CRASH_WORKLOADS=2000 cargo test -p atomfs-crash --features pool --release --test pool -- --nocapture`.
#![cfg(feature = "pool")]

use crash::pool_target::PoolTarget;
use crash::{run_seeds, DriverConfig, WorkloadConfig};
use std::sync::Arc;

#[test]
fn pool_crash_ci() {
    let workloads: u64 = std::env::var("ATOMFS_CRASH_WORKLOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let cfg = DriverConfig {
        images_per_fence: 8,
        images_per_workload: 200,
        ..Default::default()
    };
    let report = run_seeds(
        Arc::new(PoolTarget::test_min()),
        1..=workloads,
        WorkloadConfig {
            seed: 0,
            units: 20,
            threads: 1,
        },
        &cfg,
    );
    eprintln!("{}", report.summary());
    assert!(
        report.images >= 5000.min(workloads * 100),
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
fn pool_crash_threads() {
    let cfg = DriverConfig {
        images_per_fence: 4,
        images_per_workload: 300,
        ..Default::default()
    };
    let report = run_seeds(
        Arc::new(PoolTarget::test_min()),
        100..104,
        WorkloadConfig {
            seed: 0,
            units: 12,
            threads: 2,
        },
        &cfg,
    );
    eprintln!("{}", report.summary());
    assert!(
        report.violations.is_empty(),
        "{} violations, first: {}",
        report.violations.len(),
        report.violations[0]
    );
}
