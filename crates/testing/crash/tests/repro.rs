//! Reproduce one crash-test workload from the settings a failure prints:
//!
//! ```text
//! ATOMFS_CRASH_ENGINE=fixture-lazy ATOMFS_CRASH_SEED=3 ATOMFS_CRASH_UNITS=16 \
//!   ATOMFS_CRASH_THREADS=1 [ATOMFS_CRASH_KEEP=2,5,9] [ATOMFS_CRASH_IMAGES=N] \
//!   [ATOMFS_CRASH_IMAGES_PER_FENCE=N] [ATOMFS_CRASH_RECOVERY_EVERY=N] [ATOMFS_CRASH_SAMPLE_SEED=N] \
//!   cargo test -p atomfs-crash --test repro -- --nocapture
//! ```
//!
//! Engines: the fixtures (fixture-shadow, fixture-inplace, fixture-nofence, fixture-lazy),
//! `pool` (FCFS) and `pool-<mode>` (pool-fgwal, pool-nc, ...), and with `--features mmio`
//! `mmio`, `mmio-undo`, `mmio-redo` (see `crash::engines`). Without ATOMFS_CRASH_SEED the test runs fixture-shadow with
//! seed 1 (so it is part of the normal suite and checks that a clean run reports nothing).

use crash::fixtures::{flaw_by_name, ShadowTarget};
use crash::{run_workload, CrashTarget, DriverConfig, Workload, WorkloadConfig};
use std::sync::Arc;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

fn target(name: &str) -> Arc<dyn CrashTarget> {
    if let Some(flaw) = flaw_by_name(name) {
        return Arc::new(ShadowTarget::new(flaw));
    }
    crash::engines::sim_target(name).unwrap_or_else(|| {
        panic!(
            "unknown engine {name}: fixture-shadow, fixture-inplace, fixture-nofence, fixture-lazy, {} (mmio ones with --features mmio)",
            crash::engines::ENGINES
        )
    })
}

#[test]
fn repro() {
    let engine = std::env::var("ATOMFS_CRASH_ENGINE").unwrap_or_else(|_| "fixture-shadow".into());
    let config = WorkloadConfig {
        seed: env_u64("ATOMFS_CRASH_SEED", 1),
        units: env_u64("ATOMFS_CRASH_UNITS", 16) as usize,
        threads: env_u64("ATOMFS_CRASH_THREADS", 1) as usize,
    };
    let workload = match std::env::var("ATOMFS_CRASH_KEEP") {
        Ok(keep) => {
            let kept: Vec<usize> = keep
                .split(',')
                .map(|k| k.trim().parse().unwrap_or_else(|_| panic!("bad KEEP {k}")))
                .collect();
            Workload::with_kept(config, &kept)
        }
        Err(_) => Workload::generate(config),
    };
    let d = DriverConfig::default();
    let cfg = DriverConfig {
        images_per_workload: env_u64("ATOMFS_CRASH_IMAGES", d.images_per_workload),
        images_per_fence: env_u64("ATOMFS_CRASH_IMAGES_PER_FENCE", d.images_per_fence),
        recovery_crash_every: env_u64("ATOMFS_CRASH_RECOVERY_EVERY", d.recovery_crash_every),
        sample_seed: env_u64("ATOMFS_CRASH_SAMPLE_SEED", d.sample_seed),
        ..d
    };
    eprintln!(
        "workload: {} units: {:#?}",
        workload.len(),
        workload.threads
    );
    let report = run_workload(target(&engine), &workload, &cfg);
    for v in &report.violations {
        eprintln!("violation: {v}");
    }
    eprintln!("{}", report.summary());
    assert!(report.images > 0, "no crash image was checked");
    assert!(
        report.violations.is_empty(),
        "{} violations, first: {}",
        report.violations.len(),
        report.violations[0]
    );
}
