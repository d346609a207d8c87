//! The shared conformance suite (crates/testing/conformance) against the journal engine on
//! a real home directory and a PM journal file on tmpfs (/dev/shm, else /tmp). A clean
//! reopen unmounts and opens the same directory and journal; an unclean reopen drops the
//! store without unmounting (a crash at a quiescent point) and opens it again, running
//! recovery. Every store's directory is removed when the test process ends.
//!
//! The ignored cases: `cargo test -p atomfs-journal --release --test conformance -- --ignored`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use conformance::Harness;
use journal::{HostJournalStore, JournalConfig, StoreConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use store::Store;

struct JournalHarness;

static N: AtomicU64 = AtomicU64::new(0);
static CLEANUP: Once = Once::new();

fn base() -> PathBuf {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-journal-conformance-{}",
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

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 40 * 1024,
            checkpoint_period: Some(std::time::Duration::from_millis(50)),
            ..JournalConfig::default()
        },
        ..StoreConfig::default()
    }
}

/// 4 MiB of file data (and a small journal).
fn config_small() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 1024,
            ..config().journal
        },
        capacity_bytes: 4 << 20,
        ..config()
    }
}

fn reopen_args(s: &dyn Store) -> (PathBuf, PathBuf, StoreConfig) {
    let j = s.as_any().downcast_ref::<HostJournalStore>().unwrap();
    let pm = j.journal().region().path().to_path_buf();
    let home = pm.parent().unwrap().join("home");
    let cfg = if j.journal().geometry().blocks() < 4096 {
        config_small()
    } else {
        config()
    };
    (home, pm, cfg)
}

impl Harness for JournalHarness {
    fn fresh(&self) -> Box<dyn Store> {
        let d = new_dirs();
        Box::new(
            HostJournalStore::create(&d.join("home"), &d.join("journal.pm"), &config()).unwrap(),
        )
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        let d = new_dirs();
        Some(Box::new(
            HostJournalStore::create(&d.join("home"), &d.join("journal.pm"), &config_small())
                .unwrap(),
        ))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (home, pm, cfg) = reopen_args(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        Box::new(HostJournalStore::open(&home, &pm, &cfg).unwrap())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (home, pm, cfg) = reopen_args(store.as_ref());
        drop(store);
        Box::new(HostJournalStore::open(&home, &pm, &cfg).unwrap())
    }
}

conformance::conformance_tests!(JournalHarness);
