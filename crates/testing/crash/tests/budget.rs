//! Budgets over the whole run: every crash point of a workload gets at least one image, the
//! rest of the budget is spread over all of them (a dry run counts them first), and images of
//! crashed recoveries have a budget of their own. Before, a workload that had spent its
//! budget skipped every later fence (only 10 % of the pool CI test's crash points were
//! checked), so a bug that shows late in a workload went unnoticed.

use crash::fixtures::{Flaw, ShadowTarget};
use crash::{run_seeds, run_workload, DriverConfig, Workload, WorkloadConfig};
use std::sync::Arc;

fn workload(seed: u64) -> Workload {
    Workload::generate(WorkloadConfig {
        seed,
        units: 24,
        threads: 1,
    })
}

/// A budget far below the number of crash points.
fn small() -> DriverConfig {
    DriverConfig {
        images_per_fence: 8,
        images_per_workload: 10,
        recovery_images_per_workload: 5,
        ..Default::default()
    }
}

#[test]
fn every_crash_point_gets_an_image() {
    let target = Arc::new(ShadowTarget::new(Flaw::None));
    let report = run_workload(target, &workload(3), &small());
    eprintln!("{}\n{}", report.summary(), report.coverage());
    assert!(
        report.crash_points_total > 20,
        "the workload has too few crash points to test the budget: {}",
        report.crash_points_total
    );
    assert_eq!(
        report.crash_points, report.crash_points_total,
        "crash points left unchecked"
    );
    assert!(
        report.images >= report.crash_points_total,
        "fewer images than crash points: {}",
        report.coverage()
    );
    assert!(report.violations.is_empty(), "{}", report.violations[0]);
}

#[test]
fn a_generous_budget_is_spread_up_to_the_per_point_limit() {
    let target = Arc::new(ShadowTarget::new(Flaw::None));
    let cfg = DriverConfig {
        images_per_workload: 100_000,
        ..small()
    };
    let report = run_workload(target, &workload(4), &cfg);
    let top = report.images - report.nested_images;
    assert_eq!(report.crash_points, report.crash_points_total);
    assert!(
        top > 3 * report.crash_points,
        "a generous budget must check several images per point: {}",
        report.coverage()
    );
    assert!(report.exhaustive_points > 0, "{}", report.coverage());
}

#[test]
fn crashed_recoveries_have_their_own_budget() {
    let target = Arc::new(ShadowTarget::new(Flaw::None));
    let cfg = DriverConfig {
        recovery_crash_every: 1,
        ..small()
    };
    let report = run_workload(target, &workload(5), &cfg);
    eprintln!("{}", report.coverage());
    assert!(report.nested_images > 0, "no crashed recovery was checked");
    assert!(
        report.nested_images <= cfg.recovery_images_per_workload,
        "images of crashed recoveries over their budget: {}",
        report.nested_images
    );
    assert_eq!(
        report.crash_points, report.crash_points_total,
        "images of crashed recoveries took the workload's budget"
    );
}

#[test]
fn a_flaw_late_in_the_workload_is_caught_on_a_small_budget() {
    let report = run_seeds(
        Arc::new(ShadowTarget::new(Flaw::LateNoFenceBeforeCommit)),
        1..4,
        WorkloadConfig {
            seed: 0,
            units: 24,
            threads: 1,
        },
        &small(),
    );
    eprintln!("{}\n{}", report.summary(), report.coverage());
    assert!(report.images >= 40, "too few images: {}", report.summary());
    assert!(
        !report.violations.is_empty(),
        "a missing fence late in the workload went unnoticed"
    );
}
