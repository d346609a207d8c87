//! The one pattern of every engine's crash suite. An engine's `tests/crash_harness.rs` is a
//! table of cases given to [`crash_tests!`](crate::crash_tests), each naming one of the
//! engine's crash targets (its `crash_target::by_name`, the names `atomfs crashtest --engine`
//! takes):
//!
//! ```ignore
//! use crash::suite::{Seeds, Sim, Torture};
//! crash::crash_tests! {
//!     targets: pool::crash_target::by_name, repro "pool";
//!     sim pool_crash_ci("pool", Sim { seeds: Seeds::Count { first: 1, workloads: 50 }, .. });
//!     caught pool_nc_mode_is_caught("pool-nc", Sim { .. });
//!     torture pool_torture("pool", Torture { seed: 5, rounds: 50, kill_after_ms_max: 60 });
//! }
//! ```
//!
//! - `sim NAME(ENGINE, Sim)`: crash images of seeded workloads on the simulator; the test fails
//!   on any violation, when fewer than `images_min` images were checked, or when a crash
//!   point went unchecked.
//! - `caught NAME(ENGINE, Sim)`: the same run must check at least one image and report
//!   violations (a target without crash consistency, which the harness has to catch).
//! - `torture NAME(ENGINE, Torture)`: SIGKILLed child processes on real files, first on fresh
//!   pools, then on one pool kept across rounds; the test fails on any violation, when fewer
//!   than 90 % of the children were killed, or when fewer recovered pools than rounds were
//!   checked. Expands to a module with the tests `parent` and `child` (the victim: the parent
//!   starts the test binary again with `--exact`).
//! - and `repro`, an ignored test that reruns one workload from the environment settings a
//!   failure prints (see [`repro`]).
//!
//! Longer runs: `ATOMFS_CRASH_WORKLOADS=N` (workloads of every `Seeds::Count` case) and
//! `ATOMFS_TORTURE_ROUNDS=N` (rounds of every torture case), e.g.
//! `ATOMFS_CRASH_WORKLOADS=2000 cargo test -p atomfs-pool --release --test crash_harness -- --nocapture`.

use crate::torture::{run_child, torture, TortureConfig};
use crate::{run_seeds, run_workload, CrashReport, CrashTarget, DriverConfig, Target};
use crate::{Workload, WorkloadConfig};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// The seeds of a case's workloads.
#[derive(Clone, Copy, Debug)]
pub enum Seeds {
    /// `first`, `first + 1`, ...: `workloads` of them, or `ATOMFS_CRASH_WORKLOADS`.
    Count { first: u64, workloads: u64 },
    /// Exactly these (regressions: the seeds that once failed).
    List(&'static [u64]),
}

/// A case on the crash simulator.
#[derive(Clone, Copy, Debug)]
pub struct Sim {
    pub seeds: Seeds,
    /// Units per workload and thread.
    pub units: usize,
    /// Threads per workload.
    pub threads: usize,
    /// Crash images checked at one fence at most.
    pub images_per_fence: u64,
    /// Crash images checked per workload at most.
    pub images_per_workload: u64,
    /// Crash images the case must check at least (scaled down with the workload count when
    /// `ATOMFS_CRASH_WORKLOADS` asks for fewer); every case checks at least one.
    pub images_min: u64,
}

/// A process-kill case.
#[derive(Clone, Copy, Debug)]
pub struct Torture {
    /// Seed of the fresh-pool rounds; the rounds on one pool use `seed + 1`.
    pub seed: u64,
    /// Rounds of each half (or `ATOMFS_TORTURE_ROUNDS`).
    pub rounds: u64,
    /// Longest time a child runs before the kill, in milliseconds.
    pub kill_after_ms_max: u64,
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v} is not a number"),
    }
}

impl Sim {
    /// The seeds to run and the images they must check at least.
    fn plan(&self) -> (Vec<u64>, u64) {
        match self.seeds {
            Seeds::List(seeds) => (seeds.to_vec(), self.images_min.max(1)),
            Seeds::Count { first, workloads } => {
                let n = env_u64("ATOMFS_CRASH_WORKLOADS").unwrap_or(workloads);
                let scaled = self.images_min.saturating_mul(n) / workloads.max(1);
                (
                    (first..first + n).collect(),
                    scaled.min(self.images_min).max(1),
                )
            }
        }
    }

    /// Run the case and return its report (for tests of a case's own counters).
    pub fn report(&self, target: Arc<dyn CrashTarget>) -> CrashReport {
        self.run(target).0
    }

