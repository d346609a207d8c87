//! SIGKILL torture with the home directory on real file systems: ext4 and XFS images,
//! loop-mounted from /dev/shm (root, losetup, mkfs.ext4, mkfs.xfs; skipped with the reason
//! otherwise, a failure under ATOMFS_REQUIRE_ALL=1). The PM journal file lives in /dev/shm
//! (emulated PM). A child process (this test binary) runs transactions and acknowledges each
//! one through a pipe; the parent kills it at a random moment, reopens the store (recovery)
//! and checks that the state is the model after the last acknowledged unit or the one in
//! flight — every acknowledged transaction whole, none torn — and that fsck is clean. Half
//! the rounds start from a fresh store, half keep one store across rounds (kills land in
//! recovery too). Loop devices and mounts are the test's own, detached and unmounted at the
//! end. CI scale: 60 + 60 rounds per file system (about 20 s); more with ATOMFS_JOURNAL_KILL_ROUNDS=N.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crash::torture::{run_child, torture, KillTarget, TortureConfig};
use journal::{HostJournalStore, JournalConfig, StoreConfig};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use store::{Result, Store};

const POOL_ENV: &str = "ATOMFS_JOURNAL_KILL_POOL";
const SEED_ENV: &str = "ATOMFS_JOURNAL_KILL_SEED";
const PM_DIR_ENV: &str = "ATOMFS_JOURNAL_KILL_PM_DIR";

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 64,
            checkpoint_period: Some(Duration::from_millis(20)),
            ..JournalConfig::test_min()
        },
        capacity_bytes: 64 << 20,
        log_compact_min: 16 << 10,
        ..StoreConfig::default()
    }
}

/// A round's "pool" is a directory on the mounted image (the home directory inside it);
/// its PM journal is a file of the same name in `pm_dir` (/dev/shm).
struct LoopTarget {
    pm_dir: PathBuf,
}

impl LoopTarget {
    fn pm(&self, path: &Path) -> PathBuf {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        self.pm_dir.join(format!("{}.pm", name.unwrap_or_default()))
    }
}

impl KillTarget for LoopTarget {
    fn name(&self) -> String {
        "journal (home on a loop image)".into()
    }
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        let home = path.join("home");
        std::fs::create_dir_all(&home).map_err(|e| store::Error::Io {
            path: home.display().to_string(),
            op: "create directory",
            source: e,
        })?;
        let _ = std::fs::remove_file(self.pm(path));
        Ok(Box::new(HostJournalStore::create(
            &home,
            &self.pm(path),
            &config(),
        )?))
    }
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>> {
        Ok(Box::new(HostJournalStore::open(
            &path.join("home"),
            &self.pm(path),
            &config(),
        )?))
    }
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
        let _ = std::fs::remove_file(self.pm(path));
    }
}

/// The victim: runs only when the parent started this binary for it.
#[test]
fn kill_child() {
    let (Ok(pool), Ok(seed), Ok(pm_dir)) = (
        std::env::var(POOL_ENV),
        std::env::var(SEED_ENV),
        std::env::var(PM_DIR_ENV),
    ) else {
        return;
    };
    let target = LoopTarget {
        pm_dir: PathBuf::from(pm_dir),
    };
    run_child(&target, Path::new(&pool), seed.parse().unwrap()).unwrap();
}

fn run(cmd: &str, args: &[&str]) -> std::result::Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A loop-mounted image in /dev/shm: unmounted, detached (by the device attached here) and
/// removed on drop.
struct LoopFs {
    image: PathBuf,
    device: String,
    mount: PathBuf,
    mounted: bool,
}

impl LoopFs {
    fn new(mkfs: &str, mkfs_args: &[&str]) -> std::result::Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions.
        #[allow(unsafe_code)]
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: loop devices and mount need it".into());
        }
        for tool in [mkfs, "losetup", "mount", "umount"] {
            if !test_support::have(tool) {
                return Err(format!("{tool} is not installed"));
            }
        }
        let id = format!("{mkfs}-{}", std::process::id());
        let mut fs = LoopFs {
            image: PathBuf::from(format!("/dev/shm/atomfs-journal-kill-{id}.img")),
            device: String::new(),
            mount: PathBuf::from(format!("/dev/shm/atomfs-journal-kill-{id}.mnt")),
            mounted: false,
        };
        std::fs::create_dir_all(&fs.mount).map_err(|e| e.to_string())?;
        let img = fs.image.to_str().ok_or("image path")?.to_string();
        run("truncate", &["-s", "512M", &img])?;
        let mut args = mkfs_args.to_vec();
        args.push(&img);
        run(mkfs, &args)?;
        fs.device = run("losetup", &["-f", "--show", &img])?;
        let dir = fs.mount.to_str().ok_or("mount path")?.to_string();
        run("mount", &[&fs.device, &dir])?;
        fs.mounted = true;
        Ok(fs)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let dir = self.mount.to_string_lossy().into_owned();
            for _ in 0..50 {
                if run("umount", &[&dir]).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if !self.device.is_empty() {
            let _ = run("losetup", &["-d", &self.device]);
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

fn kill_torture(label: &str, mkfs: &str, mkfs_args: &[&str], seed: u64) {
    let fs = match LoopFs::new(mkfs, mkfs_args) {
        Ok(fs) => fs,
        Err(why) => return test_support::unavailable(&format!("kill torture on {label}"), &why),
    };
    let pm_dir = PathBuf::from(format!(
        "/dev/shm/atomfs-journal-kill-pm-{label}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&pm_dir).unwrap();
    let target = LoopTarget {
        pm_dir: pm_dir.clone(),
    };
    let rounds = std::env::var("ATOMFS_JOURNAL_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let exe = std::env::current_exe().unwrap();
    let child = |pool: &Path, seed: u64| {
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", "kill_child", "--nocapture", "--test-threads=1"])
            .env(POOL_ENV, pool)
            .env(SEED_ENV, seed.to_string())
            .env(PM_DIR_ENV, &pm_dir);
        cmd
    };
    let cfg = TortureConfig {
        seed,
        rounds,
        dir: fs.mount.clone(),
        kill_after_ms_max: 80,
        ..TortureConfig::default()
    };
    let fresh = torture(&target, &child, &cfg);
    println!("{label}: {}", fresh.summary());
    let again = torture(
        &target,
        &child,
        &TortureConfig {
            seed: seed + 1,
            continue_pool: true,
            ..cfg
        },
    );
    println!("{label}: {} (one store across rounds)", again.summary());
    drop(fs);
    let _ = std::fs::remove_dir_all(&pm_dir);
    for (what, report) in [("fresh stores", &fresh), ("one store", &again)] {
        if let Some(first) = report.violations.first() {
            panic!(
                "{label}, {what}: {} violations, first: {first}",
                report.violations.len()
            );
        }
    }
    assert!(
        fresh.kills + again.kills >= 2 * rounds * 9 / 10,
        "{label}: too few children were killed: {} + {} of {} rounds",
        fresh.kills,
        again.kills,
        2 * rounds
    );
    assert!(
        fresh.images + again.images >= rounds,
        "{label}: too few recovered stores checked: {} + {}",
        fresh.images,
        again.images
    );
}

#[test]
fn kill_torture_home_on_ext4() {
    if std::env::var(POOL_ENV).is_ok() {
        return;
    }
    kill_torture("ext4", "mkfs.ext4", &["-q", "-F"], 71);
}

#[test]
fn kill_torture_home_on_xfs() {
    if std::env::var(POOL_ENV).is_ok() {
        return;
    }
    kill_torture("xfs", "mkfs.xfs", &["-q", "-f"], 81);
}
