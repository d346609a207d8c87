//! Loop-mounted file system images in /dev/shm for the kernel tests (XFS reflink=1, Btrfs,
//! ext4): created, mounted, and always unmounted and detached by the device attached here.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

pub mod hostile;
pub mod kernel_suite;
pub mod posix_steps;

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
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

/// Skip a test whose environment is missing: print why, or fail under ATOMFS_REQUIRE_ALL=1.
pub fn skip(reason: &str) {
    if std::env::var("ATOMFS_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("required environment missing: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Xfs,
    /// XFS reflink=1 with the `exchange` incompat feature (XFS_IOC_EXCHANGE_RANGE), set
    /// with xfs_db as xfsprogs before 6.10 cannot set it at mkfs.
    XfsExchange,
    Btrfs,
}

/// XFS_SB_FEAT_INCOMPAT_EXCHRANGE.
const XFS_INCOMPAT_EXCHANGE: u64 = 0x40;

/// Set the `exchange` incompat bit in the superblock of the (unmounted) XFS image `img`.
fn set_exchange_bit(img: &str) -> Result<(), String> {
    let out = run("xfs_db", &["-c", "sb 0", "-c", "p features_incompat", img])?;
    let old = out
        .rsplit('=')
        .next()
        .map(str::trim)
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| format!("xfs_db: cannot read features_incompat from {out:?}"))?;
    let new = format!("{:#x}", old | XFS_INCOMPAT_EXCHANGE);
    run(
        "xfs_db",
        &[
            "-x",
            "-c",
            "sb 0",
            "-c",
            &format!("write -d features_incompat {new}"),
            img,
        ],
    )?;
    Ok(())
}

/// A loop-mounted image in /dev/shm; unmounted, detached and removed on drop.
pub struct LoopFs {
    kind: Kind,
    image: PathBuf,
    device: String,
    mount: PathBuf,
    mounted: bool,
}

impl LoopFs {
    pub fn new(kind: Kind, tag: &str) -> Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions.
        #[allow(unsafe_code)]
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: loop devices and mount need it".into());
        }
        let id = format!("{kind:?}-{tag}-{}", std::process::id()).to_lowercase();
        let image = PathBuf::from(format!("/dev/shm/atomfs-remap-{id}.img"));
        let mount = PathBuf::from(format!("/dev/shm/atomfs-remap-{id}.mnt"));
        std::fs::create_dir_all(&mount).map_err(|e| e.to_string())?;
        let img = image.to_str().ok_or("image path")?.to_string();
        let mut fs = LoopFs {
            kind,
            image,
            device: String::new(),
            mount,
            mounted: false,
        };
        run("truncate", &["-s", "512M", &img])?;
        match kind {
            Kind::Xfs => run("mkfs.xfs", &["-q", "-f", "-m", "reflink=1", &img])?,
            Kind::XfsExchange => {
                run("mkfs.xfs", &["-q", "-f", "-m", "reflink=1", &img])?;
                set_exchange_bit(&img)?;
                String::new()
            }
            Kind::Btrfs => run("mkfs.btrfs", &["-q", "-f", &img])?,
        };
        fs.device = run("losetup", &["-f", "--show", &img])?;
        fs.mount_it()?;
        Ok(fs)
    }

    pub fn dir(&self) -> &Path {
        &self.mount
    }

    fn mount_it(&mut self) -> Result<(), String> {
        let dir = self.mount.to_str().ok_or("mount path")?.to_string();
        run("mount", &[&self.device, &dir])?;
        self.mounted = true;
        Ok(())
    }

    fn unmount(&mut self) -> Result<(), String> {
        let dir = self.mount.to_str().ok_or("mount path")?.to_string();
        let mut result = run("umount", &[&dir]);
        for _ in 0..50 {
            if result.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            result = run("umount", &[&dir]);
        }
        result?;
        self.mounted = false;
        Ok(())
    }

    /// Cut the file system off without flushing (XFS: `xfs_io -x -c shutdown`), then
    /// `stop` what runs on it, `release` every file it holds, unmount and mount again.
    pub fn crash_and_remount_with(
        &mut self,
        stop: impl FnOnce(),
        release: impl FnOnce(),
    ) -> Result<(), String> {
        assert!(
            matches!(self.kind, Kind::Xfs | Kind::XfsExchange),
            "shutdown without flush: XFS only here"
        );
        let dir = self.mount.to_str().ok_or("mount path")?.to_string();
        let cut = run("xfs_io", &["-x", "-c", "shutdown", &dir]);
        stop();
        release();
        cut?;
        self.unmount()?;
        self.mount_it()
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = self.unmount();
        }
        if !self.device.is_empty() {
            let _ = Command::new("losetup").args(["-d", &self.device]).output();
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}
