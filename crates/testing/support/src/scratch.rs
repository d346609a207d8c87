//! Scratch directories: fresh, unique, under `/dev/shm` (where pool files live on the emulated
//! NVMM; the system's temporary directory where there is no `/dev/shm`), always named
//! `atomfs-<name>-<pid>-<n>` so that nothing outside them is ever touched.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A scratch directory, removed when dropped — unless the test is failing (kept for a look).
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The base of every scratch directory: `/dev/shm` when there is one.
fn base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A new, empty scratch directory `atomfs-<name>-<pid>-<n>` (see the module documentation).
pub fn scratch(name: &str) -> Scratch {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    assert!(
        !name.is_empty() && !name.contains('/') && !name.contains(".."),
        "scratch name {name:?} must be one plain path component"
    );
    let dir = base().join(format!("atomfs-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("create scratch directory {}: {e}", dir.display());
    }
    Scratch(dir)
}
