//! Fixtures of the tests that run atomfs's host-file engines (mmio, journal, cache, remap with
//! copy-checkpoint) with their home directory on a GlusterFS volume and their persistent-memory
//! part in /dev/shm (docs/distributed.md):
//!
//! - [`cluster`]: the loopback GlusterFS cluster of `scripts/gluster.sh`, and the server
//!   faults (brick SIGKILL and restart, lost client mount);
//! - [`engine`]: each engine made on a given home directory and PM file;
//! - [`Layout`]: where the stores of one test process live (PM files in
//!   `/dev/shm/atomfs-gluster-*`, home directories in `atomfs-*` on the mount), removed at exit;
//! - [`GlusterHarness`]: the conformance suite's harness; [`GlusterKill`]: the kill torture's
//!   target.
//!
//! Tests only: nothing here is part of the product.

pub mod cluster;
pub mod engine;
pub mod faults;

pub use cluster::{cluster, Cluster, Volume};
pub use engine::{HostEngine, Profile};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use store::{Result, Store};

/// Where one test process keeps its stores: PM files under `pm_root` (in /dev/shm), home
/// directories under `home_root` (on a GlusterFS mount). Store `n` of an engine is named
/// `<engine>-<n>-<profile tag>` in both.
#[derive(Debug)]
pub struct Layout {
    pm_root: PathBuf,
    home_root: PathBuf,
    next: AtomicU64,
}

/// The two paths of one store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreDirs {
    pub engine: HostEngine,
    pub profile: Profile,
    /// The PM part (a file in /dev/shm).
    pub pm: PathBuf,
    /// The home directory (on the GlusterFS mount).
    pub home: PathBuf,
}

static REMOVE_AT_EXIT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_scratch() {
    let paths = match REMOVE_AT_EXIT.lock() {
        Ok(paths) => paths.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for p in paths {
        let _ = std::fs::remove_dir_all(p);
    }
}

/// Remove `dir` (a scratch directory made here) when the process exits.
fn remove_at_exit(dir: &Path) {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function with no arguments; at exit it removes
        // the scratch directories this process made (listed in REMOVE_AT_EXIT).
        unsafe { libc::atexit(remove_scratch) };
    });
    match REMOVE_AT_EXIT.lock() {
        Ok(mut paths) => paths.push(dir.to_path_buf()),
        Err(poisoned) => poisoned.into_inner().push(dir.to_path_buf()),
    }
}

impl Layout {
    /// A new layout for this process with its home directories under `mount` (a GlusterFS
    /// mount point in the cluster's scratch directory); both roots are removed at exit.
    pub fn new(mount: &Path, tag: &str) -> Layout {
        assert!(
            !tag.is_empty() && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "layout tag {tag:?}"
        );
        let scratch = test_support::scratch(&format!("gluster-{tag}"));
        // The scratch directory stays: Scratch would remove it when dropped.
        let pm_root = scratch.path().to_path_buf();
        std::mem::forget(scratch);
        let home_root = mount.join(format!("atomfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home_root);
        std::fs::create_dir_all(&home_root)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", home_root.display()));
        remove_at_exit(&pm_root);
        remove_at_exit(&home_root);
        Layout {
            pm_root,
            home_root,
            next: AtomicU64::new(0),
        }
    }

    /// The directory of the PM files.
    pub fn pm_root(&self) -> &Path {
        &self.pm_root
    }

    /// The directory of the home directories (on the mount).
    pub fn home_root(&self) -> &Path {
        &self.home_root
    }

    /// The paths of a new store (its home directory created, empty).
    pub fn fresh(&self, engine: HostEngine, profile: Profile) -> StoreDirs {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let stem = format!("{}-{n}-{}", engine.name(), profile.tag());
        let dirs = self.dirs(engine, profile, &stem);
        std::fs::create_dir_all(&dirs.home)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", dirs.home.display()));
        dirs
    }

    fn dirs(&self, engine: HostEngine, profile: Profile, stem: &str) -> StoreDirs {
        StoreDirs {
            engine,
            profile,
            pm: self.pm_root.join(format!("{stem}.pm")),
            home: self.home_root.join(stem),
        }
    }

    /// The paths of the store `store` of `engine` (made by [`Layout::fresh`]).
    pub fn dirs_of(&self, engine: HostEngine, store: &dyn Store) -> StoreDirs {
        let id = engine.identity(store);
        let stem = id
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_else(|| panic!("store path {}", id.display()));
        let profile = stem
            .rsplit('-')
            .next()
            .and_then(Profile::from_tag)
            .unwrap_or_else(|| panic!("store path {} has no profile tag", id.display()));
        self.dirs(engine, profile, stem)
    }
}

/// The conformance suite's harness for `engine` on the single-brick volume.
pub struct GlusterHarness {
    engine: HostEngine,
    layout: &'static Layout,
}

/// The layout of this process on the single-brick volume (the cluster brought up first).
pub fn single_layout(what: &str) -> Option<&'static Layout> {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    let cluster = cluster(what)?;
    Some(LAYOUT.get_or_init(|| Layout::new(&cluster.mount(Volume::Single), "dist")))
}

/// The harness of `engine`, or `None` (with the reason printed) where GlusterFS cannot run.
pub fn harness(engine: HostEngine) -> Option<GlusterHarness> {
    let layout = single_layout(&format!("{} on GlusterFS", engine.name()))?;
    Some(GlusterHarness { engine, layout })
}

impl GlusterHarness {
    fn make(&self, profile: Profile) -> Box<dyn Store> {
        let d = self.layout.fresh(self.engine, profile);
        self.engine
            .create(&d.home, &d.pm, profile)
            .unwrap_or_else(|e| {
                panic!("create {} at {}: {e}", self.engine.name(), d.home.display())
            })
    }

