//! The `pool` engine (FCFS) as a target of the crash harness (crates/testing/crash): on the
//! simulator ([`CrashTarget`]) and on a mapped pool file ([`KillTarget`]). Built with the
//! `crash-target` feature only; tests/crash_harness.rs and the atomfs-crashtest tool use it.

use crate::{Mode, PoolConfig, PoolStore};
use crash::torture::KillTarget;
use crash::CrashTarget;
use pmem::{MappedRegion, SimRegion};
use std::path::Path;
use std::sync::Arc;
use store::{Error, Result, Store};

/// The pool engine with a configuration and a region size.
#[derive(Clone, Debug)]
pub struct PoolTarget {
    pub config: PoolConfig,
    pub region_len: u64,
    /// Whether the oracle compares file times ([`CrashTarget::durable_times`]): on in every
    /// target built here. (It caught an acknowledged mtime going back after a crash, see
    /// `pool_acknowledged_times_survive` in tests/crash_harness.rs.)
    pub check_times: bool,
}

impl PoolTarget {
    /// `PoolConfig::test_min()` on a 4 MiB region: small logs and block counts (so that
    /// workloads reach full logs and pools), small crash images. Open files and open
    /// transactions are raised to what the workloads can hold at once: every thread may
    /// keep all its files open, each with an O_ATOMIC implicit transaction (3 threads × 6
    /// files overran test_min's 4 transactions, a limit the model does not have).
    pub fn test_min() -> Self {
        PoolTarget {
            config: PoolConfig {
                open_transactions_max: 64,
                open_files_max: 64,
                ..PoolConfig::test_min()
            },
            region_len: 4 << 20,
            check_times: true,
        }
    }

    /// The target named `name` as printed by [`CrashTarget::name`] ("pool-fcfs", "pool-nc",
    /// "pool-fgwal", ...; "pool" alone is FCFS here, every mode of [`MODES`] for `atomfs
    /// crashtest`), on the test_min configuration.
    pub fn by_name(name: &str) -> Option<Self> {
        let mode = if name == "pool" {
            Mode::Fcfs
        } else {
            Mode::ALL
                .into_iter()
                .find(|m| format!("pool-{m:?}").to_lowercase() == name)?
        };
        let mut target = Self::test_min();
        target.config = target.config.with_mode(mode);
        Some(target)
    }
}

fn pm(e: pmem::PmError) -> Error {
    Error::Io {
        path: e.to_string(),
        op: "map pool",
        source: std::io::Error::other(e.to_string()),
    }
}

impl CrashTarget for PoolTarget {
    fn name(&self) -> String {
        format!("pool-{:?}", self.config.mode).to_lowercase()
    }
    fn region_len(&self) -> u64 {
        self.region_len
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        Ok(Box::new(PoolStore::format(region, &self.config)?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        Ok(Box::new(PoolStore::open(region, &self.config)?))
    }
    fn repro_command(&self) -> String {
        REPRO_COMMAND.into()
    }
    fn durable_times(&self) -> bool {
        self.check_times
    }
    /// Times are undo-logged (or redone from the log) with the unit that changes them: a
    /// recovered state shows exactly its times.
    fn atomic_times(&self) -> bool {
        self.check_times
    }
}

/// Reruns one workload from a failure's settings (the ignored `repro` test of
/// tests/crash_harness.rs).
pub const REPRO_COMMAND: &str =
    "cargo test -p atomfs-pool --test crash_harness -- --ignored --exact repro --nocapture";

/// The names [`PoolTarget::by_name`] takes.
pub const NAMES: &str =
    "pool (every mode but NC), pool-fcfs, pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync";

/// The modes `atomfs crashtest --engine pool` runs: every crash-consistent mode. NC (no
/// consistency) is the baseline the harness must catch (the `caught` case of
/// tests/crash_harness.rs), so a default run leaves it out; `--engine pool-nc` runs it.
pub const MODES: &[&str] = &[
    "pool-fcfs",
    "pool-fgwal",
    "pool-scsp",
    "pool-soc",
    "pool-sync",
];

impl KillTarget for PoolTarget {
    fn name(&self) -> String {
        CrashTarget::name(self)
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let region = Arc::new(MappedRegion::create(path, self.region_len).map_err(pm)?);
        Ok(Box::new(PoolStore::format(region, &self.config)?))
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let region = Arc::new(MappedRegion::open(path).map_err(pm)?);
        Ok(Box::new(PoolStore::open(region, &self.config)?))
    }
}
