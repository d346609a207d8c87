//! The conformance suite with checkpoints by FICLONERANGE on a real XFS (reflink=1) image,
//! loop-mounted from /dev/shm (root; CI runs as root). Every store lives in its own home
//! directory on the one image, which is unmounted and detached when the process ends.
//! Without root or mkfs.xfs the cases run on tmpfs with copy-checkpoint and say so (they
//! fail instead under ATOMFS_REQUIRE_ALL=1).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::{skip, Kind, LoopFs};
use conformance::Harness;
use remap::{CheckpointMode, HostRemapStore, RemapConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use store::Store;

static FS: OnceLock<Mutex<Option<LoopFs>>> = OnceLock::new();
static N: AtomicU64 = AtomicU64::new(0);

extern "C" fn unmount_at_exit() {
    if let Some(m) = FS.get() {
        if let Ok(mut g) = m.lock() {
            g.take();
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

/// The mounted XFS image's directory, or `None` (after a printed skip) without one.
fn xfs_dir() -> Option<PathBuf> {
    let m = FS.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function; it unmounts this process's image.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(unmount_at_exit)
        };
        match LoopFs::new(Kind::Xfs, "conformance") {
            Ok(fs) => Mutex::new(Some(fs)),
            Err(why) => {
                skip(&format!(
                    "XFS reflink image: {why}; running on tmpfs with copy-checkpoint"
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
    }
}

struct XfsHarness;

fn new_store() -> HostRemapStore {
    let n = N.fetch_add(1, Ordering::Relaxed);
    let (base, copy) = match xfs_dir() {
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

impl Harness for XfsHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(new_store())
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        reopen(store, true)
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        reopen(store, false)
    }
}

conformance::conformance_tests!(XfsHarness);

/// The checkpoints of the suite above really remapped (on XFS): a store written past its
/// journal limit reports FICLONERANGE calls and no copied block.
#[test]
fn checkpoints_on_xfs_remap_instead_of_copying() {
    let s = new_store();
    if s.checkpoint_mode() == CheckpointMode::Copy {
        return; // skipped above, with the reason
    }
    let f = store::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&s, "/big", None)
        .unwrap();
    let block = vec![7u8; 1 << 20];
    for i in 0..6u64 {
        s.write(f, i << 20, &block).unwrap();
    }
    assert!(s.checkpoint().unwrap());
    let c = s.counters();
    assert!(c.remap_calls > 0 && c.remapped_blocks >= 6 * 256, "{c:?}");
    assert_eq!(c.copied_blocks, 0);
    let mut back = vec![0u8; 1 << 20];
    assert_eq!(s.read(f, 5 << 20, &mut back).unwrap(), 1 << 20);
    assert_eq!(back, block);
    s.release(f).unwrap();
}