    fn run(&self, target: Arc<dyn CrashTarget>) -> (CrashReport, u64) {
        let (seeds, images_min) = self.plan();
        let cfg =
            DriverConfig::default().with_images(self.images_per_fence, self.images_per_workload);
        let template = WorkloadConfig {
            seed: 0,
            units: self.units,
            threads: self.threads,
        };
        let report = run_seeds(target, seeds, template, &cfg);
        eprintln!(
            "{} (units rolled back for lack of space: {})",
            report.summary(),
            report.space_rollbacks
        );
        eprintln!("{}", report.coverage());
        let modes: Vec<String> = report
            .store_stats
            .iter()
            .filter(|(k, _)| k.starts_with("write in "))
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        if !modes.is_empty() {
            eprintln!("legacy writes by mode: {}", modes.join(", "));
        }
        (report, images_min)
    }
}

/// Run a `sim` case: no violation, and at least its minimum of crash images.
pub fn sim(target: Arc<dyn CrashTarget>, case: &Sim) {
    let (report, images_min) = case.run(target);
    assert!(
        report.images >= images_min,
        "too few crash images: {} (at least {images_min})",
        report.images
    );
    assert_eq!(
        report.crash_points,
        report.crash_points_total,
        "crash points left unchecked: {}",
        report.coverage()
    );
    if let Some(first) = report.violations.first() {
        panic!("{} violations, first: {first}", report.violations.len());
    }
}

/// Run a `caught` case: the harness must report violations.
pub fn caught(target: Arc<dyn CrashTarget>, case: &Sim) {
    let name = target.name();
    let (report, _) = case.run(target);
    assert!(report.images > 0, "no crash image was checked");
    assert!(
        !report.violations.is_empty(),
        "{name} passed the crash harness: a target without crash consistency must be caught"
    );
}

