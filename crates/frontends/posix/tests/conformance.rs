//! The engine-neutral conformance suite against the reference memstore of the C front ends,
//! with real reopen from its pool file (clean: unmount first; unclean: just drop it).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use atomfs_posix::memstore::MemStore;
use store::Store;

struct MemHarness;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Pool directories of earlier runs whose process is gone (the suite cannot clean up after
/// its last case: cases run in parallel and the harness has no end hook).
fn remove_stale(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("atomfs-memstore-conf-") {
            if !std::path::Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

fn pool_path() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    static CLEAN: std::sync::Once = std::sync::Once::new();
    CLEAN.call_once(|| remove_stale(&base));
    let dir = base.join(format!("atomfs-memstore-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("pool-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

fn path_of(store: &dyn Store) -> PathBuf {
    store
        .as_any()
        .downcast_ref::<MemStore>()
        .and_then(MemStore::path)
        .expect("a memstore with a file")
        .to_path_buf()
}

impl conformance::Harness for MemHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(MemStore::create(&pool_path()).unwrap())
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let path = path_of(store.as_ref());
        store.unmount().unwrap();
        Box::new(MemStore::open(&path).unwrap())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let path = path_of(store.as_ref());
        drop(store);
        Box::new(MemStore::open(&path).unwrap())
    }
}

conformance::conformance_tests!(MemHarness);