    fn reopen(&self, store: Box<dyn Store>, clean: bool) -> Box<dyn Store> {
        let d = self.layout.dirs_of(self.engine, store.as_ref());
        if clean {
            store
                .unmount()
                .unwrap_or_else(|e| panic!("unmount {}: {e}", d.home.display()));
        }
        drop(store);
        self.engine
            .open(&d.home, &d.pm, d.profile)
            .unwrap_or_else(|e| panic!("open {} at {}: {e}", self.engine.name(), d.home.display()))
    }
}

impl conformance::Harness for GlusterHarness {
    fn fresh(&self) -> Box<dyn Store> {
        self.make(Profile::Conformance)
    }
    /// remap has no small configuration (its capacity is the host file system's; its own
    /// suite skips the space case too): filling the mount would fill the brick's disk.
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        (self.engine != HostEngine::RemapCopy).then(|| self.make(Profile::Small))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        self.reopen(store, true)
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        self.reopen(store, false)
    }
    fn host_lacks(&self) -> &'static [conformance::cases::Feature] {
        gluster_lacks(self.engine)
    }
}

/// What `engine` cannot offer with its home on GlusterFS: the FUSE client refuses
/// RENAME_EXCHANGE (EINVAL), so mmio and cache, which exchange the host names themselves,
/// answer EOPNOTSUPP there.
fn gluster_lacks(engine: HostEngine) -> &'static [conformance::cases::Feature] {
    match engine {
        HostEngine::Mmio | HostEngine::Cache => &[conformance::cases::Feature::RenameModes],
        _ => conformance::cases::awaited(engine.name()),
    }
}

/// The kill torture's target: the pool path the torture gives is the PM file (in /dev/shm);
/// the home directory is the directory of the same name under `home_root` (on the mount).
pub struct GlusterKill {
    pub engine: HostEngine,
    pub home_root: PathBuf,
}

/// Environment of a torture child: the engine and the home root (the torture itself passes
/// the pool path and the seed).
pub const CHILD_ENGINE_ENV: &str = "ATOMFS_GLUSTER_ENGINE";
pub const CHILD_HOME_ROOT_ENV: &str = "ATOMFS_GLUSTER_HOME_ROOT";

impl GlusterKill {
    fn home(&self, pool: &Path) -> PathBuf {
        let name = pool
            .file_stem()
            .unwrap_or_else(|| panic!("pool path {}", pool.display()));
        self.home_root.join(name)
    }

