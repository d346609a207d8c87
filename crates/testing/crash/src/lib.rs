//! `crash` — the crash harness of atomfs, generic over the Store API and the crash-simulator
//! region [`pmem::SimRegion`].
//!
//! - [`CrashTarget`]: what an engine implements (format and recover a store on a simulated
//!   region).
//! - [`workload`]: seeded, reproducible workloads (transactions, legacy calls, O_ATOMIC
//!   commits over a few files and directories, optionally on several threads).
//! - [`driver`]: runs a workload, checks crash images at every fence against the oracle
//!   ([`conformance::ModelStore`]), crashes recovery itself, shrinks failures and prints a
//!   one-line reproduction.
//! - [`parallel`]: workloads on several worker threads (deterministic per-workload seeds) and
//!   torture rounds in parallel streams, with progress callbacks (the CLI's `--long` mode).
//! - [`torture`]: the process-kill driver (a child on a real mapped pool, SIGKILLed at random).
//! - [`fixtures`]: small stores used only by this crate's own tests to prove the harness
//!   reports violations for broken stores and none for a correct one.
//! - [`suite`]: the one pattern every engine's `tests/crash_harness.rs` follows: a table of
//!   cases ([`crash_tests!`]) run against the engine's targets, looked up by name.
//!
//! This crate names no engine: each engine implements [`CrashTarget`] and
//! [`torture::KillTarget`] in its own crate (module `crash_target`, behind its `crash-target`
//! feature), and the `atomfs-crashtest` tool (crates/crashtest) links those targets.
//!
//! See docs/crash-harness.md for what is checked and how to reproduce a failure.

#![forbid(unsafe_code)]

pub mod driver;
pub mod fixtures;
mod images;
pub mod meta;
mod oracle;
pub mod parallel;
mod posix_ops;
pub mod shrink;
pub mod suite;
pub mod torture;
pub mod workload;

pub use driver::{run_workload, DriverConfig};
pub use parallel::{default_jobs, run_plan, Plan, PlanResult};
pub use shrink::{describe_failure, run_seeds, shrink};
pub use workload::{Workload, WorkloadConfig};

use pmem::SimRegion;
use std::fmt;
use std::sync::Arc;
use store::{Result, Store};

/// An engine as the crash harness sees it.
pub trait CrashTarget: Send + Sync + 'static {
    /// Engine name (with its mode), as printed in the summary line.
    fn name(&self) -> String;
    /// Size of the simulated region to format.
    fn region_len(&self) -> u64;
    /// Format an empty store on `region`.
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>>;
    /// Open the store on `region` (a crash image), running recovery.
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>>;
    /// The command that reruns one workload of this target from the environment settings a
    /// failure prints (see [`suite::repro`]): the fixtures' `tests/repro.rs` here; an engine
    /// names the `repro` test of its own `tests/crash_harness.rs`.
    fn repro_command(&self) -> String {
        "cargo test -p atomfs-crash --test repro -- --nocapture".into()
    }
    /// Whether the target keeps file times durable: an acknowledged change's mtime and ctime
    /// must then survive a crash (the oracle compares them). Sizes, permissions and link
    /// counts are compared for every target.
    fn durable_times(&self) -> bool {
        true
    }
    /// Whether file times are part of each unit's atomicity (logged with the unit that
    /// changes them, as the pool's are): a recovered store showing a known state (before a
    /// unit, or after an acknowledged one) must then show exactly its times, not merely times
    /// at least as new. Only with [`CrashTarget::durable_times`].
    fn atomic_times(&self) -> bool {
        false
    }
    /// The mode an open file of `store` is in (e.g. its logging policy), if the engine has
    /// such modes: the driver counts, for each legacy write through a handle kept open, the
    /// mode the file was in (`CrashReport::store_stats`, key `write in MODE`), so a run shows
    /// which modes it reached.
    fn handle_mode(&self, _store: &dyn Store, _fh: store::Fh) -> Option<String> {
        None
    }
    /// The steps beyond files and directories its workloads run (hard links, attribute
    /// changes, the POSIX families the engine offers).
    fn posix_steps(&self) -> workload::PosixSteps {
        workload::PosixSteps::of_engine(&self.name())
    }
}

