//! The ext4 RAM disk the ext4 baselines run on, as in the seeds' baselines: an image file in
//! /dev/shm, `mkfs.ext4`, `mount -o loop`. When mounting is impossible (not root, no loop
//! device) it falls back to a plain directory under the system temp dir and says so in
//! [`Ext4Disk::label`] (and the JSON). Unmounted and deleted on drop, also on error and after
//! Ctrl-C (the runner turns SIGINT into an error that unwinds to here).

use crate::error::{BenchError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Ext4Disk {
    root: PathBuf,
    image: Option<PathBuf>,
    mounted: bool,
    /// The block device's name under /sys/fs/ext4 (e.g. "loop3") when mounted.
    device: Option<String>,
    fallback: Option<String>,
}

fn run(cmd: &mut Command) -> std::result::Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The device mounted at `mount_point`, from /proc/self/mounts.
fn mounted_device(mount_point: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let want = mount_point.to_str()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let source = fields.next()?;
        let target = fields.next()?;
        (target == want).then(|| source.trim_start_matches("/dev/").to_string())
    })
}

impl Ext4Disk {
    /// An ext4 file system of `size` bytes on a /dev/shm-backed loop device, or the fallback.
    pub fn create(size: u64) -> Result<Self> {
        let root = crate::scratch_dir_path("ext4");
        std::fs::create_dir_all(&root).map_err(|e| BenchError::io("mkdir", &root, e))?;
        let image = crate::scratch_path("ext4.img");
        let mut disk = Ext4Disk {
            root,
            image: None,
            mounted: false,
            device: None,
            fallback: None,
        };
        if let Err(why) = disk.mount_image(&image, size) {
            let _ = std::fs::remove_file(&image);
            disk.fallback = Some(format!(
                "FALLBACK: plain directory {} (ext4 loop mount failed: {why})",
                disk.root.display()
            ));
        }
        Ok(disk)
    }

    fn mount_image(&mut self, image: &Path, size: u64) -> std::result::Result<(), String> {
        let file = std::fs::File::create(image).map_err(|e| format!("create image: {e}"))?;
        file.set_len(size).map_err(|e| format!("size image: {e}"))?;
        drop(file);
        self.image = Some(image.to_path_buf());
        // Initialise inode tables and journal now, so no lazy-init thread writes during runs.
        run(Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-b",
                "4096",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
            ])
            .arg(image))?;
        run(Command::new("mount")
            .args(["-t", "ext4", "-o", "loop"])
            .arg(image)
            .arg(&self.root))?;
        self.mounted = true;
        self.device = mounted_device(&self.root);
        Ok(())
    }

    /// Directory to create files in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this is the real ext4 RAM disk (not the fallback directory).
    pub fn is_ramdisk(&self) -> bool {
        self.mounted
    }

    /// What this medium is, for tables and JSON.
    pub fn label(&self) -> String {
        match &self.fallback {
            Some(f) => f.clone(),
            None => format!(
                "ext4 on loop device {} (image {})",
                self.device.as_deref().unwrap_or("?"),
                self.image
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
        }
    }

    /// Bytes ext4 has submitted to the device since mount (data, metadata and jbd2
    /// journal), from /sys/fs/ext4/DEV/lifetime_write_kbytes; `None` on the fallback.
    /// Flushes dirty data first (syncfs) so that deferred writeback is counted.
    pub fn device_bytes_written(&self) -> Option<u64> {
        let dev = self.device.as_ref()?;
        let dir = std::fs::File::open(&self.root).ok()?;
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: syncfs on a valid open descriptor; no memory is passed.
            unsafe { libc::syncfs(dir.as_raw_fd()) };
        }
        let text =
            std::fs::read_to_string(format!("/sys/fs/ext4/{dev}/lifetime_write_kbytes")).ok()?;
        text.trim().parse::<u64>().ok().map(|kb| kb * 1024)
    }
}

impl Drop for Ext4Disk {
    fn drop(&mut self) {
        if self.mounted {
            if run(Command::new("umount").arg(&self.root)).is_err() {
                // Busy (a file still open somewhere): detach lazily so nothing stays mounted.
                let _ = run(Command::new("umount").arg("-l").arg(&self.root));
            }
            self.mounted = false;
        }
        if let Some(image) = self.image.take() {
            let _ = std::fs::remove_file(image);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
