//! The `cache` engine (First Responder) as a target of the crash harness
//! (crates/testing/crash), built with the `crash-target` feature only: on the simulator the
//! cache pool is the harness's [`SimRegion`] and the home files live in the host crash model
//! ([`SimHostFs`]); for process kills, a real home directory plus a mapped pool file
//! ([`KillTarget`]). The pairing of the two simulators is mmio's (its crash_target.rs):
//!
//! Pairing the two simulators. The harness crashes the store at every fence of its region
//! and recovers each region image it picks; the host files must crash at the same moment.
//! The region ends in one trailer page holding the id of the host model the store in it
//! runs on (written at format and at the start of every recovery, before anything else).
//! Each fence of the log pool ([`PairedPool`]) holds the host model still ([`CutHost`]:
//! host operations and mapped stores hold a lock shared, the fence exclusively) and records
//! its crash point for the fencing thread; the harness recovers inside the fence's hook, and
//! recovering a region image takes that crash point (outside a fence: the host now) and one
//! of its crash images, chosen by a checksum of the log pool image (so a rerun picks the
//! same one): lost and torn unsynced host data and undurable namespace operations, paired
//! with every log pool image the harness checks, at one moment even with several threads. Crashes in the middle of recovery pair with
//! the recovering host model the same way; a second recovery with the recovered one.
//! Crash points at host syncs between two fences are covered by the engine's own
//! tests/crash.rs, which holds both hooks.

use crate::{CacheConfig, CacheStore};
use crash::torture::KillTarget;
use crash::CrashTarget;
use hostfs::sim::CutHost;
use hostfs::{HostCrashPoint, SimConfig, SimHostFs};
use pmem::{CrashConfig, Region, RegionStats, SimRegion};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Error, Result, Store};

/// Bytes of the trailer page after the log pool (the host model's id at its start).
const TRAILER_LEN: u64 = 4096;
/// Host models of formatted stores kept (workloads running at once are far fewer).
const FORMATTED_HOSTS_MAX: usize = 256;
/// Recovered host models kept for the crashes of their recovery and a second recovery.
const RECOVERED_HOSTS_MAX: usize = 1024;

/// The cache engine with a flush policy.
#[derive(Clone, Debug)]
pub struct CacheTarget {
    pub config: CacheConfig,
    pub pool_len: u64,
    label: &'static str,
}

impl CacheTarget {
    /// A small pool (collisions happen) with room for the harness's workloads.
    pub fn new(label: &'static str, flush_period: Option<Duration>, stride: Option<u64>) -> Self {
        CacheTarget {
            config: CacheConfig {
                files_max: 64,
                units_max: 32,
                intents_max: 128,
                stride_fixed: stride,
                stride_min: 8,
                flush_period,
                home_conflict: Default::default(),
                home_stamp: crate::HomeStampCheck::Length,
                home_files_open_max: crate::home::OPEN_MAX,
                xattr_bytes_max: crate::XATTR_BYTES_MAX,
            },
            pool_len: 1 << 20,
            label,
        }
    }

    /// "cache" (every mode here for `atomfs crashtest`), "cache-lazy" (flushes on demand),
    /// "cache-through" (period 0: every write home before it returns), "cache-collide"
    /// (stride 1: files collide, Case 3 forced flushes).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "cache" | "cache-lazy" => Some(Self::new("cache-lazy", None, None)),
            "cache-through" => Some(Self::new("cache-through", Some(Duration::ZERO), None)),
            "cache-collide" => Some(Self::new("cache-collide", None, Some(1))),
            _ => None,
        }
    }

    fn pool(&self, region: Arc<SimRegion>, host: CutHost, id: u64) -> PairedPool {
        PairedPool {
            pool: Window::new(region, 0, self.pool_len),
            host,
            id,
        }
    }

    /// Record in `region`'s trailer that its store runs on host model `id`.
    fn bind(&self, region: &SimRegion, id: u64) {
        let at = self.pool_len;
        region.store_u64(at, id);
        // persist: every image of the region from here on names its host model.
        region.persist(at, 8);
    }
}

