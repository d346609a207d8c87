//! The `mmio` engine (Libnvmmio) as a target of the crash harness (crates/testing/crash),
//! built with the `crash-target` feature only: on the simulator the log pool is the harness's
//! [`SimRegion`] and the host files live in the host crash model ([`SimHostFs`]); for process
//! kills, a real directory of host files plus a mapped log pool file ([`KillTarget`]).
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

use crate::{HostMedia, MmioConfig, MmioStore, PolicyMode, Window};
use crash::torture::KillTarget;
use crash::CrashTarget;
use hostfs::sim::CutHost;
use hostfs::{HostCrashPoint, SimConfig, SimHostFs};
use pmem::{CrashConfig, Region, RegionStats, SimRegion};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::{Error, Result, Store};

/// Bytes of the trailer page after the log pool (the host model's id at its start).
const TRAILER_LEN: u64 = 4096;
/// Host models of formatted stores kept (workloads running at once are far fewer).
const FORMATTED_HOSTS_MAX: usize = 256;
/// Recovered host models kept for the crashes of their recovery and a second recovery.
const RECOVERED_HOSTS_MAX: usize = 1024;

/// The mmio engine with a logging policy.
#[derive(Clone, Debug)]
pub struct MmioTarget {
    pub config: MmioConfig,
}

impl MmioTarget {
    /// `MmioConfig::test_min()` with room for the harness's workloads, in `mode`.
    pub fn new(mode: PolicyMode) -> Self {
        MmioTarget {
            config: MmioConfig {
                policy_mode: mode,
                files_max: 32,
                index_entries_max: 256,
                intents_max: 64,
                tx_files_max: crate::log::layout::TX_FILES_MAX,
                ..MmioConfig::test_min()
            },
        }
    }

    /// "mmio" (hybrid here; every policy of [`MODES`] for `atomfs crashtest`), "mmio-hybrid",
    /// "mmio-undo", "mmio-redo".
    pub fn by_name(name: &str) -> Option<Self> {
        let mode = match name {
            "mmio" | "mmio-hybrid" => PolicyMode::Hybrid,
            "mmio-undo" => PolicyMode::Undo,
            "mmio-redo" => PolicyMode::Redo,
            _ => return None,
        };
        Some(Self::new(mode))
    }

    fn pool(&self, region: Arc<SimRegion>, host: CutHost, id: u64) -> PairedPool {
        PairedPool {
            pool: Window::new(region, 0, self.config.log_pool_len),
            host,
            id,
        }
    }

    /// Record in `region`'s trailer that its store runs on host model `id`.
    fn bind(&self, region: &SimRegion, id: u64) {
        let at = self.config.log_pool_len;
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
            seed: 0x6d6d_696f,
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

impl MmioTarget {
    /// The host model for a recovery of `region`: a crash image of the model its store ran
    /// on, taken now, chosen by the log pool image's checksum.
    fn crashed_host(&self, region: &SimRegion) -> Result<SimHostFs> {
        let len = self.config.log_pool_len;
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

impl CrashTarget for MmioTarget {
    fn name(&self) -> String {
        format!("mmio-{:?}", self.config.policy_mode).to_lowercase()
    }
    fn region_len(&self) -> u64 {
        self.config.log_pool_len + TRAILER_LEN
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = cut_host(SimHostFs::new(host_config()));
        let id = register(&host.fs, true);
        self.bind(&region, id);
        let pool = self.pool(region, host.clone(), id);
        Ok(Box::new(MmioStore::create_on(
            pool,
            HostMedia::on(host),
            &self.config,
        )?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = cut_host(self.crashed_host(&region)?);
        let id = register(&host.fs, false);
        self.bind(&region, id);
        let pool = self.pool(region, host.clone(), id);
        Ok(Box::new(MmioStore::open_on(
            pool,
            HostMedia::on(host),
            &self.config,
        )?))
    }
    fn repro_command(&self) -> String {
        REPRO_COMMAND.into()
    }
    /// The logging policy (undo or redo) of the open file's current epoch.
    fn handle_mode(&self, store: &dyn Store, fh: store::Fh) -> Option<String> {
        let s = store
            .as_any()
            .downcast_ref::<MmioStore<PairedPool, HostMedia<CutHost>>>()?;
        let policy = s.file_policy(fh).ok()?;
        Some(format!("{policy:?}").to_lowercase())
    }
}

/// Reruns one workload from a failure's settings (the ignored `repro` test of
/// tests/crash_harness.rs).
pub const REPRO_COMMAND: &str =
    "cargo test -p atomfs-mmio --test crash_harness -- --ignored --exact repro --nocapture";

/// The names [`MmioTarget::by_name`] takes.
pub const NAMES: &str = "mmio (every policy), mmio-hybrid, mmio-undo, mmio-redo";

/// The policies `atomfs crashtest --engine mmio` runs.
pub const MODES: &[&str] = &["mmio-hybrid", "mmio-undo", "mmio-redo"];

fn io(path: &Path, op: &'static str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source: e,
    }
}

/// On real files the "pool" of a torture round is a directory: `files/` (the host files) and
/// `log.pool` (the mapped log pool).
impl KillTarget for MmioTarget {
    fn name(&self) -> String {
        CrashTarget::name(self)
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let files = path.join("files");
        std::fs::create_dir_all(&files).map_err(|e| io(&files, "create directory", e))?;
        Ok(Box::new(MmioStore::create(
            &files,
            &path.join("log.pool"),
            &self.config,
        )?))
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        Ok(Box::new(MmioStore::open(
            &path.join("files"),
            &path.join("log.pool"),
            &self.config,
        )?))
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
    }
}