/// An engine both on the simulator and on real files: what `atomfs crashtest --engine` and
/// the torture cases of [`crash_tests!`] run.
pub trait Target: CrashTarget + torture::KillTarget {}

impl<T: CrashTarget + torture::KillTarget> Target for T {}

/// One broken guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub engine: String,
    /// Seed of the workload.
    pub seed: u64,
    /// Unit (per thread) that was running, when known.
    pub unit: Option<usize>,
    /// Where: the crash point and image, or the thread.
    pub at: String,
    /// What is wrong.
    pub what: String,
    /// Environment settings reproducing the workload (see [`Workload::repro_env`]).
    pub repro: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} seed {}", self.engine, self.seed)?;
        if let Some(unit) = self.unit {
            write!(f, " unit {unit}")?;
        }
        write!(
            f,
            " at {}: {} [reproduce: {}]",
            self.at, self.what, self.repro
        )
    }
}

/// Counts of a crash-test run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    pub engine: String,
    pub workloads: u64,
    /// Crash images recovered and checked (including images of crashed recoveries).
    pub images: u64,
    /// Crash points (fences, and the end of a workload) whose images were checked.
    pub crash_points: u64,
    /// Crash points the workloads went through (checked or not): `crash_points` of them were
    /// checked.
    pub crash_points_total: u64,
    /// Of `crash_points`: points whose every crash state was checked.
    pub exhaustive_points: u64,
    /// Of `images`: images of a crashed recovery (recoveries of recoveries).
    pub nested_images: u64,
    /// Second recoveries of a recovered image (the idempotence check).
    pub second_recoveries: u64,
    /// Child processes killed (process torture).
    pub kills: u64,
    /// Units the store rejected for lack of space (NoSpace/LogFull) and rolled back: they
    /// check atomicity of the rollback only, so a high share weakens the run.
    pub space_rollbacks: u64,
    /// The store's own counters ([`store::Store::stats`]) at the end of each workload, summed
    /// (e.g. mmio's `policy_switches`: whether a hybrid run reached redo).
    pub store_stats: std::collections::BTreeMap<String, u64>,
    pub violations: Vec<Violation>,
}

impl CrashReport {
    /// `crashtest ENGINE: workloads W, crash images I, kills K, violations V`.
    pub fn summary(&self) -> String {
        format!(
            "crashtest {}: workloads {}, crash images {}, kills {}, violations {}",
            self.engine,
            self.workloads,
            self.images,
            self.kills,
            self.violations.len()
        )
    }

    /// `crash points checked C of T (P %), exhaustively E, images per checked point I`: how
    /// much of the run's crash points the images covered.
    pub fn coverage(&self) -> String {
        let top = self.images.saturating_sub(self.nested_images);
        format!(
            "crash points checked {} of {} ({:.1} %), exhaustively {}, images per checked point {:.1}, images of crashed recoveries {}",
            self.crash_points,
            self.crash_points_total,
            percent(self.crash_points, self.crash_points_total),
            self.exhaustive_points,
            top as f64 / self.crash_points.max(1) as f64,
            self.nested_images
        )
    }

    /// Add another run's counts.
    pub fn merge(&mut self, other: CrashReport) {
        if self.engine.is_empty() {
            self.engine = other.engine;
        }
        self.workloads += other.workloads;
        self.images += other.images;
        self.crash_points += other.crash_points;
        self.crash_points_total += other.crash_points_total;
        self.exhaustive_points += other.exhaustive_points;
        self.nested_images += other.nested_images;
        self.second_recoveries += other.second_recoveries;
        self.kills += other.kills;
        self.space_rollbacks += other.space_rollbacks;
        for (name, value) in other.store_stats {
            *self.store_stats.entry(name).or_default() += value;
        }
        self.violations.extend(other.violations);
    }
}

/// `part` of `whole` in percent (100 when `whole` is 0: nothing was missed).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
