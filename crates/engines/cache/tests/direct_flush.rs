//! Flushes write whole chunks home with O_DIRECT where the home file system allows it (an
//! untorn 4 KiB direct write, RWF_ATOMIC), else through the page cache + fdatasync, with the
//! reason in `stats`. On XFS and ext4 loop images in /dev/shm (root; skipped otherwise, a
//! failure under ATOMFS_REQUIRE_ALL=1) and on tmpfs; the home file holds the data after the
//! flush either way, and after an unmount and a remount of the loop file system.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, HostCacheStore};
use std::path::{Path, PathBuf};
use std::process::Command;
use store::path::{read_file, OpenOptions};
use store::Store;

const C: usize = 4096;

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
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

/// A loop-mounted image in /dev/shm: unmounted, detached and removed on drop, by the device
/// and mount point made here.
struct LoopFs {
    image: PathBuf,
    device: String,
    mount: PathBuf,
    mounted: bool,
}

impl LoopFs {
    fn new(mkfs: &str, args: &[&str]) -> Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: loop devices and mount need it".into());
        }
        let id = format!("{mkfs}-{}", std::process::id());
        let mut fs = LoopFs {
            image: PathBuf::from(format!("/dev/shm/atomfs-cache-direct-{id}.img")),
            device: String::new(),
            mount: PathBuf::from(format!("/dev/shm/atomfs-cache-direct-{id}.mnt")),
            mounted: false,
        };
        std::fs::create_dir_all(&fs.mount).map_err(|e| e.to_string())?;
        let img = fs.image.to_str().ok_or("image path")?.to_string();
        run("truncate", &["-s", "300M", &img])?;
        let mut all: Vec<&str> = args.to_vec();
        all.push(&img);
        run(mkfs, &all)?;
        fs.device = run("losetup", &["-f", "--show", &img])?;
        fs.remount()?;
        Ok(fs)
    }

    fn dir(&self) -> &Path {
        &self.mount
    }

    fn remount(&mut self) -> Result<(), String> {
        let dir = self.mount.to_str().ok_or("mount path")?.to_string();
        if self.mounted {
            run("umount", &[&dir])?;
            self.mounted = false;
        }
        run("mount", &[&self.device, &dir])?;
        self.mounted = true;
        Ok(())
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mount).output();
        }
        if !self.device.is_empty() {
            let _ = Command::new("losetup").args(["-d", &self.device]).output();
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

fn stat(s: &dyn Store, name: &str) -> u64 {
    s.stats()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// Write two whole chunks and a partial one, flush, and return the store's flush mode
/// (flush_direct, flush_buffered_reason, flush_direct_writes) and the data written.
fn flush_in(home: &Path, pool: &Path) -> ((u64, u64, u64), Vec<u8>) {
    std::fs::create_dir_all(home).unwrap();
    let config = CacheConfig {
        flush_period: None,
        ..CacheConfig::default()
    };
    let s = HostCacheStore::create(home, pool, 8 << 20, &config).unwrap();
    let data: Vec<u8> = (0..2 * C + 100).map(|i| (i % 251) as u8).collect();
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(&s, "/f", None)
        .unwrap();
    s.write(fh, 0, &data).unwrap();
    s.release(fh).unwrap();
    assert_eq!(s.flush_home().unwrap(), 3);
    assert_eq!(
        std::fs::read(home.join("f")).unwrap(),
        data,
        "home after flush"
    );
    let mode = (
        stat(&s, "flush_direct"),
        stat(&s, "flush_buffered_reason"),
        stat(&s, "flush_direct_writes"),
    );
    assert_eq!(read_file(&s, "/f").unwrap(), data);
    s.unmount().unwrap();
    (mode, data)
}

#[test]
fn tmpfs_falls_back_to_buffered_writes_and_says_why() {
    let dir = test_support::scratch("cache-direct-tmpfs");
    if !dir.starts_with("/dev/shm") {
        test_support::unavailable("cache O_DIRECT fallback", "no /dev/shm (tmpfs)");
        return;
    }
    let ((direct, reason, writes), _) = flush_in(&dir.join("home"), &dir.join("c.pool"));
    assert_eq!(
        (direct, writes),
        (0, 0),
        "tmpfs takes no untorn direct write"
    );
    assert!(reason == 1 || reason == 2, "reason {reason}");
    eprintln!("tmpfs: flush_buffered_reason {reason}");
}

/// On a loop file system: returns (flush_direct, reason, direct writes), after checking the
/// data is in the home file after a remount.
fn on_loop(mkfs: &str, args: &[&str]) -> Option<(u64, u64, u64)> {
    let mut fs = match LoopFs::new(mkfs, args) {
        Ok(fs) => fs,
        Err(why) => {
            test_support::unavailable(&format!("cache O_DIRECT on {mkfs}"), &why);
            return None;
        }
    };
    let pool = PathBuf::from(format!(
        "/dev/shm/atomfs-cache-direct-{mkfs}-{}.pool",
        std::process::id()
    ));
    let (mode, data) = flush_in(&fs.dir().join("home"), &pool);
    let _ = std::fs::remove_file(&pool);
    fs.remount().unwrap();
    assert_eq!(
        std::fs::read(fs.dir().join("home/f")).unwrap(),
        data,
        "{mkfs}: on the device"
    );
    eprintln!(
        "{mkfs}: flush_direct {} reason {} direct writes {}",
        mode.0, mode.1, mode.2
    );
    Some(mode)
}

#[test]
fn xfs_flushes_whole_chunks_with_o_direct() {
    let Some((direct, reason, writes)) = on_loop("mkfs.xfs", &["-q", "-f"]) else {
        return;
    };
    assert_eq!(
        (direct, reason),
        (1, 0),
        "XFS offers untorn direct 4 KiB writes"
    );
    assert_eq!(
        writes, 2,
        "the two whole chunks went direct, the partial one buffered"
    );
}

#[test]
fn ext4_flushes_with_o_direct_or_says_why_not() {
    let Some((direct, reason, writes)) = on_loop("mkfs.ext4", &["-q", "-F"]) else {
        return;
    };
    match direct {
        1 => assert_eq!((reason, writes), (0, 2)),
        _ => assert_eq!(
            (reason, writes),
            (2, 0),
            "ext4 takes O_DIRECT; only RWF_ATOMIC may lack"
        ),
    }
}