/// The torture victim, when the parent started this test binary for it (it sets
/// `ATOMFS_TORTURE_POOL` and `ATOMFS_TORTURE_SEED`); otherwise nothing.
pub fn torture_child(target: Arc<dyn Target>) {
    let (Ok(pool), Ok(seed)) = (
        std::env::var("ATOMFS_TORTURE_POOL"),
        std::env::var("ATOMFS_TORTURE_SEED"),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap_or_else(|_| panic!("bad seed {seed}"));
    if let Err(e) = run_child(target.as_ref(), Path::new(&pool), seed) {
        panic!("child: {e}");
    }
}

/// Run a `torture` case: `case.rounds` kills on fresh pools, as many on one pool kept across
/// rounds; at least 90 % of the children must have been killed, and no violation. `child_test`
/// is the path of the victim test inside this test binary (`NAME::child`).
pub fn torture_case(target: Arc<dyn Target>, case: &Torture, child_test: &str) {
    let rounds = env_u64("ATOMFS_TORTURE_ROUNDS").unwrap_or(case.rounds);
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let child = |pool: &Path, seed: u64| {
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env("ATOMFS_TORTURE_POOL", pool)
            .env("ATOMFS_TORTURE_SEED", seed.to_string());
        cmd
    };
    let cfg = TortureConfig {
        seed: case.seed,
        rounds,
        dir: pmem::mapped::scratch_dir(),
        kill_after_ms_max: case.kill_after_ms_max,
        ..Default::default()
    };
    let fresh = torture(target.as_ref(), &child, &cfg);
    eprintln!("{}", fresh.summary());
    let shared = TortureConfig {
        continue_pool: true,
        seed: case.seed + 1,
        ..cfg
    };
    let again = torture(target.as_ref(), &child, &shared);
    eprintln!("{} (one pool across rounds)", again.summary());
    // Violations first: a child that stops on a divergence is not killed.
    for (what, report) in [("fresh pools", &fresh), ("one pool", &again)] {
        if let Some(first) = report.violations.first() {
            panic!(
                "{what}: {} violations, first: {first}",
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
    // A round killed while it was still creating its pool has nothing to check; most are not.
    assert!(
        fresh.images + again.images >= rounds,
        "too few recovered pools checked: {} + {} of {} rounds",
        fresh.images,
        again.images,
        2 * rounds
    );
}

/// The path of test `leaf` in the module `module` (a `module_path!()`: the test binary's crate
/// name first, which `--exact` filters do not include).
pub fn test_path(module: &str, leaf: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{leaf}"),
        None => leaf.to_string(),
    }
}

/// Rerun one workload from the settings a failure prints:
///
/// ```text
/// ATOMFS_CRASH_ENGINE=NAME ATOMFS_CRASH_SEED=3 ATOMFS_CRASH_UNITS=16 ATOMFS_CRASH_THREADS=1
///   [ATOMFS_CRASH_KEEP=2,5,9] [ATOMFS_CRASH_IMAGES=N] [ATOMFS_CRASH_IMAGES_PER_FENCE=N]
///   [ATOMFS_CRASH_RECOVERY_EVERY=N] [ATOMFS_CRASH_RECOVERY_IMAGES=N] [ATOMFS_CRASH_SAMPLE_SEED=N]  <the target's repro_command>
/// ```
///
/// `lookup` gives the target of a name; `default_engine` is used when ATOMFS_CRASH_ENGINE is
/// not set. Panics (fails the test) on a violation.
pub fn repro(lookup: &dyn Fn(&str) -> Option<Arc<dyn CrashTarget>>, default_engine: &str) {
    let engine = std::env::var("ATOMFS_CRASH_ENGINE").unwrap_or_else(|_| default_engine.into());
    let target = lookup(&engine).unwrap_or_else(|| panic!("unknown engine {engine}"));
    let config = WorkloadConfig {
        seed: env_u64("ATOMFS_CRASH_SEED").unwrap_or(1),
        units: env_u64("ATOMFS_CRASH_UNITS").unwrap_or(16) as usize,
        threads: env_u64("ATOMFS_CRASH_THREADS").unwrap_or(1) as usize,
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
        images_per_workload: env_u64("ATOMFS_CRASH_IMAGES").unwrap_or(d.images_per_workload),
        images_per_fence: env_u64("ATOMFS_CRASH_IMAGES_PER_FENCE").unwrap_or(d.images_per_fence),
        recovery_crash_every: env_u64("ATOMFS_CRASH_RECOVERY_EVERY")
            .unwrap_or(d.recovery_crash_every),
        recovery_images_per_workload: env_u64("ATOMFS_CRASH_RECOVERY_IMAGES")
            .unwrap_or(d.recovery_images_per_workload),
        sample_seed: env_u64("ATOMFS_CRASH_SAMPLE_SEED").unwrap_or(d.sample_seed),
        ..d
    };
    eprintln!(
        "workload: {} units: {:#?}",
        workload.len(),
        workload.threads
    );
    let report = run_workload(target, &workload, &cfg);
    for v in &report.violations {
        eprintln!("violation: {v}");
    }
    eprintln!("{}", report.summary());
    assert!(report.images > 0, "no crash image was checked");
    if let Some(first) = report.violations.first() {
        panic!("{} violations, first: {first}", report.violations.len());
    }
}

/// Expands an engine's table of crash cases into tests (see the [module](self) documentation):
/// `targets: BY_NAME, repro "DEFAULT";` then `sim`, `caught` and `torture` lines.
/// `BY_NAME(&str) -> Option<T>` is the engine's lookup of its targets (`T: Target`).
#[macro_export]
macro_rules! crash_tests {
    (targets: $by_name:path, repro $default:literal; $($cases:tt)*) => {
        /// The engine's crash target `name` (a name of the table must be known).
        fn crash_target(name: &str) -> ::std::sync::Arc<dyn $crate::Target> {
            match $by_name(name) {
                Some(t) => ::std::sync::Arc::new(t),
                None => panic!("no crash target {name}"),
            }
        }

        #[test]
        #[ignore = "reproduces one workload: set ATOMFS_CRASH_ENGINE, ATOMFS_CRASH_SEED, ..."]
        fn repro() {
            $crate::suite::repro(
                &|name| $by_name(name).map(|t| ::std::sync::Arc::new(t) as _),
                $default,
            );
        }

        $crate::crash_tests!(@cases $($cases)*);
    };
    (@cases) => {};
    (@cases sim $name:ident($engine:expr, $case:expr); $($rest:tt)*) => {
        #[test]
        fn $name() {
            $crate::suite::sim(crash_target($engine), &$case);
        }
        $crate::crash_tests!(@cases $($rest)*);
    };
    (@cases caught $name:ident($engine:expr, $case:expr); $($rest:tt)*) => {
        #[test]
        fn $name() {
            $crate::suite::caught(crash_target($engine), &$case);
        }
        $crate::crash_tests!(@cases $($rest)*);
    };
    (@cases torture $name:ident($engine:expr, $case:expr); $($rest:tt)*) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn parent() {
                let child = $crate::suite::test_path(module_path!(), "child");
                $crate::suite::torture_case(super::crash_target($engine), &$case, &child);
            }

            /// The victim of `parent` (does nothing unless started by it).
            #[test]
            fn child() {
                $crate::suite::torture_child(super::crash_target($engine));
            }
        }
        $crate::crash_tests!(@cases $($rest)*);
    };
}
