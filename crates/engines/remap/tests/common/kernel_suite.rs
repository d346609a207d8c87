//! The conformance harness on loop-mounted XFS (reflink=1) and Btrfs images: every store in
//! its own home directory on one image per file system, unmounted and detached when the
//! process ends. Without root or the mkfs tool the stores live on tmpfs with copy-checkpoint
//! and a printed skip says so (a failure under ATOMFS_REQUIRE_ALL=1).
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::{skip, Kind, LoopFs};
use conformance::Harness;
use remap::{CheckpointMode, HostRemapStore, RemapConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use store::Store;

static XFS: OnceLock<Mutex<Option<LoopFs>>> = OnceLock::new();
static BTRFS: OnceLock<Mutex<Option<LoopFs>>> = OnceLock::new();
static XFS_EXCHANGE: OnceLock<Mutex<Option<LoopFs>>> = OnceLock::new();
static N: AtomicU64 = AtomicU64::new(0);

extern "C" fn unmount_at_exit() {
    for fs in [&XFS, &BTRFS, &XFS_EXCHANGE] {
        if let Some(m) = fs.get() {
            if let Ok(mut g) = m.lock() {
                g.take();
            }
        }
    }
    let _ = std::fs::remove_dir_all(fallback_base());
}

fn fallback_base() -> PathBuf {
    PathBuf::from(format!(
        "/dev/shm/atomfs-remap-xfs-fallback-{}",
        std::process::id()
    ))
}

/// The mounted image's directory, or `None` (after a printed skip) without one.
fn loop_dir(kind: Kind) -> Option<PathBuf> {
    let cell = match kind {
        Kind::Xfs => &XFS,
        Kind::Btrfs => &BTRFS,
        Kind::XfsExchange => &XFS_EXCHANGE,
    };
    let m = cell.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function; it unmounts this process's image.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(unmount_at_exit)
        };
        match LoopFs::new(kind, "conformance") {
            Ok(fs) => Mutex::new(Some(fs)),
            Err(why) => {
                skip(&format!(
                    "{kind:?} image: {why}; running on tmpfs with copy-checkpoint"
                ));
                Mutex::new(None)
            }
        }
    });
    m.lock().unwrap().as_ref().map(|fs| fs.dir().to_path_buf())
}

fn config(copy: bool) -> RemapConfig {
    RemapConfig {
        copy_checkpoint: copy,
        checkpoint_journal_len: 4 << 20,
        ..RemapConfig::default()
    }
}

/// A new store in a fresh home on the `kind` image (or tmpfs with copy-checkpoint).
pub fn new_store(kind: Kind) -> HostRemapStore {
    let n = N.fetch_add(1, Ordering::Relaxed);
    let (base, copy) = match loop_dir(kind) {
        Some(d) => (d, false),
        None => (fallback_base(), true),
    };
    let home = base.join(format!("s{n}"));
    std::fs::create_dir_all(&home).unwrap();
    let s = HostRemapStore::create(&base.join(format!("s{n}.pool")), &home, &config(copy)).unwrap();
    assert_eq!(s.checkpoint_mode() == CheckpointMode::Copy, copy);
    s
}

fn reopen(store: Box<dyn Store>, clean: bool) -> Box<dyn Store> {
    let s = store.as_any().downcast_ref::<HostRemapStore>().unwrap();
    let copy = s.checkpoint_mode() == CheckpointMode::Copy;
    let home = s.home();
    let pool = PathBuf::from(format!("{}.pool", home.display()));
    if clean {
        store.unmount().unwrap();
    }
    drop(store);
    Box::new(HostRemapStore::open(&pool, &config(copy)).unwrap())
}

/// The conformance harness on a loop-mounted image of `kind`.
pub struct LoopHarness(pub Kind);

impl Harness for LoopHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(new_store(self.0))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        reopen(store, true)
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        reopen(store, false)
    }
}
