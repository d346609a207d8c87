//! The shared conformance suite (crates/testing/conformance) against the remap engine on a
//! directory in tmpfs (/dev/shm, else /tmp), which has no reflink: the stores are created
//! with copy-checkpoint, and a small journal limit so that checkpoints happen inside the
//! cases. A clean reopen unmounts and opens the journal again; an unclean reopen drops the
//! store without unmounting and opens it again, running recovery. tests/xfs.rs runs the
//! remapping path on a loop-mounted XFS image. Every store is removed when the process ends.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use conformance::Harness;
use remap::{HostRemapStore, RemapConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use store::Store;

struct RemapHarness;

static N: AtomicU64 = AtomicU64::new(0);
static CLEANUP: Once = Once::new();

fn base() -> PathBuf {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-remap-conformance-{}",
        std::process::id()
    ))
}

extern "C" fn remove_base() {
    let _ = std::fs::remove_dir_all(base());
}

fn new_pool() -> PathBuf {
    CLEANUP.call_once(|| {
        // SAFETY: registers a plain extern "C" function with no arguments; it only removes
        // this process's scratch directory at exit.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(remove_base)
        };
    });
    let d = base().join(N.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(d.join("home")).unwrap();
    d.join("store.pool")
}

fn config() -> RemapConfig {
    RemapConfig {
        copy_checkpoint: true,
        checkpoint_journal_len: 4 << 20,
        ..RemapConfig::default()
    }
}

fn path_of(s: &dyn Store) -> PathBuf {
    let home = s.as_any().downcast_ref::<HostRemapStore>().unwrap().home();
    home.parent().unwrap().join("store.pool")
}

impl Harness for RemapHarness {
    fn fresh(&self) -> Box<dyn Store> {
        let pool = new_pool();
        let home = pool.parent().unwrap().join("home");
        Box::new(HostRemapStore::create(&pool, &home, &config()).unwrap())
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let p = path_of(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        Box::new(HostRemapStore::open(&p, &config()).unwrap())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let p = path_of(store.as_ref());
        drop(store);
        Box::new(HostRemapStore::open(&p, &config()).unwrap())
    }
}

conformance::conformance_tests!(RemapHarness);