    /// The target of a torture child, from its environment (`None`: not a child).
    pub fn from_env() -> Option<GlusterKill> {
        let engine = std::env::var(CHILD_ENGINE_ENV).ok()?;
        let home_root = std::env::var(CHILD_HOME_ROOT_ENV).ok()?;
        Some(GlusterKill {
            engine: HostEngine::by_name(&engine)
                .unwrap_or_else(|| panic!("{CHILD_ENGINE_ENV}={engine}: no such engine")),
            home_root: PathBuf::from(home_root),
        })
    }
}

impl crash::torture::KillTarget for GlusterKill {
    fn name(&self) -> String {
        format!("{} on GlusterFS", self.engine.name())
    }
    /// The workloads leave out what the engine cannot offer on GlusterFS.
    fn posix_steps(&self) -> crash::workload::PosixSteps {
        crash::workload::PosixSteps::Lacking(gluster_lacks(self.engine))
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let home = self.home(path);
        std::fs::create_dir_all(&home).map_err(|e| store::Error::Io {
            path: home.display().to_string(),
            op: "create directory",
            source: e,
        })?;
        self.engine.create(&home, path, Profile::Torture)
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        self.engine.open(&self.home(path), path, Profile::Torture)
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_dir_all(self.home(path));
    }
}

/// The torture child's side, when this test binary was started as one: run the workload on
/// the pool the parent named until the parent kills this process. Returns at once otherwise.
pub fn torture_child() {
    let (Some(target), Ok(pool), Ok(seed)) = (
        GlusterKill::from_env(),
        std::env::var("ATOMFS_TORTURE_POOL"),
        std::env::var("ATOMFS_TORTURE_SEED"),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap_or_else(|_| panic!("bad seed {seed}"));
    if let Err(e) = crash::torture::run_child(&target, Path::new(&pool), seed) {
        panic!("child: {e}");
    }
}

/// Rounds of each half of a kill torture: `ATOMFS_TORTURE_ROUNDS`, else 40 with
/// `ATOMFS_GLUSTER_LONG=1`, else `ci`.
pub fn torture_rounds(ci: u64) -> u64 {
    if let Some(n) = std::env::var("ATOMFS_TORTURE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    if std::env::var("ATOMFS_GLUSTER_LONG").is_ok_and(|v| v == "1") {
        40
    } else {
        ci
    }
}

/// Kill torture of `engine` on the single-brick volume: `rounds` SIGKILLed children on fresh
/// stores, as many on one store kept across rounds; `child_test` is the victim test's path
/// in this binary. Fails on any violation, or when too few children were killed.
pub fn torture(engine: HostEngine, rounds: u64, seed: u64, child_test: &str) {
    let Some(layout) = single_layout(&format!("{} kill torture on GlusterFS", engine.name()))
    else {
        return;
    };
    let target = GlusterKill {
        engine,
        home_root: layout.home_root().to_path_buf(),
    };
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let child = |pool: &Path, seed: u64| {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env("ATOMFS_TORTURE_POOL", pool)
            .env("ATOMFS_TORTURE_SEED", seed.to_string())
            .env(CHILD_ENGINE_ENV, engine.name())
            .env(CHILD_HOME_ROOT_ENV, layout.home_root());
        cmd
    };
    let cfg = crash::torture::TortureConfig {
        seed,
        rounds,
        dir: layout.pm_root().to_path_buf(),
        kill_after_ms_max: 400,
        ..Default::default()
    };
    let fresh = crash::torture::torture(&target, &child, &cfg);
    println!("{}", fresh.summary());
    let kept = crash::torture::TortureConfig {
        continue_pool: true,
        seed: seed + 1,
        ..cfg
    };
    let again = crash::torture::torture(&target, &child, &kept);
    println!("{} (one store across rounds)", again.summary());
    for (what, report) in [("fresh stores", &fresh), ("one store", &again)] {
        if let Some(first) = report.violations.first() {
            panic!(
                "{} {what}: {} violations, first: {first}",
                engine.name(),
                report.violations.len()
            );
        }
    }
    assert!(
        fresh.kills + again.kills >= 2 * rounds * 8 / 10,
        "too few children were killed: {} + {} of {} rounds",
        fresh.kills,
        again.kills,
        2 * rounds
    );
    assert!(
        fresh.images + again.images >= rounds,
        "too few recovered stores checked: {} + {} of {} rounds",
        fresh.images,
        again.images,
        2 * rounds
    );
}
