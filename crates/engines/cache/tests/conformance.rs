//! The shared conformance suite (crates/testing/conformance) against the cache engine on a
//! real home directory and pool file on tmpfs (/dev/shm, else /tmp). A clean reopen unmounts
//! and opens the same directory and pool; an unclean reopen drops the store without
//! unmounting (a crash at a quiescent point) and opens it again, running recovery. Every
//! store's directory is removed when the test process ends.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, HostCacheStore};
use conformance::Harness;
use pmem::Region;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use store::Store;

struct CacheHarness;

static N: AtomicU64 = AtomicU64::new(0);
static CLEANUP: Once = Once::new();

fn base() -> PathBuf {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-cache-conformance-{}",
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
    std::fs::create_dir_all(d.join("home")).unwrap();
    d
}

const POOL: u64 = 160 << 20;
const POOL_SMALL: u64 = 4 << 20;

/// Room for the 100,000 files of `many_files_100k`.
fn config() -> CacheConfig {
    CacheConfig {
        flush_period: Some(std::time::Duration::from_millis(10)),
        files_max: 120_000,
        ..CacheConfig::default()
    }
}

fn config_small() -> CacheConfig {
    CacheConfig {
        files_max: 4096,
        ..config()
    }
}

fn reopen_args(s: &dyn Store) -> (PathBuf, PathBuf, CacheConfig) {
    let c = s.as_any().downcast_ref::<HostCacheStore>().unwrap();
    let pool = c.cache().region().path().to_path_buf();
    let home = pool.parent().unwrap().join("home");
    let cfg = if c.cache().region().len() < (16 << 20) {
        config_small()
    } else {
        config()
    };
    (home, pool, cfg)
}

impl Harness for CacheHarness {
    fn fresh(&self) -> Box<dyn Store> {
        let d = new_dirs();
        Box::new(
            HostCacheStore::create(&d.join("home"), &d.join("cache.pool"), POOL, &config())
                .unwrap(),
        )
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        let d = new_dirs();
        Some(Box::new(
            HostCacheStore::create(
                &d.join("home"),
                &d.join("cache.pool"),
                POOL_SMALL,
                &config_small(),
            )
            .unwrap(),
        ))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (home, pool, cfg) = reopen_args(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        Box::new(HostCacheStore::open(&home, &pool, &cfg).unwrap())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (home, pool, cfg) = reopen_args(store.as_ref());
        drop(store);
        Box::new(HostCacheStore::open(&home, &pool, &cfg).unwrap())
    }
}

conformance::conformance_tests!(CacheHarness);
