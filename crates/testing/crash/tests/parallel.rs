//! The parallel runner (crash::parallel, what `atomfs crashtest --jobs/--long` uses): the
//! workloads a plan runs do not depend on the worker count, a failing plan is caught on
//! several workers and its first failure shrunk to a one-line reproduction, and the image
//! budget stops it.

use crash::fixtures::{Flaw, ShadowTarget};
use crash::{run_plan, DriverConfig, Plan, WorkloadConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn plan(workloads: u64, images: u64) -> Plan {
    Plan {
        label: "test".into(),
        workload: WorkloadConfig {
            seed: 40,
            units: 12,
            threads: 1,
        },
        driver: DriverConfig {
            images_per_fence: 6,
            images_per_workload: 120,
            ..Default::default()
        },
        workloads,
        images,
    }
}

fn target(flaw: Flaw) -> Arc<ShadowTarget> {
    Arc::new(ShadowTarget {
        flaw,
        slot_len: 256 << 10,
    })
}

#[test]
fn worker_count_does_not_change_what_runs() {
    let calls = AtomicU64::new(0);
    let progress = |_: &crash::CrashReport| {
        calls.fetch_add(1, Ordering::Relaxed);
    };
    let one = run_plan(target(Flaw::None), &plan(6, u64::MAX), 1, &progress);
    let three = run_plan(target(Flaw::None), &plan(6, u64::MAX), 3, &progress);
    for r in [&one, &three] {
        assert_eq!(r.report.workloads, 6);
        assert!(r.report.images >= 300, "images: {}", r.report.images);
        assert!(r.report.crash_points > 0 && r.report.second_recoveries > 0);
        assert!(r.report.violations.is_empty(), "{:?}", r.report.violations);
        assert!(r.repro.is_none());
    }
    assert_eq!(
        calls.load(Ordering::Relaxed),
        12,
        "one progress call per workload"
    );
}

#[test]
fn failures_are_caught_on_several_workers_and_shrunk() {
    let r = run_plan(target(Flaw::InPlace), &plan(4, u64::MAX), 2, &|_| {});
    assert!(r.report.images > 0, "no crash image was checked");
    assert!(
        !r.report.violations.is_empty(),
        "torn in-place writes went unnoticed"
    );
    let lowest = r.report.violations.iter().map(|v| v.seed).min();
    let repro = r.repro.unwrap_or_default();
    assert!(
        repro.contains(&format!("ATOMFS_CRASH_SEED={}", lowest.unwrap_or(0)))
            && repro.contains("ATOMFS_CRASH_ENGINE=fixture-inplace")
            && repro.contains("--test repro"),
        "{repro}"
    );
}

#[test]
fn image_budget_stops_the_plan() {
    let r = run_plan(target(Flaw::None), &plan(u64::MAX, 500), 2, &|_| {});
    assert!(r.report.images >= 500, "images: {}", r.report.images);
    // Workers start no workload once the budget is reached: at most one more per worker.
    assert!(
        r.report.images < 500 + 2 * 120 + 120,
        "images: {}",
        r.report.images
    );
}
