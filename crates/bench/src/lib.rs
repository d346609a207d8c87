//! `atomfs-bench`: reproduces the seeds' evaluations on this machine, each figure against
//! its baselines in one run (DESIGN.md §6). Every system is an adapter over
//! [`TwoFileUpdate`]; one fixed-seed [`workload::Generator`] drives them all; runs of a
//! figure's systems are interleaved round-robin and repeated; results go to
//! `DIR/results.json`, a ratio table on stdout and one PNG per figure.
//!
//! Competitor baselines (PMDK, ext4 protocols) live only here, never in the library's
//! dependency tree (CONVENTIONS.md §1). See docs/bench.md.

pub mod error;
pub mod flush;
pub mod machine;
pub mod plot;
pub mod ramdisk;
pub mod report;
pub mod runner;
pub mod suites;
pub mod system;
pub mod systems;
pub mod workload;

pub use error::{BenchError, Result};
pub use system::TwoFileUpdate;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SCRATCH_SEQ: AtomicU64 = AtomicU64::new(0);

/// True once SIGINT or SIGTERM arrived (see [`install_interrupt_handler`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Turn SIGINT/SIGTERM into a flag the runner checks between transactions, so that the run
/// stops with [`BenchError::Interrupted`] and every system cleans up (unmounts the RAM disk,
/// deletes its pool) on the way out.
pub fn install_interrupt_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing an async-signal-safe handler (it only stores to an atomic).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Where pools, mappings and images go: `ATOMFS_BENCH_DIR` if set (e.g. a tmpfs mounted with
/// 2 MiB pages by `scripts/nvmm-hugepages.sh`), else /dev/shm, else the temp dir.
pub fn scratch_base() -> PathBuf {
    if let Some(dir) = std::env::var_os("ATOMFS_BENCH_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// A fresh, unique path in the scratch directory (the emulated NVMM: /dev/shm unless
/// `ATOMFS_BENCH_DIR` says otherwise) for a pool, mapping or image.
pub fn scratch_path(what: &str) -> PathBuf {
    let n = SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed);
    scratch_base().join(format!("atomfs-bench-{}-{n}-{what}", std::process::id()))
}

/// A fresh, unique directory path under the temp dir (mount points, fallbacks).
pub fn scratch_dir_path(what: &str) -> PathBuf {
    let n = SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("atomfs-bench-{}-{n}-{what}", std::process::id()))
}
