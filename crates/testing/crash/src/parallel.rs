//! Many workloads on several worker threads, and many torture rounds in parallel streams.
//!
//! Workload `i` of a [`Plan`] always has the seed `plan.workload.seed + i`, whichever worker
//! runs it and whatever the worker count, so a failure reproduces from its seed alone. Workers
//! take the next index from a shared counter and stop when the plan's workload count is
//! reached or when the images checked so far reach its image budget (the workloads already
//! running then finish, so the budget is exceeded by less than `jobs` workloads).

use crate::driver::{run_workload, DriverConfig};
use crate::shrink::describe_failure;
use crate::torture::{torture_observed, KillTarget, TortureConfig};
use crate::workload::{Workload, WorkloadConfig};
use crate::{CrashReport, CrashTarget};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One kind of workload and how much of it to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Name of the kind, as printed in summary tables.
    pub label: String,
    /// The workload template; workload `i` uses seed `workload.seed + i`.
    pub workload: WorkloadConfig,
    pub driver: DriverConfig,
    /// Workloads to run at most (`u64::MAX`: no limit).
    pub workloads: u64,
    /// Start no new workload once this many crash images are checked (`u64::MAX`: no limit).
    pub images: u64,
}

/// What a plan (or a torture run) did.
#[derive(Clone, Debug, Default)]
pub struct PlanResult {
    pub label: String,
    pub report: CrashReport,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// For a failing plan: the first failure, shrunk, and its one-line reproduction.
    pub repro: Option<String>,
}

/// Progress callback: the counts so far (called after each workload or torture round).
pub type Progress<'a> = &'a (dyn Fn(&CrashReport) + Sync);

/// The number of workers to use by default: the number of cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run `plan` on `jobs` worker threads. The failing workload with the lowest seed is shrunk
/// and described in [`PlanResult::repro`].
pub fn run_plan(
    target: Arc<dyn CrashTarget>,
    plan: &Plan,
    jobs: usize,
    progress: Progress<'_>,
) -> PlanResult {
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let total = Mutex::new(CrashReport {
        engine: target.name(),
        ..Default::default()
    });
    let lock = || total.lock().unwrap_or_else(|p| p.into_inner());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                if lock().images >= plan.images {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= plan.workloads {
                    return;
                }
                let config = WorkloadConfig {
                    seed: plan.workload.seed.wrapping_add(i),
                    ..plan.workload
                };
                let report =
                    run_workload(target.clone(), &Workload::generate(config), &plan.driver);
                let mut sum = lock();
                sum.merge(report);
                progress(&sum);
            });
        }
    });
    let report = total.into_inner().unwrap_or_else(|p| p.into_inner());
    let elapsed = started.elapsed();
    let repro = report.violations.iter().map(|v| v.seed).min().map(|seed| {
        let workload = Workload::generate(WorkloadConfig {
            seed,
            ..plan.workload
        });
        describe_failure(target, &workload, &plan.driver)
    });
    PlanResult {
        label: plan.label.clone(),
        report,
        elapsed,
        repro,
    }
}

/// The torture child command for a pool path and a seed (see [`crate::torture`]).
pub type ChildCommand<'a> = &'a (dyn Fn(&Path, u64) -> Command + Sync);

/// Run `streams` torture runs of `rounds_each` rounds, `jobs` at a time: stream `k` uses seed
/// `template.seed + k`, and the odd streams keep one pool across their rounds
/// ([`TortureConfig::continue_pool`], so kills also land inside recovery).
pub fn torture_streams(
    target: &dyn KillTarget,
    child: ChildCommand<'_>,
    template: &TortureConfig,
    streams: u64,
    jobs: usize,
    progress: Progress<'_>,
) -> PlanResult {
    let started = Instant::now();
    let rounds_total = template.rounds;
    let next = AtomicU64::new(0);
    let total = Mutex::new(CrashReport {
        engine: target.name(),
        ..Default::default()
    });
    let lock = || total.lock().unwrap_or_else(|p| p.into_inner());
    let streams = streams.clamp(1, rounds_total.max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= streams {
                    return;
                }
                // Rounds spread evenly: the first `rounds_total % streams` streams get one more.
                let rounds = rounds_total / streams + u64::from(k < rounds_total % streams);
                let cfg = TortureConfig {
                    seed: template.seed.wrapping_add(k),
                    rounds,
                    continue_pool: k % 2 == 1,
                    ..template.clone()
                };
                let mut before = CrashReport::default();
                let report = torture_observed(target, child, &cfg, &mut |now: &CrashReport| {
                    let mut sum = lock();
                    sum.kills += now.kills - before.kills;
                    sum.workloads += now.workloads - before.workloads;
                    sum.images += now.images - before.images;
                    before.clone_from(now);
                    progress(&sum);
                });
                let mut sum = lock();
                sum.violations.extend(report.violations);
            });
        }
    });
    let report = total.into_inner().unwrap_or_else(|p| p.into_inner());
    PlanResult {
        label: "process kills".into(),
        report,
        elapsed: started.elapsed(),
        repro: None,
    }
}
