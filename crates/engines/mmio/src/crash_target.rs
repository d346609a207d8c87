//! The `mmio` engine (Libnvmmio) as a target of the crash harness (crates/testing/crash),
//! built with the `crash-target` feature only: on the simulator the log pool and the
//! simulated host directory (namespace + file extents, [`mmio::SimMedia`]) share one
//! [`SimRegion`], so region images are whole-system crash images ([`CrashTarget`]); for
//! process kills, a real directory of host files plus a mapped log pool file ([`KillTarget`]).
//! The geometry is the one of the engine's own crash test (tests/crash.rs).

use crate::{MmioConfig, MmioStore, PolicyMode, SimMedia, Window};
use crash::torture::KillTarget;
use crash::CrashTarget;
use pmem::SimRegion;
use std::path::Path;
use std::sync::Arc;
use store::{Error, Result, Store};

/// Bytes of one simulated host file at most.
pub const FILE_CAPACITY: u64 = 128 << 10;
/// Simulated host files at most.
pub const EXTENTS: u32 = 32;

/// The mmio engine with a logging policy.
#[derive(Clone, Debug)]
pub struct MmioTarget {
    pub config: MmioConfig,
}

impl MmioTarget {
    /// `MmioConfig::test_min()` with room for the harness's workloads, in `mode`.
    pub fn new(mode: PolicyMode) -> Self {
        MmioTarget {
            config: MmioConfig {
                policy_mode: mode,
                files_max: 32,
                index_entries_max: 256,
                intents_max: 64,
                tx_files_max: crate::layout::TX_FILES_MAX,
                ..MmioConfig::test_min()
            },
        }
    }

    /// "mmio" (hybrid here; every policy of [`MODES`] for `atomfs crashtest`), "mmio-hybrid",
    /// "mmio-undo", "mmio-redo".
    pub fn by_name(name: &str) -> Option<Self> {
        let mode = match name {
            "mmio" | "mmio-hybrid" => PolicyMode::Hybrid,
            "mmio-undo" => PolicyMode::Undo,
            "mmio-redo" => PolicyMode::Redo,
            _ => return None,
        };
        Some(Self::new(mode))
    }
}

fn io(path: &Path, op: &'static str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source: e,
    }
}

impl CrashTarget for MmioTarget {
    fn name(&self) -> String {
        format!("mmio-{:?}", self.config.policy_mode).to_lowercase()
    }
    fn region_len(&self) -> u64 {
        self.config.log_pool_len + SimMedia::area_len(FILE_CAPACITY, EXTENTS)
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let len = self.config.log_pool_len;
        let media = SimMedia::new(region.clone(), len, FILE_CAPACITY, EXTENTS);
        let pool = Window::new(region, 0, len);
        Ok(Box::new(MmioStore::create_on(pool, media, &self.config)?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let len = self.config.log_pool_len;
        let media = SimMedia::open(region.clone(), len, FILE_CAPACITY, EXTENTS)
            .map_err(|e| Error::corrupt(format!("simulated namespace: {e}"), len))?;
        let pool = Window::new(region, 0, len);
        Ok(Box::new(MmioStore::open_on(pool, media, &self.config)?))
    }
    fn repro_command(&self) -> String {
        REPRO_COMMAND.into()
    }
    /// The logging policy (undo or redo) of the open file's current epoch.
    fn handle_mode(&self, store: &dyn Store, fh: store::Fh) -> Option<String> {
        let s = store
            .as_any()
            .downcast_ref::<MmioStore<Window<SimRegion>, SimMedia>>()?;
        let policy = s.file_policy(fh).ok()?;
        Some(format!("{policy:?}").to_lowercase())
    }
}

/// Reruns one workload from a failure's settings (the ignored `repro` test of
/// tests/crash_harness.rs).
pub const REPRO_COMMAND: &str =
    "cargo test -p atomfs-mmio --test crash_harness -- --ignored --exact repro --nocapture";

/// The names [`MmioTarget::by_name`] takes.
pub const NAMES: &str = "mmio (every policy), mmio-hybrid, mmio-undo, mmio-redo";

/// The policies `atomfs crashtest --engine mmio` runs.
pub const MODES: &[&str] = &["mmio-hybrid", "mmio-undo", "mmio-redo"];

/// On real files the "pool" of a torture round is a directory: `files/` (the host files) and
/// `log.pool` (the mapped log pool).
impl KillTarget for MmioTarget {
    fn name(&self) -> String {
        CrashTarget::name(self)
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let files = path.join("files");
        std::fs::create_dir_all(&files).map_err(|e| io(&files, "create directory", e))?;
        Ok(Box::new(MmioStore::create(
            &files,
            &path.join("log.pool"),
            &self.config,
        )?))
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        Ok(Box::new(MmioStore::open(
            &path.join("files"),
            &path.join("log.pool"),
            &self.config,
        )?))
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
    }
}
