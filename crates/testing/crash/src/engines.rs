//! The engines the harness knows by name (the CLI's `atomfs crashtest --engine`, the
//! reproduction test): on the simulator and on real files.

use crate::torture::KillTarget;
use crate::CrashTarget;
use std::sync::Arc;

/// Engine names, as `--engine` takes them.
pub const ENGINES: &str = "pool (= pool-fcfs), pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync, mmio (= mmio-hybrid), mmio-undo, mmio-redo";

/// An engine both on the simulator and on real files.
pub trait Engine: CrashTarget + KillTarget {}

impl<T: CrashTarget + KillTarget> Engine for T {}

/// The engine called `name`, when this build knows it (cargo features `pool`, `mmio`).
pub fn by_name(name: &str) -> Option<Arc<dyn Engine>> {
    #[cfg(feature = "pool")]
    if let Some(t) = crate::pool_target::PoolTarget::by_name(name) {
        return Some(Arc::new(t));
    }
    #[cfg(feature = "mmio")]
    if let Some(t) = crate::mmio_target::MmioTarget::by_name(name) {
        return Some(Arc::new(t));
    }
    let _ = name;
    None
}

/// The engine `name` on the crash simulator.
pub fn sim_target(name: &str) -> Option<Arc<dyn CrashTarget>> {
    by_name(name).map(|e| e as Arc<dyn CrashTarget>)
}

/// The engine `name` on real files, for process kills.
pub fn kill_target(name: &str) -> Option<Arc<dyn KillTarget>> {
    by_name(name).map(|e| e as Arc<dyn KillTarget>)
}
