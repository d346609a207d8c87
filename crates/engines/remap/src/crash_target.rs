//! The `remap` engine as a target of the crash harness (crates/testing/crash), built with the
//! `crash-target` feature only: on the simulator the store directory is the host crash model
//! ([`SimHostFs`]: unsynced data lost or torn per block, clone_range torn per block until
//! synced, directory operations durable at `sync_dir`); for process kills, a real directory.
//!
//! Pairing with the harness. The harness crashes a store at every fence of its region; this
//! engine has no persistent memory, so its region is a small marker: before every host sync
//! (`sync_data`, `sync_all`, `sync_dir` — the engine's persistence points) [`PairedHost`]
//! records the host model's crash point for the syncing thread and fences the region; the
//! harness recovers inside that fence's hook, taking the recorded crash point (the host as
//! the sync began: every unsynced write may be lost or torn) and one of its crash images,
//! chosen by a checksum of the region image. Outside a sync (a crash after the workload, a
//! second recovery) the crash point is the host now. The region's first word names the host
//! model the store in it runs on (written at format and at the start of every recovery).
//! Every host operation of the engine runs under its one store lock, so the host stands
//! still between the crash point and the fence even with several threads.

use crate::{HostRemapStore, RemapConfig, RemapStore};
use crash::torture::KillTarget;
use crash::CrashTarget;
use hostfs::sim::{SimFile, SimMap};
use hostfs::{
    Capabilities, DirEntry, HostCrashPoint, HostFs, HostFsResult, OpenOptions, SimConfig,
    SimHostFs, Stat, StatFs,
};
use pmem::{CrashConfig, Region, SimRegion};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::{Error, Result, Store};

/// Cache lines of the marker region that carry the fence counter.
const MARKER_LINES: u64 = 3;
/// Bytes of the marker region: the host model's id, then the fence counter in
/// [`MARKER_LINES`] lines.
const REGION_LEN: u64 = 4096;
/// Host models of formatted stores kept (workloads running at once are far fewer).
const FORMATTED_HOSTS_MAX: usize = 256;
/// Recovered host models kept for the crashes of their recovery and a second recovery.
const RECOVERED_HOSTS_MAX: usize = 1024;

/// The remap engine, remapping or copying at checkpoints.
#[derive(Clone, Debug)]
pub struct RemapTarget {
    pub config: RemapConfig,
}

impl RemapTarget {
    /// "remap-reflink" (FICLONERANGE checkpoints; also "remap") or "remap-copy"
    /// (copy-checkpoint).
    pub fn by_name(name: &str) -> Option<Self> {
        let copy_checkpoint = match name {
            "remap" | "remap-reflink" => false,
            "remap-copy" => true,
            _ => return None,
        };
        Some(RemapTarget {
            config: RemapConfig {
                copy_checkpoint,
                // Small: the workloads reach several checkpoints (and crash inside them).
                checkpoint_journal_len: 48 << 10,
                // Small: commits rewriting most of a small file take the exchange path
                // (the host model offers exchange-range), so crashes land inside it too.
                exchange_blocks_min: 2,
                exchange_share_percent: 50,
                ..RemapConfig::default()
            },
        })
    }

    fn bind(region: &SimRegion, id: u64) {
        region.store_u64(0, id);
        // persist: every image of the region from here on names its host model.
        region.persist(0, 8);
    }
}

/// The host model of the crash target: 512-byte sectors; crash images sampled above 64.
pub fn host_config() -> SimConfig {
    SimConfig {
        crash: CrashConfig {
            exhaustive_limit: 64,
            sample_count: 64,
            seed: 0x7265_6d61,
        },
        ..SimConfig::default()
    }
}

type FenceKey = (u64, std::thread::ThreadId);

/// The host crash points recorded by syncs in progress (one per syncing thread and host).
static AT_FENCE: Mutex<Vec<(FenceKey, HostCrashPoint)>> = Mutex::new(Vec::new());