/// The host model of the crash target: 512-byte sectors, 4 KiB pages; its crash images are
/// sampled above 64 states.
pub fn host_config() -> SimConfig {
    SimConfig {
        crash: CrashConfig {
            exhaustive_limit: 64,
            sample_count: 64,
            seed: 0x6361_6368,
        },
        ..SimConfig::default()
    }
}

/// The log pool of a store of the crash target: at each fence it holds its host model still
/// (the cut of [`CutHost`]), records the host's crash point for the fencing thread, and
/// fences — the fence's hook is where the harness recovers crash images, so a recovery pairs
/// the region image with the host at the same moment.
pub struct PairedPool {
    pool: Window<SimRegion>,
    host: CutHost,
    id: u64,
}

type FenceKey = (u64, std::thread::ThreadId);

/// The host crash points recorded by fences in progress (one per fencing thread and host).
static AT_FENCE: Mutex<Vec<(FenceKey, HostCrashPoint)>> = Mutex::new(Vec::new());

fn at_fence() -> std::sync::MutexGuard<'static, Vec<(FenceKey, HostCrashPoint)>> {
    AT_FENCE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Region for PairedPool {
    fn len(&self) -> u64 {
        self.pool.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.pool.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.pool.write(off, data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.pool.fill(off, len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.pool.write_nt(off, data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.pool.load_u64(off)
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.pool.store_u64(off, value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.pool.flush(off, len)
    }
    fn fence(&self) {
        let key = (self.id, std::thread::current().id());
        let _cut = self.host.cut.write();
        let point = self.host.fs.crash_point();
        at_fence().push((key, point));
        self.pool.fence();
        let mut recorded = at_fence();
        if let Some(at) = recorded.iter().rposition(|(k, _)| *k == key) {
            recorded.swap_remove(at);
        }
    }
    fn stats(&self) -> RegionStats {
        self.pool.stats()
    }
}

fn cut_host(fs: SimHostFs) -> CutHost {
    CutHost {
        fs,
        cut: Arc::default(),
    }
}

/// Host models by id: those of formatted stores (kept) and the latest recovered ones.
struct Hosts {
    formatted: BTreeMap<u64, SimHostFs>,
    recovered: BTreeMap<u64, SimHostFs>,
}

static HOSTS: Mutex<Hosts> = Mutex::new(Hosts {
    formatted: BTreeMap::new(),
    recovered: BTreeMap::new(),
});
static NEXT_HOST_ID: AtomicU64 = AtomicU64::new(1);

fn hosts() -> std::sync::MutexGuard<'static, Hosts> {
    HOSTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(host: &SimHostFs, formatted: bool) -> u64 {
    let id = NEXT_HOST_ID.fetch_add(1, Ordering::Relaxed);
    let mut h = hosts();
    if formatted {
        h.formatted.insert(id, host.clone());
        while h.formatted.len() > FORMATTED_HOSTS_MAX {
            h.formatted.pop_first();
        }
    } else {
        h.recovered.insert(id, host.clone());
        while h.recovered.len() > RECOVERED_HOSTS_MAX {
            h.recovered.pop_first();
        }
    }
    id
}

fn lookup(id: u64) -> Option<SimHostFs> {
    let h = hosts();
    h.formatted
        .get(&id)
        .or_else(|| h.recovered.get(&id))
        .cloned()
}

impl CacheTarget {
    /// The host model for a recovery of `region`: a crash image of the model its store ran
    /// on, taken now, chosen by the log pool image's checksum.
    fn crashed_host(&self, region: &SimRegion) -> Result<SimHostFs> {
        let len = self.pool_len;
        let id = region.load_u64(len);
        let running = lookup(id).ok_or_else(|| {
            Error::corrupt(
                format!("crash target: no host model {id} for this image"),
                len,
            )
        })?;
        let image = region.persistent_image();
        let pick = crc32c::crc32c(image.get(..len as usize).unwrap_or(&image)) as u64;
        // Inside a fence hook: the host as the fence began; else (a crash after the workload,
        // a second recovery) the host now.
        let key = (id, std::thread::current().id());
        let recorded = at_fence()
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, point)| point.clone());
        let point = recorded.unwrap_or_else(|| running.crash_point());
        let host_image = point.image(pick % point.image_count().max(1));
        Ok(SimHostFs::from_image(&host_image, host_config()))
    }
}

impl CrashTarget for CacheTarget {
    fn name(&self) -> String {
        self.label.into()
    }
    fn region_len(&self) -> u64 {
        self.pool_len + TRAILER_LEN
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = cut_host(SimHostFs::new(host_config()));
        let id = register(&host.fs, true);
        self.bind(&region, id);
        let pool = self.pool(region, host.clone(), id);
        Ok(Box::new(CacheStore::create_on(
            pool,
            host,
            &self.config,
            b"sim",
        )?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = cut_host(self.crashed_host(&region)?);
        let id = register(&host.fs, false);
        self.bind(&region, id);
        let pool = self.pool(region, host.clone(), id);
        Ok(Box::new(CacheStore::open_on(pool, host, &self.config)?))
    }
    fn repro_command(&self) -> String {
        REPRO_COMMAND.into()
    }
}

/// Reruns one workload from a failure's settings (the ignored `repro` test of
/// tests/crash_harness.rs).
pub const REPRO_COMMAND: &str =
    "cargo test -p atomfs-cache --test crash_harness -- --ignored --exact repro --nocapture";

/// The names [`CacheTarget::by_name`] takes.
pub const NAMES: &str = "cache (every mode), cache-lazy, cache-through, cache-collide";

/// The modes `atomfs crashtest --engine cache` runs.
pub const MODES: &[&str] = &["cache-lazy", "cache-through", "cache-collide"];

fn io(path: &Path, op: &'static str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source: e,
    }
}

/// On real files the "pool" of a torture round is a directory: `home/` (the home files) and
/// `cache.pool` (the mapped cache pool).
impl CacheTarget {
    /// The configuration of real-file stores: a killed process loses nothing of the home
    /// file system (its page cache stays), so the mtime is compared too, as by default.
    fn real_config(&self) -> CacheConfig {
        CacheConfig {
            home_stamp: crate::HomeStampCheck::LengthAndMtime,
            ..self.config.clone()
        }
    }
}

impl KillTarget for CacheTarget {
    fn name(&self) -> String {
        CrashTarget::name(self)
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let home = path.join("home");
        std::fs::create_dir_all(&home).map_err(|e| io(&home, "create directory", e))?;
        let pool = path.join("cache.pool");
        Ok(Box::new(crate::HostCacheStore::create(
            &home,
            &pool,
            8 << 20,
            &self.real_config(),
        )?))
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        Ok(Box::new(crate::HostCacheStore::open(
            &path.join("home"),
            &path.join("cache.pool"),
            &self.real_config(),
        )?))
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// `[base, base + len)` of a shared region, as a region of its own (the pool before the
/// trailer page).
pub struct Window<R: Region> {
    region: Arc<R>,
    base: u64,
    len: u64,
}

impl<R: Region> Window<R> {
    pub fn new(region: Arc<R>, base: u64, len: u64) -> Self {
        pmem::check_range(region.len(), base, len);
        Window { region, base, len }
    }
    fn at(&self, off: u64, len: u64) -> u64 {
        pmem::check_range(self.len, off, len);
        self.base + off
    }
}

impl<R: Region> Region for Window<R> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.region.read(self.at(off, buf.len() as u64), buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.region.write(self.at(off, data.len() as u64), data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.region.fill(self.at(off, len), len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.region.write_nt(self.at(off, data.len() as u64), data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.region.load_u64(self.at(off, 8))
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.region.store_u64(self.at(off, 8), value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.region.flush(self.at(off, len), len)
    }
    fn fence(&self) {
        self.region.fence()
    }
    fn stats(&self) -> RegionStats {
        self.region.stats()
    }
}
