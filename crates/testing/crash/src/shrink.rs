//! Shrinking a failing workload, and running many seeds.

use crate::driver::{run_workload, DriverConfig};
use crate::workload::{Workload, WorkloadConfig};
use crate::{CrashReport, CrashTarget};
use std::sync::Arc;

/// Shrink a failing workload: drop chunks of units, then single units, while it still fails
/// (at most `attempts` reruns). Returns the smallest failing workload found.
pub fn shrink(
    target: Arc<dyn CrashTarget>,
    workload: &Workload,
    cfg: &DriverConfig,
    attempts: usize,
) -> Workload {
    let cfg = DriverConfig {
        stop_at_first: true,
        ..*cfg
    };
    let fails = |kept: &[usize]| {
        let w = Workload::with_kept(workload.config, kept);
        !run_workload(target.clone(), &w, &cfg).violations.is_empty()
    };
    let mut kept = workload.kept.clone();
    let mut runs = 0;
    let mut chunk = kept.len().div_ceil(2).max(1);
    while chunk >= 1 && runs < attempts {
        let mut start = 0;
        let mut progressed = false;
        while start < kept.len() && runs < attempts {
            let end = (start + chunk).min(kept.len());
            let candidate: Vec<usize> = kept[..start].iter().chain(&kept[end..]).copied().collect();
            runs += 1;
            if !candidate.is_empty() && fails(&candidate) {
                kept = candidate;
                progressed = true;
            } else {
                start = end;
            }
        }
        if chunk == 1 && !progressed {
            break;
        }
        if !progressed || chunk > 1 {
            chunk /= 2;
            chunk = chunk.max(1);
        }
    }
    Workload::with_kept(workload.config, &kept)
}

/// Run the workloads of `seeds` (each `template` with that seed). The first failing workload
/// is shrunk and its reproduction printed to stderr; the report counts everything.
pub fn run_seeds(
    target: Arc<dyn CrashTarget>,
    seeds: impl IntoIterator<Item = u64>,
    template: WorkloadConfig,
    cfg: &DriverConfig,
) -> CrashReport {
    let mut total = CrashReport {
        engine: target.name(),
        ..Default::default()
    };
    let mut shrunk = false;
    for seed in seeds {
        let workload = Workload::generate(WorkloadConfig { seed, ..template });
        let report = run_workload(target.clone(), &workload, cfg);
        if !report.violations.is_empty() && !shrunk {
            shrunk = true;
            eprintln!(
                "crashtest {}: seed {seed} fails: {}",
                target.name(),
                report.violations[0]
            );
            eprintln!("{}", describe_failure(target.clone(), &workload, cfg));
        }
        total.merge(report);
    }
    total
}

/// Shrink a failing workload (at most [`SHRINK_RUNS_MAX`] reruns) and describe it: the size
/// it shrank to and the one-line command that reproduces it.
pub fn describe_failure(
    target: Arc<dyn CrashTarget>,
    workload: &Workload,
    cfg: &DriverConfig,
) -> String {
    let small = shrink(target.clone(), workload, cfg, SHRINK_RUNS_MAX);
    let name = target.name();
    format!(
        "crashtest {name}: seed {} shrunk to {} of {} units; reproduce with:\n  {} {} ATOMFS_CRASH_ENGINE={name} {}",
        workload.config.seed,
        small.len(),
        workload.len(),
        small.repro_env(),
        cfg.repro_env(),
        target.repro_command(),
    )
}

/// Reruns a shrink may take.
pub const SHRINK_RUNS_MAX: usize = 200;