fn at_fence() -> std::sync::MutexGuard<'static, Vec<(FenceKey, HostCrashPoint)>> {
    AT_FENCE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A [`SimHostFs`] that fences the harness's region before every sync (see the module
/// documentation).
#[derive(Clone)]
pub struct PairedHost {
    fs: SimHostFs,
    region: Arc<SimRegion>,
    id: u64,
    fences: Arc<AtomicU64>,
}

impl PairedHost {
    fn before_sync(&self) {
        let key = (self.id, std::thread::current().id());
        at_fence().push((key, self.fs.crash_point()));
        let n = self.fences.fetch_add(1, Ordering::Relaxed) + 1;
        // Three lines pending at the fence: up to eight region images, each choosing its
        // own crash image of the host (more host states per sync are checked).
        for line in 1..=MARKER_LINES {
            self.region.store_u64(line * 64, n);
            self.region.flush(line * 64, 8);
        }
        self.region.fence();
        let mut recorded = at_fence();
        if let Some(at) = recorded.iter().rposition(|(k, _)| *k == key) {
            recorded.swap_remove(at);
        }
    }
}

impl HostFs for PairedHost {
    type File = SimFile;
    type Map = SimMap;
    fn root(&self) -> &Path {
        self.fs.root()
    }
    fn capabilities(&self) -> Capabilities {
        self.fs.capabilities()
    }
    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<SimFile> {
        self.fs.open(path, options)
    }
    fn read_at(&self, file: &SimFile, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        self.fs.read_at(file, off, buf)
    }
    fn write_at(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<usize> {
        self.fs.write_at(file, off, data)
    }
    fn set_len(&self, file: &SimFile, len: u64) -> HostFsResult<()> {
        self.fs.set_len(file, len)
    }
    fn file_stat(&self, file: &SimFile) -> HostFsResult<Stat> {
        self.fs.file_stat(file)
    }
    fn sync_data(&self, file: &SimFile) -> HostFsResult<()> {
        self.before_sync();
        self.fs.sync_data(file)
    }
    fn sync_all(&self, file: &SimFile) -> HostFsResult<()> {
        self.before_sync();
        self.fs.sync_all(file)
    }
    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        self.before_sync();
        self.fs.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        self.fs.rename(from, to)
    }
    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        self.fs.unlink(path)
    }
    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        self.fs.link(existing, new)
    }
    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.fs.mkdir(path, perm)
    }
    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        self.fs.rmdir(path)
    }
    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        self.fs.read_dir(dir)
    }
    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        self.fs.stat(path)
    }
    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.fs.set_perm(path, perm)
    }
    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        self.fs.set_times(path, atime, mtime)
    }
    fn statfs(&self) -> HostFsResult<StatFs> {
        self.fs.statfs()
    }
    fn map(&self, file: &SimFile, len: u64) -> HostFsResult<SimMap> {
        self.fs.map(file, len)
    }
    fn check_map(&self, map: &SimMap) -> HostFsResult<()> {
        self.fs.check_map(map)
    }
    fn clone_range(
        &self,
        src: &SimFile,
        src_off: u64,
        dst: &SimFile,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fs.clone_range(src, src_off, dst, dst_off, len)
    }
    fn exchange_range(
        &self,
        a: &SimFile,
        a_off: u64,
        b: &SimFile,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fs.exchange_range(a, a_off, b, b_off, len)
    }
    fn atomic_write(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<()> {
        self.fs.atomic_write(file, off, data)
    }
    fn drop_unsynced(&self, file: &SimFile) -> HostFsResult<()> {
        self.fs.drop_unsynced(file)
    }
    fn fallocate(
        &self,
        file: &SimFile,
        how: hostfs::FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fs.fallocate(file, how, off, len)
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

fn register(host: &SimHostFs, formatted: bool) -> u64 {
    let id = NEXT_HOST_ID.fetch_add(1, Ordering::Relaxed);
    let mut h = HOSTS.lock().unwrap_or_else(|e| e.into_inner());
    let (map, max) = if formatted {
        (&mut h.formatted, FORMATTED_HOSTS_MAX)
    } else {
        (&mut h.recovered, RECOVERED_HOSTS_MAX)
    };
    map.insert(id, host.clone());
    while map.len() > max {
        map.pop_first();
    }
    id
}

fn lookup(id: u64) -> Option<SimHostFs> {
    let h = HOSTS.lock().unwrap_or_else(|e| e.into_inner());
    h.formatted
        .get(&id)
        .or_else(|| h.recovered.get(&id))
        .cloned()
}

/// The host model for a recovery of `region`: a crash image of the model its store ran on,
/// taken at the sync in progress (else now), chosen by the region image's checksum.
fn crashed_host(region: &SimRegion) -> Result<SimHostFs> {
    let id = region.load_u64(0);
    let running = lookup(id).ok_or_else(|| Error::Corrupt {
        what: format!("crash target: no host model {id} for this image"),
        offset: 0,
    })?;
    let pick = u64::from(crc32c::crc32c(&region.persistent_image()));
    let key = (id, std::thread::current().id());
    let recorded = at_fence()
        .iter()
        .rev()
        .find(|(k, _)| *k == key)
        .map(|(_, point)| point.clone());
    let point = recorded.unwrap_or_else(|| running.crash_point());
    let image = point.image(pick % point.image_count().max(1));
    Ok(SimHostFs::from_image(&image, host_config()))
}

fn paired(fs: SimHostFs, region: Arc<SimRegion>, formatted: bool) -> PairedHost {
    let id = register(&fs, formatted);
    RemapTarget::bind(&region, id);
    PairedHost {
        fs,
        region,
        id,
        fences: Arc::default(),
    }
}

impl CrashTarget for RemapTarget {
    fn name(&self) -> String {
        if self.config.copy_checkpoint {
            "remap-copy".into()
        } else {
            "remap-reflink".into()
        }
    }
    fn region_len(&self) -> u64 {
        REGION_LEN
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = paired(SimHostFs::new(host_config()), region, true);
        Ok(Box::new(RemapStore::create_on(host, 1, &self.config)?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let host = paired(crashed_host(&region)?, region, false);
        Ok(Box::new(RemapStore::open_on(host, Some(1), &self.config)?))
    }
    fn repro_command(&self) -> String {
        REPRO_COMMAND.into()
    }
}

/// Reruns one workload from a failure's settings (the ignored `repro` test of
/// tests/crash_harness.rs).
pub const REPRO_COMMAND: &str =
    "cargo test -p atomfs-remap --test crash_harness -- --ignored --exact repro --nocapture";

/// The names [`RemapTarget::by_name`] takes.
pub const NAMES: &str = "remap (every mode), remap-reflink, remap-copy";

/// The modes `atomfs crashtest --engine remap` runs.
pub const MODES: &[&str] = &["remap-reflink", "remap-copy"];

fn home_of(pool: &Path) -> std::path::PathBuf {
    let mut p = pool.as_os_str().to_owned();
    p.push(".home");
    std::path::PathBuf::from(p)
}

/// On real files a torture round's store is its pool file and a home directory next to it
/// (`<pool>.home`). A directory without reflink (tmpfs) gets copy-checkpoint.
impl KillTarget for RemapTarget {
    fn name(&self) -> String {
        CrashTarget::name(self)
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let home = home_of(path);
        std::fs::create_dir_all(&home).map_err(|e| Error::Io {
            path: home.display().to_string(),
            op: "create directory",
            source: e,
        })?;
        match HostRemapStore::create(path, &home, &self.config) {
            Err(Error::Unsupported(_)) => {
                let config = RemapConfig {
                    copy_checkpoint: true,
                    ..self.config.clone()
                };
                Ok(Box::new(HostRemapStore::create(path, &home, &config)?))
            }
            other => Ok(Box::new(other?)),
        }
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        Ok(Box::new(HostRemapStore::open(path, &self.config)?))
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_dir_all(home_of(path));
    }
}
