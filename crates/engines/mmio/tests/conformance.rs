//! The shared conformance suite (crates/testing/conformance) against the mmio engine on a real
//! directory and log pool file on tmpfs (/dev/shm, else /tmp). A clean reopen unmounts and
//! opens the same directory and pool; an unclean reopen drops the store without unmounting
//! (a crash at a quiescent point: the mapped pool and files keep what was written) and opens
//! it again, running recovery. Every store's directory is removed when the test process ends.
//!
//! The ignored cases: `cargo test -p atomfs-mmio --release --test conformance -- --ignored`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use conformance::Harness;
use mmio::{HostMmioStore, MmioConfig, MmioStore};
use pmem::Region;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use store::Store;

struct MmioHarness;

static N: AtomicU64 = AtomicU64::new(0);
static CLEANUP: Once = Once::new();

fn base() -> PathBuf {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-mmio-conformance-{}",
        std::process::id()
    ))
}

extern "C" fn remove_base() {
    let _ = std::fs::remove_dir_all(base());
}

fn new_dirs() -> PathBuf {
    CLEANUP.call_once(|| {
        // SAFETY: registers a plain extern "C" function with no arguments; it only removes
        // this process's scratch directory at exit.
        unsafe { libc::atexit(remove_base) };
    });
    let d = base().join(N.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(d.join("files")).unwrap();
    d
}

fn config() -> MmioConfig {
    MmioConfig {
        log_pool_len: 96 << 20,
        checkpoint_period: Some(std::time::Duration::from_micros(100)),
        ..MmioConfig::default()
    }
}

/// A few MiB of log and a bound on what one transaction may pile up (the host file system
/// is the store's capacity, so "small" is the per-epoch limit).
fn config_small() -> MmioConfig {
    MmioConfig {
        log_pool_len: 4 << 20,
        log_entry_max: 64 << 10,
        index_entries_max: 4096,
        epoch_bytes_max: 8 << 20,
        ..config()
    }
}

fn reopen_args(s: &dyn Store) -> (PathBuf, PathBuf, MmioConfig) {
    let m = s.as_any().downcast_ref::<HostMmioStore>().unwrap();
    let pool = m.log_pool().path().to_path_buf();
    let dir = pool.parent().unwrap().join("files");
    let cfg = if m.log_pool().len() < (16 << 20) {
        config_small()
    } else {
        config()
    };
    (dir, pool, cfg)
}

impl Harness for MmioHarness {
    fn fresh(&self) -> Box<dyn Store> {
        let d = new_dirs();
        Box::new(MmioStore::create(&d.join("files"), &d.join("log.pool"), &config()).unwrap())
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        let d = new_dirs();
        Some(Box::new(
            MmioStore::create(&d.join("files"), &d.join("log.pool"), &config_small()).unwrap(),
        ))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (dir, pool, cfg) = reopen_args(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        Box::new(MmioStore::open(&dir, &pool, &cfg).unwrap())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (dir, pool, cfg) = reopen_args(store.as_ref());
        drop(store);
        Box::new(MmioStore::open(&dir, &pool, &cfg).unwrap())
    }
}

conformance::conformance_tests!(MmioHarness);
