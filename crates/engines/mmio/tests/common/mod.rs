//! Helpers shared by the mmio integration tests: stores over simulated media (one SimRegion
//! holds the log pool and the file extents) and over a real directory on /dev/shm.
#![allow(dead_code)]

use mmio::{MmioConfig, MmioStore, SimMedia, Window};
use pmem::SimRegion;
use std::sync::Arc;
use store::{Fh, OpenOptions, Store};

pub type SimStore = MmioStore<Window<SimRegion>, SimMedia>;

pub const FILE_CAPACITY: u64 = 64 << 10;
pub const FILES: u32 = 16;

pub fn pool_len(cfg: &MmioConfig) -> u64 {
    cfg.log_pool_len
}

/// A fresh store over a new simulated region.
pub fn sim_store(cfg: &MmioConfig) -> (Arc<SimRegion>, SimStore) {
    let len = pool_len(cfg);
    let region = Arc::new(SimRegion::new(
        len + SimMedia::area_len(FILE_CAPACITY, FILES),
    ));
    let pool = Window::new(region.clone(), 0, len);
    let media = SimMedia::new(region.clone(), len, FILE_CAPACITY, FILES);
    let store = MmioStore::create_on(pool, media, cfg).expect("create sim store");
    (region, store)
}

/// Open (recover) a store from a crash image of the region (log pool, namespace and files).
pub fn sim_reopen(image: Vec<u8>, cfg: &MmioConfig) -> store::Result<(Arc<SimRegion>, SimStore)> {
    let len = pool_len(cfg);
    let region = Arc::new(SimRegion::from_image(image));
    let pool = Window::new(region.clone(), 0, len);
    let media = SimMedia::open(region.clone(), len, FILE_CAPACITY, FILES)
        .map_err(|e| store::Error::corrupt(format!("simulated namespace: {e}"), len))?;
    let store = MmioStore::open_on(pool, media, cfg)?;
    Ok((region, store))
}

pub fn open_rw(s: &dyn Store, path: &str, atomic: bool) -> Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
        .expect("open")
}

pub fn read_path(s: &dyn Store, path: &str) -> Vec<u8> {
    store::path::read_file(s, path).expect("read file")
}

/// A unique scratch directory on tmpfs (removed by the caller with `cleanup`).
pub fn shm_dir(tag: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = std::path::PathBuf::from(format!(
        "{base}/atomfs-mmio-{tag}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("files")).expect("mkdir scratch");
    dir
}

pub fn cleanup(dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(dir);
}
