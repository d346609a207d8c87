//! Helpers shared by the mmio integration tests: stores over simulated media (a SimRegion log
//! pool and a SimHostFs host directory) and over a real directory on /dev/shm.
#![allow(dead_code)]

use hostfs::{HostImage, SimConfig, SimHostFs};
use mmio::{HostMedia, MmioConfig, MmioStore};
use pmem::SimRegion;
use std::sync::Arc;

pub type SimStore = MmioStore<Arc<SimRegion>, HostMedia<SimHostFs>>;

/// The two simulated media of a store: the log pool and the host directory.
#[derive(Clone)]
pub struct Sim {
    pub region: Arc<SimRegion>,
    pub host: SimHostFs,
}

/// A crash image of both media.
#[derive(Clone)]
pub struct SimImage {
    pub pool: Vec<u8>,
    pub host: HostImage,
}

impl Sim {
    /// What survives a crash now for certain: nothing pending reached either medium.
    pub fn persistent_image(&self) -> SimImage {
        SimImage {
            pool: self.region.persistent_image(),
            host: self.host.durable_image(),
        }
    }

    /// A crash now in which everything pending reached both media.
    pub fn cache_image(&self) -> SimImage {
        SimImage {
            pool: self.region.cache_image(),
            host: self.host.live_image(),
        }
    }
}

/// The host model of the tests: 512-byte sectors, 4 KiB pages.
pub fn host_config() -> SimConfig {
    SimConfig::default()
}

/// A fresh store over a new simulated log pool and host directory.
pub fn sim_store(cfg: &MmioConfig) -> (Sim, SimStore) {
    let sim = Sim {
        region: Arc::new(SimRegion::new(cfg.log_pool_len)),
        host: SimHostFs::new(host_config()),
    };
    let media = HostMedia::on(sim.host.clone());
    let store = MmioStore::create_on(sim.region.clone(), media, cfg).expect("create sim store");
    (sim, store)
}

/// Open (recover) a store from a crash image of both media.
pub fn sim_reopen(image: SimImage, cfg: &MmioConfig) -> store::Result<(Sim, SimStore)> {
    let sim = Sim {
        region: Arc::new(SimRegion::from_image(image.pool)),
        host: SimHostFs::from_image(&image.host, host_config()),
    };
    let media = HostMedia::on(sim.host.clone());
    let store = MmioStore::open_on(sim.region.clone(), media, cfg)?;
    Ok((sim, store))
}

/// `open_rw(s, path, atomic)`: open read-write, creating, O_ATOMIC when `atomic`;
/// `read_path(s, path)`: the whole contents of a file.
#[allow(unused_imports)] // each test file uses part of this
pub use test_support::{create_rw as open_rw, read_path};

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
